"""`episode/reroll`: a recorded episode edited at one turn and played on from there by the run's policy in the run's env.
Left as recorded at temperature 0 it repeats the recorded continuation token for token; an edit changes it; the
recorded turns run again through a fresh env (Tools in the run's isolation) to rebuild the env's state; a checkpoint's
weights sample when asked; the re-roll is stored beside the run and never touches its trajectories, events or
checkpoints; bad params get documented errors. (Refused off loopback without --allow-code: test_tool_rerun.py.)"""

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from agentrl.contract.config import load_config
from agentrl.contract.schemas import validator_for
from agentrl.models.saving import save_policy
from agentrl.models.tiny import build_tiny_model_and_tokenizer, build_tiny_tokenizer
from agentrl.rollout.branch import CannotBranch, NoSuchTurn, branch_point
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.run.reroll import reroll
from agentrl.run.reroll_store import read_reroll
from agentrl.run.trainer import train
from agentrl.server import protocol as p
from server_harness import ServerProcess

ENV_SOURCE = """
import random

from agentrl import EpisodeScore, StepResult, Tool, ToolEnv


class Lookup(Tool):
    name = "lookup"
    description = "The value stored under a key, and how many lookups this episode made."
    parameters = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}

    def __init__(self):
        self.calls = 0  # the episode's own state: a re-roll rebuilds it by playing the recorded turns again

    def execute(self, key):
        self.calls += 1
        return f"gold #{self.calls}"


class Roll(Tool):
    name = "roll"
    description = "A random number: a Tool that answers differently every time."
    parameters = {"type": "object", "properties": {}}

    def execute(self):
        return random.random()


class TalkEnv(ToolEnv):
    def __init__(self, **args):
        self.tools = [Lookup(), Roll()]

    def reset(self, task):
        self.turns = 0
        return [{"role": "user", "content": "key " + task["key"]}]

    def step(self, text, calls):
        self.turns += 1
        said = "; ".join(str(call.result) for call in calls) or "go on"
        return StepResult(messages=[{"role": "tool", "content": f"turn {self.turns}: {said}"}], reward=0.25)

    def score(self, final_text):
        return EpisodeScore(reward=float(len(final_text)))
"""
LOOKUP = '<tool_call>{"name": "lookup", "arguments": {"key": "3"}}</tool_call>'
ROLL = '<tool_call>{"name": "roll", "arguments": {}}</tool_call>'
CONFIG = """name: {name}
model: {{path: {model}}}
env: {{module: env.py, class_name: TalkEnv}}
data: {{train: tasks.jsonl}}
rollout: {{group_size: 1, max_turns: 3, max_new_tokens: {tokens}, temperature: 0, tool_isolation: {isolation}}}
"""
TOKENIZER = build_tiny_tokenizer()
MODEL_SEED = 7  # an untied tiny model whose greedy text these contexts change (checked by the last test)


@pytest.fixture(scope="module")
def env_folder(tmp_path_factory):
    """The env, its task, and an untied tiny model (its greedy text depends on what it read: models/tiny.py)."""
    folder = tmp_path_factory.mktemp("reroll")
    (folder / "env.py").write_text(ENV_SOURCE)
    (folder / "tasks.jsonl").write_text(json.dumps({"id": "k3", "key": "3"}) + "\n")
    model, tokenizer = build_tiny_model_and_tokenizer(seed=MODEL_SEED, tied=False)
    save_policy(model, tokenizer, folder / "model")
    return folder


def recorded_run(folder: Path, name: str, isolation: str, policy: ScriptedPolicy | None = None) -> tuple[Path, dict]:
    """A Try run of one episode (greedy, or scripted: turns long enough for a call) and its trajectory record."""
    config = CONFIG.format(name=name, model=folder / "model", isolation=isolation, tokens=32 if policy else 8)
    (folder / f"{name}.agentrl.yaml").write_text(config)
    run_dir = train(
        load_config(folder / f"{name}.agentrl.yaml"),
        runs_dir=folder / f"runs-{name}",
        rollout_only_episodes=1,
        config_base_dir=folder,
        policy=policy,
    )
    return run_dir, json.loads(next((run_dir / "trajectories").glob("*.jsonl")).read_text().splitlines()[0])


@pytest.fixture(scope="module")
def greedy(env_folder):
    """Sampled greedily by the hf engine: three turns, each read an observation."""
    run_dir, record = recorded_run(env_folder, "greedy", "thread")
    assert [t["observation"] for t in record["turns"]] == ["turn 1: go on", "turn 2: go on", "turn 3: go on"]
    return run_dir, record


@pytest.fixture(scope="module")
def scripted(env_folder):
    """Tools in a worker process: turn 0 looks up (gold #1), turn 1 rolls a random number, turn 2 answers."""
    run_dir, record = recorded_run(env_folder, "scripted", "process", ScriptedPolicy([LOOKUP, ROLL, "done"]))
    assert record["turns"][0]["observation"] == "turn 1: gold #1"
    return run_dir, record


def rerolled(run_dir: Path, record: dict, turn: int, edit: str, text: str, **extra) -> tuple[dict, list[dict]]:
    request = {
        "reroll_id": f"20260101-000000-{hashlib.sha1(repr((turn, edit, text, extra)).encode()).hexdigest()[:6]}",
        "record": record,
        "turn": turn,
        "edit": edit,
        "text": text,
        "policy_step": None,
        "samples": 2,
        "temperature": 0.0,
        "seed": 0,
        "code": "current",
        **extra,
    }
    said: list[str] = []
    stored = reroll(run_dir, request, said.append)
    assert said[0].startswith("loading the policy") and said[-1].startswith("sampling")
    again, records = read_reroll(run_dir, stored["reroll_id"])
    assert again == stored
    validator_for("run-folder.schema.json", "reroll").validate(stored)
    return stored, records


def sampled_after(record: dict, turn: int) -> list[int]:
    """The ids the policy sampled after turn `turn`."""
    tokens = record["tokens"]
    return [i for i, r, t in zip(tokens["ids"], tokens["role"], tokens["turn"]) if r == "assistant" and t > turn]


@pytest.mark.parametrize(("turn", "edit"), [(0, "observation"), (1, "observation"), (1, "assistant")])
def test_left_as_recorded_at_temperature_0_it_repeats_the_recorded_continuation_token_for_token(
    greedy, trajectory_validator, turn, edit
):
    run_dir, record = greedy
    text = record["turns"][turn]["assistant" if edit == "assistant" else "observation"]
    stored, records = rerolled(run_dir, record, turn, edit, text)
    assert stored["differences"] == [] and stored["recorded_text"] == text and stored["policy_step"] is None
    assert [r["id"] for r in records] == [f"reroll-{stored['reroll_id']}-0", f"reroll-{stored['reroll_id']}-1"]
    for again in records:
        trajectory_validator.validate(again)
        for key in ("ids", "role", "turn", "loss_mask"):
            assert again["tokens"][key] == record["tokens"][key], key
        assert again["tokens"]["logprob"] == pytest.approx(record["tokens"]["logprob"], abs=1e-5)
        assert [t["assistant"] for t in again["turns"]] == [t["assistant"] for t in record["turns"]]
        assert again["reward"] == record["reward"] and again["status"] == record["status"]
        assert (again["run_id"], again["step"], again["group"]) == (record["run_id"], record["step"], record["group"])
    assert stored["rewards"] == [record["reward"]] * 2


def test_an_edited_observation_is_what_the_model_reads_and_changes_its_continuation(greedy):
    run_dir, record = greedy
    edit = "the key is 3 and its value is gold: say gold"
    stored, records = rerolled(run_dir, record, 0, "observation", edit)
    sampled_end = max(
        i for i, t in enumerate(record["tokens"]["turn"]) if t == 0 and record["tokens"]["role"][i] == "assistant"
    )
    for again in records:
        assert again["tokens"]["ids"][: sampled_end + 1] == record["tokens"]["ids"][: sampled_end + 1]
        appended = "".join(
            text
            for text, role, t in zip(again["tokens"]["text"], again["tokens"]["role"], again["tokens"]["turn"])
            if role == "tool" and t == 0
        )
        assert appended == "<|im_end|>\n<|im_start|>tool\n" + edit + "<|im_end|>\n<|im_start|>assistant\n"
        assert again["turns"][0]["observation"] == edit
        assert sampled_after(again, 0) != sampled_after(record, 0), "an edited observation changes what follows"
    assert records[0]["tokens"]["ids"] == records[1]["tokens"]["ids"], "greedy: every sample the same"


def test_an_edited_assistant_turn_is_tokenized_as_written_and_the_recorded_turns_rebuild_the_envs_state(scripted):
    """The prefix's Tools run again in the run's tool worker process: the edited call is the episode's second lookup.
    The Roll Tool answers otherwise than recorded: said, while the kept tokens and observation stay the recorded."""
    run_dir, record = scripted
    stored, records = rerolled(run_dir, record, 2, "assistant", LOOKUP, samples=1)
    [differs] = stored["differences"]
    assert differs["turn"] == 1 and differs["recorded"] == record["turns"][1]["observation"] != differs["now"]
    assert differs["now"].startswith("turn 2: 0.")
    [again] = records
    start = record["tokens"]["turn"].index(2)
    assert again["tokens"]["ids"][:start] == record["tokens"]["ids"][:start]
    edited = [
        i
        for i, (r, t) in enumerate(zip(again["tokens"]["role"], again["tokens"]["turn"]))
        if t == 2 and r == "assistant"
    ]
    assert [again["tokens"]["ids"][i] for i in edited] == TOKENIZER(LOOKUP, add_special_tokens=False)["input_ids"]
    assert all(again["tokens"]["logprob"][i] is None for i in edited), "the edited text was not sampled"
    assert again["turns"][1]["observation"] == record["turns"][1]["observation"], "what the model read"
    assert again["turns"][2]["tool_calls"][0]["result"] == "gold #2"
    assert again["turns"][2]["observation"] == "turn 3: gold #2"
    assert again["status_reason"] == "max_turns"


def test_a_checkpoints_weights_sample_when_asked(greedy, tmp_path):
    """A checkpoint as the trainer writes one (save_policy into checkpoints/step-N/policy), of other weights."""
    run_dir = Path(shutil.copytree(greedy[0], tmp_path / greedy[0].name))
    other, tokenizer = build_tiny_model_and_tokenizer(seed=MODEL_SEED + 1, tied=False)
    save_policy(other, tokenizer, run_dir / "checkpoints" / "step-000004" / "policy")
    record = greedy[1]
    text = record["turns"][0]["observation"]
    stored, records = rerolled(run_dir, record, 0, "observation", text, policy_step=4, samples=1)
    assert stored["policy_step"] == 4
    assert sampled_after(records[0], 0) != sampled_after(record, 0), "other weights, another continuation"


def test_where_a_branch_cannot_start(greedy):
    record = greedy[1]
    with pytest.raises(NoSuchTurn, match="has no turn 3: it has 3"):
        branch_point(record, 3, "assistant", "x")
    with pytest.raises(CannotBranch, match="cannot be empty"):
        branch_point(record, 0, "assistant", "")
    done = json.loads(json.dumps(record))
    done["turns"][1]["done"] = True
    with pytest.raises(CannotBranch, match="ended the episode"):
        branch_point(done, 1, "observation", "x")
    point = branch_point(record, 1, "observation", "x")
    assert point.kept("x") == point.keep_edited < point.kept(record["turns"][1]["observation"]) == point.keep


def run_files(run_dir: Path) -> dict[str, str]:
    """Every file of the run's own history, by its hash."""
    return {
        str(path.relative_to(run_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and path.relative_to(run_dir).parts[0] != "rerolls"
    }


@pytest.fixture(scope="module")
def server(greedy, tmp_path_factory):
    runs = tmp_path_factory.mktemp("served")
    shutil.copytree(greedy[0], runs / greedy[0].name, ignore=shutil.ignore_patterns("rerolls"))  # not the tests' above
    running = ServerProcess(runs)
    yield running, runs / greedy[0].name
    running.stop()


def answered_while_it_runs(client, params: dict) -> dict:
    """The re-roll's result, checking that the same connection's heartbeat (server/ping) is answered before it: a
    re-roll waits on its child process for seconds to minutes, and an editor drops a connection whose ping goes
    unanswered for 15 s."""
    client.ws.send(json.dumps({"jsonrpc": "2.0", "id": "reroll", "method": "episode/reroll", "params": params}))
    client.ws.send(json.dumps({"jsonrpc": "2.0", "id": "ping", "method": "server/ping", "params": {}}))
    answers = []
    while len(answers) < 2:
        message = json.loads(client.ws.recv(timeout=300))
        if "method" in message:
            client.notifications.append(message)
        else:
            answers.append(message)
    assert [a["id"] for a in answers] == ["ping", "reroll"], "the ping waited for the re-roll"
    validator_for("rpc.schema.json", "episode/reroll.result").validate(answers[1]["result"])
    return answers[1]["result"]


def test_through_the_server_it_reports_progress_is_stored_listed_and_never_touches_the_run(server, greedy):
    running, run_dir = server
    record = greedy[1]
    client = running.client()
    before = run_files(run_dir)
    total = client.request("trajectory/query", {"runId": run_dir.name})["total"]
    params = {
        "runId": run_dir.name,
        "trajectoryId": record["id"],
        "turn": 0,
        "edit": "observation",
        "text": "zanzibar is the answer",
        "policy": "latest",
        "samples": 2,
        "temperature": 0.7,
        "progressToken": "t-1",
    }
    result = answered_while_it_runs(client, params)
    summary = result["reroll"]
    assert summary["policyStep"] is None, "latest with no checkpoint: the base model"
    assert (summary["trajectoryId"], summary["turn"], summary["edit"], summary["samples"]) == (
        record["id"],
        0,
        "observation",
        2,
    )
    assert [r["turns"][0]["observation"] for r in result["records"]] == ["zanzibar is the answer"] * 2
    said = [n["params"]["message"] for n in client.notifications if n["method"] == "episode/rerollProgress"]
    assert said and said[0].startswith("loading the policy")
    assert all(
        n["params"]["progressToken"] == "t-1" for n in client.notifications if n["method"] == "episode/rerollProgress"
    )

    listed = client.request("reroll/list", {"runId": run_dir.name, "trajectoryId": record["id"]})
    assert listed["rerolls"] == [summary] and listed["checkpoints"] == [] and listed["temperature"] == 0
    assert client.request("reroll/list", {"runId": run_dir.name, "trajectoryId": "9-9-9"})["rerolls"] == []
    assert client.request("reroll/get", {"runId": run_dir.name, "rerollId": summary["rerollId"]}) == result

    assert run_files(run_dir) == before, "the run's events, trajectories and checkpoints are never written"
    assert client.request("trajectory/query", {"runId": run_dir.name})["total"] == total
    found = client.request("trajectory/search", {"runIds": [run_dir.name], "text": "zanzibar"})
    assert found["total"] == 0, "a re-roll is not among the run's trajectories"
    client.close()


def test_through_the_server_bad_params_get_documented_errors_and_the_runs_own_code_can_re_roll(
    server, greedy, env_folder
):
    running, run_dir = server
    record = greedy[1]
    client = running.client()
    base = {"runId": run_dir.name, "trajectoryId": record["id"], "turn": 0, "edit": "observation", "text": "x"}
    base |= {"policy": "base", "samples": 1, "temperature": 0}

    def error(**change):
        return client.call("episode/reroll", {**base, **change}, timeout=120)["error"]

    assert error(trajectoryId="9-9-9")["code"] == p.TRAJECTORY_NOT_FOUND
    no_turn = error(turn=7)
    assert no_turn["code"] == p.TRAJECTORY_NOT_FOUND and "has no turn 7: it has 3" in no_turn["message"]
    no_checkpoint = error(policy=5)
    assert no_checkpoint["code"] == p.RUN_STATE_CONFLICT
    assert "has no checkpoint at step 5; it has none (pick the base model)" in no_checkpoint["message"]
    assert error(edit="assistant", text="")["code"] == p.INVALID_PARAMS
    assert error(samples=9)["code"] == p.INVALID_PARAMS and error(runId="nope")["code"] == p.RUN_NOT_FOUND
    missing = client.call("reroll/get", {"runId": run_dir.name, "rerollId": "20260101-000000-abcdef"})["error"]
    assert missing["code"] == p.TRAJECTORY_NOT_FOUND
    assert client.call("reroll/get", {"runId": run_dir.name, "rerollId": "../x"})["error"]["code"] == p.INVALID_PARAMS

    (env_folder / "env.py").write_text("raise ImportError('the env is half edited')\n")
    try:
        broken = error()
        recorded_code = client.call("episode/reroll", {**base, "code": "snapshot"}, timeout=300)["result"]["reroll"]
    finally:
        (env_folder / "env.py").write_text(ENV_SOURCE)
    assert broken["code"] == p.REROLL_FAILED and "the env is half edited" in broken["message"]
    assert recorded_code["code"] == "snapshot", "the run's own code (RUN/code/) re-rolls while today's does not import"
    assert not list(run_dir.glob("rerolls/.tmp-*")), "a failed re-roll leaves nothing half written"
    client.close()


def test_the_untied_tiny_model_writes_what_its_context_makes_it():
    """What the tests above lean on (models/tiny.py): tied, a random tiny model repeats the context's last token."""
    for tied, differs in ((True, False), (False, True)):
        model, tokenizer = build_tiny_model_and_tokenizer(seed=MODEL_SEED, tied=tied)
        outputs = []
        for text in ("turn 1: go on", "the key is 3 and its value is gold"):
            ids = torch.tensor(
                [
                    tokenizer.apply_chat_template(
                        [{"role": "user", "content": text}], add_generation_prompt=True, return_dict=False
                    )
                ]
            )
            outputs.append(model.generate(ids, max_new_tokens=6, do_sample=False)[0, ids.shape[1] :].tolist())
        assert (outputs[0] != outputs[1]) is differs


@pytest.mark.parametrize("damaged", [None, ["a", None], {"text": "a"}], ids=["null", "list", "object"])
def test_a_record_whose_text_is_damaged_into_null_a_list_or_an_object_is_refused_naming_where_not_a_type_error(
    greedy, tmp_path, damaged
):
    """Issue #44, item 13: a step file is anyone's who can write the runs folder, and a record whose assistant text
    is no text reached the parsers and the tokenizer of the re-roll's child as a TypeError naming nothing ("expected
    string or bytes-like object", "TextEncodeInput must be Union[...]"). The server checks a record whole
    (trajectory.schema.json) before it plays it again: a re-roll and a tool re-run are refused naming where."""
    import asyncio

    from test_hostile_run_files import ask, in_process_server

    run_dir = Path(shutil.copytree(greedy[0], tmp_path / "runs" / greedy[0].name))
    record = json.loads(json.dumps(greedy[1]))
    record["turns"][0]["assistant"] = damaged
    [step_file] = (run_dir / "trajectories").glob("*.jsonl")
    step_file.write_text(json.dumps(record) + "\n")
    request = {"reroll_id": "20260101-000000-abcdef", "record": record, "turn": 1, "edit": "assistant", "text": "x"}
    with pytest.raises(TypeError):  # what the child met, unchecked
        reroll(
            run_dir,
            {**request, "policy_step": None, "samples": 1, "temperature": 0, "seed": 0, "code": "current"},
            print,
        )
    server, client = in_process_server(run_dir.parent)
    asked = {"runId": run_dir.name, "trajectoryId": record["id"], "turn": 0}

    async def answers():
        await ask(server, client, "episode/reroll", {**asked, "edit": "observation", "text": "x", "policy": "base",
                                                     "samples": 1, "temperature": 0}, request_id=1)  # fmt: skip
        await ask(server, client, "tool/rerun", {**asked, "call": 0}, request_id=2)
        while len(client.connection.sent) < 2:
            await asyncio.sleep(0.05)
        return client.connection.sent

    for answer in asyncio.run(asyncio.wait_for(answers(), 60)):
        assert answer["error"]["code"] == p.TRAJECTORY_NOT_FOUND, answer
        assert f"trajectory {record['id']}'s record is damaged at turns/0/assistant" in answer["error"]["message"]
