"""trajectory/search over damaged and busy indexes (issue #44, items 1-3), through the server: concurrent first
searches agree with a full scan; a damaged or deleted index answers "rebuilding, N of M steps" (never -32603), is
rebuilt in the background and then answers whole, while trajectory/query is not kept waiting; a queued run has no
episodes yet; damaged run data is skipped and named in `damage`; -32602 only for what the client sent."""

import asyncio
import json
import random
import time

import pytest
from agentrl.run import episode_search
from agentrl.run.episode_search import DAMAGED_SUFFIX, SEARCH_FILE, EpisodeSearch
from agentrl.run.runstore import EVENTS_FILE, TRAJECTORIES_DIR, RunStore, trajectory_file_name
from agentrl.server import episode_searches
from agentrl.server import protocol as p
from agentrl.server.app import Client, ServerOptions, TrainerServer
from test_episode_search import write_step

RUN_ID = "searched-20261127-120000-abcdef"
STEPS, PER_STEP = 12, 16


class Connection:
    async def send(self, frame):
        pass


@pytest.fixture
def run(tmp_path):
    """A run of STEPS steps the trainer indexed as it wrote them, every record it wrote, and a server over it."""
    store = RunStore.create(tmp_path / "runs", RUN_ID, {"name": "x"}, {"name": "x", "mode": "train"})
    rng, records = random.Random(5), []
    for step in range(1, STEPS + 1):
        written, path = write_step(store, rng, step, groups=4, samples=PER_STEP // 4)
        EpisodeSearch(store.run_dir).index_step(step, written, path)
        records += written
    options = ServerOptions(
        host="127.0.0.1", port=0, runs_dir=tmp_path / "runs", bundles_dir=tmp_path / "b", token=None
    )
    return store, records, TrainerServer(options), Client(connection=Connection(), initialized=True)


@pytest.fixture
def slow_rebuild(monkeypatch):
    """Each step file read by a rebuild takes 0.3 s more: a rebuild of 3.6 s, which tests can watch at work."""
    reading = episode_search.read_step_file

    def slow_read(*args):
        time.sleep(0.3)
        return reading(*args)

    monkeypatch.setattr(episode_search, "read_step_file", slow_read)


async def ask(server, client, method, params, request_id=1):
    frame = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    answer = await server.handle_message(client, frame)
    if "result" in answer and method == "trajectory/search":
        p.validator_for("trajectory/search.result").validate(answer["result"])
    return answer


def search(server, client, **params):
    return asyncio.run(ask(server, client, "trajectory/search", {"runIds": [RUN_ID], "limit": 1000, **params}))


def test_eight_concurrent_first_searches_through_the_server_agree_with_a_full_scan(run):
    store, records, server, client = run

    async def eight():
        asked = {"runIds": [RUN_ID], "limit": 1000}
        return await asyncio.gather(*(ask(server, client, "trajectory/search", asked, i) for i in range(8)))

    for answer in [*asyncio.run(eight()), search(server, client)]:
        assert [item["summary"]["id"] for item in answer["result"]["items"]] == [r["id"] for r in records]
        assert answer["result"]["total"] == len(records)


@pytest.mark.parametrize("how", ["truncated", "deleted"])
def test_a_damaged_or_deleted_index_answers_rebuilding_then_whole(run, slow_rebuild, monkeypatch, how):
    """A truncated search.sqlite answered -32603 on every search, forever."""
    store, records, server, client = run
    monkeypatch.setattr(episode_searches, "CATCH_UP_WAIT_S", 0.0)  # not waited for: the first answer is the rebuild's
    index = store.run_dir / SEARCH_FILE
    for path in store.run_dir.glob(SEARCH_FILE + "-*"):
        path.unlink()
    if how == "truncated":
        index.write_bytes(index.read_bytes()[:8192])
    else:
        index.unlink()
    first = search(server, client)["result"]
    assert first["items"] == [] and first["total"] == 0 and first["rebuilding"]["total"] == STEPS
    deadline = time.monotonic() + 60
    while "rebuilding" in (answer := search(server, client)["result"]):
        assert time.monotonic() < deadline and answer["rebuilding"]["done"] <= STEPS
        time.sleep(0.05)
    assert answer["total"] == len(records) and "damage" not in answer
    assert (store.run_dir / (SEARCH_FILE + DAMAGED_SUFFIX)).is_file() == (how == "truncated")


def test_a_rebuild_holds_no_query_slot(run, slow_rebuild):
    """The rebuild held one of the two query slots search and trajectory/query share: other clients waited 34 s."""
    store, records, server, client = run
    for path in store.run_dir.glob(SEARCH_FILE + "*"):
        path.unlink()

    async def while_rebuilding():
        rebuilding = await asyncio.gather(
            *(ask(server, client, "trajectory/search", {"runIds": [RUN_ID]}, i) for i in range(3))
        )
        started = time.monotonic()
        queried = await ask(server, client, "trajectory/query", {"runId": RUN_ID, "limit": 5})
        return rebuilding, queried, time.monotonic() - started

    rebuilding, queried, query_s = asyncio.run(while_rebuilding())
    assert all(answer["result"]["rebuilding"]["total"] == STEPS for answer in rebuilding)
    assert "result" in queried and query_s < 1.0


def test_a_queued_run_has_no_episodes_yet(run, monkeypatch):
    """Searching a queued run (its process has not made its folder yet) answered -32603."""
    store, records, server, client = run
    queued = store.run_dir.parent / "queued-20261127-120000-abcdef"
    monkeypatch.setattr(server.state.runs, "run_dir", lambda run_id: queued)
    assert search(server, client)["result"] == {"items": [], "total": 0, "nextCursor": None}


def test_damaged_run_data_is_skipped_and_named_and_only_the_clients_mistakes_are_invalid_params(run):
    """A torn trajectory file or a bad health line failed the whole run's search (-32602, -32603); a NUL in the
    text answered -32603."""
    store, records, server, client = run
    step_file = store.run_dir / TRAJECTORIES_DIR / trajectory_file_name(STEPS)
    step_file.write_bytes(step_file.read_bytes()[:-30])  # torn inside its last line
    store.append_event("log", {"level": "info", "message": "a line before the damaged one"})
    log_size = (store.run_dir / EVENTS_FILE).stat().st_size
    with (store.run_dir / EVENTS_FILE).open("ab") as log:
        log.write(b'{"seq": 900, "time": 0, "type": "health", "data": {"code": 7}}\n')
    answer = search(server, client)["result"]
    assert answer["total"] == len(records) - 1
    health, torn = answer["damage"]
    assert health.startswith(f"{RUN_ID}: {EVENTS_FILE} at byte {log_size}: a health event's data breaks rpc.schema")
    assert torn == f"{RUN_ID}: {TRAJECTORIES_DIR}/{trajectory_file_name(STEPS)} line {PER_STEP}: not a JSON line"
    assert search(server, client, text="alpha\x00beta")["result"]["total"] > 0
    refused = search(server, client, text='" "')["error"]
    assert refused["code"] == p.INVALID_PARAMS and "at least one word" in refused["message"]
