"""The method handlers as plain functions (server/handlers_*.py): each called with the server's state, no socket and
no server process, answers as the protocol says; an error is the RpcError the dispatcher sends, the same code and
message a client gets over the connection."""

import asyncio
import json

import pytest
from agentrl.run.runstore import RunStore
from agentrl.server import handlers_env, handlers_rerolls, handlers_runs, handlers_server, handlers_trajectories
from agentrl.server import protocol as p
from agentrl.server.app import TrainerServer
from agentrl.server.client import Client
from agentrl.server.state import ServerOptions, ServerState

RUN_ID = "handled-20261127-120000-abcdef"
NAMESPACES = (handlers_server, handlers_runs, handlers_trajectories, handlers_rerolls, handlers_env)


class Connection:
    """A client's connection that nothing in these tests writes to."""

    async def send(self, frame):
        raise AssertionError(f"sent {frame}")


@pytest.fixture
def state(tmp_path):
    """A server's state over a runs folder holding one completed run of one step, with no trajectory and no
    re-roll."""
    store = RunStore.create(tmp_path / "runs", RUN_ID, {"rollout": {"temperature": 0.5}}, {"mode": "train"})
    store.append_event("status", {"status": "completed", "step": 1, "total_steps": 1})
    return ServerState(ServerOptions("127.0.0.1", 0, tmp_path / "runs", tmp_path / "bundles", None, runs_code=True))


def call(handler, state, params, client=None):
    """The handler's result."""
    return asyncio.run(handler(state, client, params))


def refused(handler, state, params) -> p.RpcError:
    """The error the handler raised."""
    with pytest.raises(p.RpcError) as raised:
        asyncio.run(handler(state, None, params))
    return raised.value


def test_every_method_has_one_handler_in_one_namespace():
    methods = [method for namespace in NAMESPACES for method in namespace.HANDLERS]
    assert sorted(methods) == sorted(p.METHODS)  # no method in two tables, none left out


def test_initialize_agrees_on_the_protocol_and_refuses_another_major_version(state):
    state.devices = {"cpu": {"name": "a test CPU", "cores": 2}, "gpus": []}  # what serve_forever describes
    client = Client(connection=Connection())
    answer = call(handlers_server.initialize, state, {"protocolVersion": p.PROTOCOL_VERSION}, client)
    p.validator_for("initialize.result").validate(answer)
    assert client.initialized and answer["protocolVersion"] == p.PROTOCOL_VERSION
    assert answer["devices"] == state.devices
    assert answer["capabilities"]["runsCode"] is True
    major = int(p.PROTOCOL_VERSION.split(".")[0])
    error = refused(handlers_server.initialize, state, {"protocolVersion": f"{major + 1}.0.0"})
    assert error.code == p.INCOMPATIBLE_PROTOCOL and f"client speaks protocol {major + 1}.0.0" in error.message


def test_server_ping_and_shutdown(state):
    answer = call(handlers_server.ping, state, {})
    p.validator_for("server/ping.result").validate(answer)
    assert answer["time"] > 0
    assert not state.shutdown_requested.is_set()
    assert call(handlers_server.shutdown, state, {}) == {}
    assert state.shutdown_requested.is_set()


def test_run_list_get_and_config_of_a_run_folder(state):
    listed = call(handlers_runs.run_list, state, {})
    p.validator_for("run/list.result").validate(listed)
    assert [run["runId"] for run in listed["runs"]] == [RUN_ID]
    info = call(handlers_runs.run_get, state, {"runId": RUN_ID})
    p.validator_for("run/get.result").validate(info)
    assert info["runId"] == RUN_ID and info["status"] == "completed" and info["step"] == 1
    assert call(handlers_runs.run_config, state, {"runId": RUN_ID}) == {
        "runId": RUN_ID,
        "config": {"rollout": {"temperature": 0.5}},
    }
    error = refused(handlers_runs.run_get, state, {"runId": "missing-20261127-120000-abcdef"})
    assert error.code == p.RUN_NOT_FOUND and "no run 'missing-20261127-120000-abcdef'" in error.message


def test_trajectories_of_a_run_with_none(state):
    page = call(handlers_trajectories.trajectory_query, state, {"runId": RUN_ID})
    assert page == {"items": [], "total": 0, "nextCursor": None}
    assert call(handlers_trajectories.trajectory_get, state, {"runId": RUN_ID, "step": 1}) == {"records": []}
    error = refused(handlers_trajectories.trajectory_query, state, {"runId": RUN_ID, "cursor": "²"})
    assert error.code == p.INVALID_PARAMS and error.message.startswith("invalid cursor '²'")
    error = refused(handlers_trajectories.trajectory_get, state, {"runId": RUN_ID})
    assert (
        error.code == p.INVALID_PARAMS
        and error.message == "trajectory/get takes either ids or a step, not both or neither"
    )


def test_trajectory_get_of_a_missing_id_is_refused_as_over_the_connection(state):
    params = {"runId": RUN_ID, "ids": ["1-0-0"]}
    error = refused(handlers_trajectories.trajectory_get, state, params)
    assert error.code == p.TRAJECTORY_NOT_FOUND and error.message == f"run {RUN_ID} has no trajectory '1-0-0'"
    server = TrainerServer(state.options)
    frame = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "trajectory/get", "params": params})
    answer = asyncio.run(server.handle_message(Client(connection=Connection(), initialized=True), frame))
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": {"code": error.code, "message": error.message}}


def test_rerolls_of_a_run_with_none(state):
    listed = call(handlers_rerolls.reroll_list, state, {"runId": RUN_ID})
    p.validator_for("reroll/list.result").validate(listed)
    assert listed == {"runId": RUN_ID, "rerolls": [], "checkpoints": [], "temperature": 0.5}
    error = refused(handlers_rerolls.reroll_get, state, {"runId": RUN_ID, "rerollId": "20261127-120000-abcdef"})
    assert (
        error.code == p.TRAJECTORY_NOT_FOUND and error.message == f"run {RUN_ID} has no re-roll 20261127-120000-abcdef"
    )
    error = refused(
        handlers_rerolls.tool_rerun, state, {"runId": RUN_ID, "trajectoryId": "1-0-0", "turn": 0, "call": 0}
    )
    assert error.code == p.TRAJECTORY_NOT_FOUND


def test_env_methods_refuse_what_they_cannot_work_on_before_any_child_starts(state, tmp_path):
    error = refused(handlers_env.env_check, state, {})
    assert error.code == p.INVALID_PARAMS and error.message == "env/check: give bundleId or configDir"
    error = refused(handlers_env.env_check, state, {"configDir": str(tmp_path), "bundleId": "0" * 64})
    assert error.code == p.INVALID_PARAMS and error.message == "env/check: give configDir or bundleId, not both"
    error = refused(handlers_env.config_memory_plan, state, {"config": {"train": {"steps": "many"}}})
    assert error.code == p.CONFIG_INVALID and "steps" in error.message
    error = refused(handlers_env.mcp_list_tools, state, {"server": {"name": "x"}})
    assert error.code == p.INVALID_PARAMS and error.message.startswith("server")
