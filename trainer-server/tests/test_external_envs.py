"""Environments nobody wrote for agentrl, trained from a run config alone (env.gym, env.methods, env.openenv) with the
real packages: a Gymnasium text env (5-tuple, made by its class or by gymnasium.make), an old 4-tuple gym env, a
SkyRL-gym-style env, a TRL-style environment class, an OpenEnv server the trainer starts, and the TextWorldExpress
CoinCollector recipe. Each trains two steps of the tiny model into schema-valid trajectories whose observations
carry the env's text; scripted episodes check what the model cannot yet do (win, call a tool, kill a server)."""

import gc
import json
import sys
from pathlib import Path

import pytest
import yaml
from agentrl.cli.demo import main_metric
from agentrl.contract.config import load_config, resolve_paths
from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.adapters.external import NO_ACTION, text_action
from agentrl.environment.adapters.gym import GymTextEnv, close_instance
from agentrl.environment.adapters.methods import MethodsEnv
from agentrl.environment.adapters.openenv import OpenEnvEnv, stop_servers
from agentrl.rollout.check import check_env
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.rollout.scripted_episode import run_scripted_episode
from agentrl.run.eval import evaluate
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from conftest import REPO

TEXTWORLD = REPO / "trainer-server" / "agentrl" / "recipes" / "textworld"

# A Gymnasium text env: a corridor of rooms; "go east" moves one room on (reward 0.25), the last room wins (1.0);
# `max_steps` steps without winning truncate the episode. Its info lists the valid actions and whether it is won.
GYM_ENV = '''
import string

import gymnasium
from gymnasium import spaces


class Corridor(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, goal=2, max_steps=10):
        self.goal, self.max_steps = goal, max_steps
        self.observation_space = spaces.Text(max_length=500, charset=string.printable)
        self.action_space = spaces.Text(max_length=200, charset=string.printable)
        self.room = self.steps = 0

    def _info(self):
        return {"valid": ["go east", "wait"] + (["go west"] if self.room else []), "won": self.room == self.goal}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.room = self.steps = 0
        return f"You stand in room 0 of the corridor (game {seed}).", self._info()

    def step(self, action):
        self.steps += 1
        reward, text = 0.0, "Nothing happens in the corridor."
        if action == "go east":
            self.room, reward = self.room + 1, 0.25
        elif action == "go west" and self.room:
            self.room -= 1
        if action in ("go east", "go west", "wait"):
            text = f"You stand in room {self.room} of the corridor."
        terminated = self.room == self.goal
        if terminated:
            reward, text = 1.0, "You reached the end of the corridor!"
        truncated = not terminated and self.steps >= self.max_steps
        return text, reward, terminated, truncated, self._info()


class NumpyCorridor(Corridor):
    """Its info in NumPy values, as many Gymnasium envs give it."""

    def _info(self):
        import numpy as np

        info = super()._info()
        return {"valid": np.array(info["valid"]), "won": np.bool_(info["won"]), "room": np.int64(self.room)}


class OldCorridor:
    """The older gym shape: reset returns the observation alone, step a 4-tuple."""

    def __init__(self, goal=2):
        self.inner = Corridor(goal=goal)

    def reset(self, seed=None):
        return self.inner.reset(seed=seed)[0]

    def step(self, action):
        observation, reward, terminated, truncated, info = self.inner.step(action)
        return observation, reward, terminated or truncated, info
'''

# The same env registered with Gymnasium (a module gymnasium.make imports from the id "corridor_registered:...").
REGISTERED_ENV = """
import gymnasium

from envfile import Corridor

gymnasium.register(id="Corridor-v0", entry_point=Corridor, max_episode_steps=2, kwargs={"goal": 5})
"""

# SkyRL-gym's BaseTextEnv shape: init(prompt) -> (messages, metadata); step -> a dict of observations (messages).
SKYRL_ENV = '''
class GuessEnv:
    """Guess the number 7 in at most a few tries; "higher"/"lower" after each wrong guess."""

    def __init__(self, secret=7):
        self.secret = secret

    def init(self, prompt):
        self.guesses = 0
        return list(prompt), {"guesses": 0}

    def step(self, action):
        self.guesses += 1
        digits = "".join(ch for ch in action if ch.isdigit())
        guess = int(digits) if digits else None
        won = guess == self.secret
        if won:
            return {"observations": [], "reward": 1.0, "done": True, "metadata": {"won": True}}
        hint = "no number in that" if guess is None else ("higher" if guess < self.secret else "lower")
        text = f"The number game says: {hint}."
        return {
            "observations": [{"role": "user", "content": text}],
            "reward": 0.0,
            "done": False,
            "metadata": {"won": False},
        }

    def close(self):
        pass
'''

# TRL's environment_factory shape: reset(**task) -> text, public methods with hints and docstrings are the tools,
# get_reward reads the state the tools changed.
METHODS_ENV = '''
class Pantry:
    def reset(self, target="honey", **task):
        self.target, self.jars = target, {}
        return f"The pantry has empty jars. Fill the {target} jar with exactly 3 spoons."

    def fill(self, jar: str, spoons: int) -> str:
        """Put spoons of something into a jar.

        Args:
            jar: The jar's label, e.g. honey.
            spoons: How many spoons to add.
        """
        self.jars[jar] = self.jars.get(jar, 0) + spoons
        return f"The {jar} jar holds {self.jars[jar]} spoons."

    def look(self) -> str:
        """What the pantry's jars hold now."""
        return json.dumps(self.jars)

    def get_reward(self) -> float:
        return 1.0 if self.jars.get(self.target) == 3 else 0.0
'''


def write_config(folder: Path, env: dict, tasks: list[dict], **sections: dict) -> Path:
    """A run config of the tiny model on this env and these tasks: two steps of 4 episodes (2 groups of 2)."""
    (folder / "tasks.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks))
    config = {
        "name": "external",
        "seed": 0,
        "model": {"path": "tiny"},
        "env": env,
        "data": {"train": "tasks.jsonl", "shuffle": False},
        "rollout": {"engine": "hf", "group_size": 2, "max_turns": 3, "max_new_tokens": 8, "max_context": 1024},
        "algorithm": {"name": "grpo"},
        "train": {"steps": 2, "batch_size": 4, "micro_batch_size": 4, "lr": 0.01, "checkpoint_every": 2},
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    path = folder / "run.agentrl.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run(config_path: Path, validator, policy: ScriptedPolicy | None = None, *overrides: str) -> list[dict]:
    """Train the config; the run completes and every trajectory record validates. Returns the records."""
    run_dir = train(
        load_config(config_path, list(overrides)),
        runs_dir=config_path.parent / "runs",
        config_base_dir=config_path.parent,
        policy=policy,
    )
    status = latest_status(read_events(run_dir))
    assert status["status"] == "completed", status
    records = [
        json.loads(line)
        for path in sorted((run_dir / "trajectories").glob("*.trajectories.jsonl"))
        for line in path.read_text().splitlines()
    ]
    for record in records:
        validator.validate(record)
    return records


def user_text(record: dict) -> str:
    return "\n".join(m["content"] for m in record["prompt"] if m["role"] == "user")


def gym_section(factory: str = "envfile.py:Corridor", **more) -> dict:
    return {"gym": {"factory": factory, "valid_actions_key": "valid", "score_keys": ["won"], **more}}


def corridor(folder: Path, name: str = "Corridor", **more) -> GymTextEnv:
    """A GymTextEnv of the env file's class, as a config's env.gym section makes it."""
    return GymTextEnv(gym_section(f"{folder / 'envfile.py'}:{name}", **more)["gym"])


def scripted(env, task: dict, turns: list[str], max_turns: int = 4):
    return run_scripted_episode(env, task, turns, RolloutConfig(max_turns=max_turns, tool_format="hermes"))


@pytest.fixture
def gym_folder(tmp_path):
    (tmp_path / "envfile.py").write_text(GYM_ENV)
    return tmp_path


# 1. Gymnasium text envs.
def test_a_gymnasium_text_env_trains_from_its_class(gym_folder, trajectory_validator):
    path = write_config(gym_folder, gym_section(), [{"id": "a", "seed": 1}, {"id": "b", "seed": 2}])
    records = run(path, trajectory_validator)
    assert len(records) == 8
    for record in records:
        assert "room 0 of the corridor" in user_text(record)
        assert "go east" in user_text(record) and "wait" in user_text(record)  # the valid actions, shown
        assert record["turns"], record["status_reason"]
        assert record["turns"][0]["valid_actions"] == ["go east", "wait"]
        for turn in record["turns"]:
            assert "corridor" in turn["observation"]
            assert turn["valid_actions"] and set(turn["valid_actions"]) <= {"go east", "wait", "go west"}
            if not turn["done"]:
                assert all(action in turn["observation"] for action in ("go east", "wait"))
        assert {"won", "env_return"} <= set(record["reward_breakdown"])
        assert record["reward_breakdown"]["env_return"] == pytest.approx(
            sum(turn["process_reward"] for turn in record["turns"])
        )
    assert {record["task_id"] for record in records} == {"a", "b"}


def test_gym_steps_rewards_score_keys_and_truncation(gym_folder, trajectory_validator):
    path = write_config(gym_folder, gym_section(), [{"id": "a", "seed": 1}])
    records = run(path, trajectory_validator, ScriptedPolicy(["Go East.", "go east"]), "train.batch_size=2")
    for record in records:
        first, second = record["turns"]
        assert (first["process_reward"], second["process_reward"]) == (0.25, 1.0)  # per-step rewards, per turn
        assert first["valid_actions"] == ["go east", "wait"]
        assert second["valid_actions"] == ["go east", "wait", "go west"]  # from the state the step started in
        assert "room 1 of the corridor" in first["observation"] and "go west" in first["observation"]
        assert second["done"] and second["observation"] == "You reached the end of the corridor!"
        assert record["status"] == "finished"
        assert record["reward_breakdown"]["won"] == 1.0
        assert record["reward_breakdown"]["env_return"] == 1.25
        assert record["outcome_reward"] == 0.0  # rewards: step; the env's rewards are the turns'

    # An info in NumPy values (np.bool_, an array of actions) reads as the Python values it stands for.
    episode = scripted(corridor(gym_folder, "NumpyCorridor", state_key="room"), {"seed": 3}, ["go east", "go east"])
    assert [turn.valid_actions for turn in episode.turns] == [["go east", "wait"], ["go east", "wait", "go west"]]
    assert [turn.state_key for turn in episode.turns] == ["0", "1"]
    assert episode.reward_breakdown["won"] == 1.0

    # The env's own truncation ends the episode before rollout.max_turns.
    episode = scripted(corridor(gym_folder, args={"max_steps": 2}), {"seed": 3}, ["wait"] * 4)
    assert [turn.done for turn in episode.turns] == [False, True]
    assert episode.status == "finished" and episode.reward_breakdown["won"] == 0.0

    # rewards: episode: their sum is the outcome reward, no process rewards.
    episode = scripted(corridor(gym_folder, rewards="episode"), {"seed": 3}, ["go east", "go east"])
    assert [turn.process_reward for turn in episode.turns] == [0.0, 0.0]
    assert episode.outcome_reward == 1.25

    # step_cost: taken off each step's reward (and off the episode's sum), the env's own return kept in the breakdown.
    episode = scripted(corridor(gym_folder, step_cost=0.1), {"seed": 3}, ["go east", "go east"])
    assert [turn.process_reward for turn in episode.turns] == pytest.approx([0.15, 0.9])
    assert episode.reward_breakdown["env_return"] == 1.25
    episode = scripted(corridor(gym_folder, rewards="episode", step_cost=0.1), {"seed": 3}, ["go east", "go east"])
    assert episode.outcome_reward == pytest.approx(1.05)

    # show_valid_actions: no: kept with the turns, not shown to the model.
    env = corridor(gym_folder, show_valid_actions="hidden")
    episode = scripted(env, {"seed": 3}, ["go east", "wait"])
    assert episode.prompt_messages == [{"role": "user", "content": "You stand in room 0 of the corridor (game 3)."}]
    assert [turn.observation for turn in episode.turns] == ["You stand in room 1 of the corridor."] * 2
    assert episode.turns[1].valid_actions == ["go east", "wait", "go west"]


def test_a_gymnasium_registered_env_made_by_gymnasium_make(gym_folder, monkeypatch, trajectory_validator):
    """gymnasium.make imports the module the id names; its TimeLimit (max_episode_steps=2) truncates."""
    (gym_folder / "corridor_registered.py").write_text(REGISTERED_ENV)
    monkeypatch.syspath_prepend(str(gym_folder))
    env = gym_section("gymnasium:make", args={"id": "corridor_registered:Corridor-v0"})
    path = write_config(gym_folder, env, [{"id": "a", "seed": 1}, {"id": "b", "seed": 2}])
    records = run(path, trajectory_validator)
    assert len(records) == 8
    for record in records:
        assert "room 0 of the corridor" in user_text(record)
        assert len(record["turns"]) == 2 and record["turns"][-1]["done"]  # truncated by gymnasium, not max_turns
        assert record["status"] == "finished"
        assert all("corridor" in turn["observation"] for turn in record["turns"])


def test_a_gym_factory_travels_to_other_processes_and_acts_there(gym_folder):
    """What a Ray rollout worker and the tool worker process receive: the pickled factory builds the same env; in the
    tool form the `act` call runs in the worker's env, and the ToolEnv here reads its outcome from the call's result."""
    import pickle

    from agentrl.environment.loader import config_env_factory
    from agentrl.environment.toolprocess import ToolWorker

    path = write_config(gym_folder, gym_section(action="tool"), [{"id": "a", "seed": 1}])
    factory = config_env_factory(resolve_paths(load_config(path), path.parent))
    copy = pickle.loads(pickle.dumps(factory))
    task = {"id": "a", "seed": 1}
    assert copy().reset(task) == factory().reset(task)
    worker = ToolWorker(factory)
    try:
        call = '<tool_call>{"name": "act", "arguments": {"action": "go east"}}</tool_call>'
        episode = run_scripted_episode(factory(), task, [call, call], RolloutConfig(tool_format="hermes"), worker)
    finally:
        worker.close()
    assert episode.status == "finished", episode.status_reason
    assert [turn.process_reward for turn in episode.turns] == [0.25, 1.0]
    assert episode.turns[0].tool_calls[0].result["observation"] == "You stand in room 1 of the corridor."
    assert episode.reward_breakdown["won"] == 1.0


class ClosesOnce:
    """TextWorldExpress's way: a second close (its own __del__) raises on the JVM the first one ended."""

    def __init__(self):
        self.closes = 0

    def close(self):
        if self.closes:
            raise BrokenPipeError("closed twice")
        self.closes += 1

    def __del__(self):
        self.close()


def test_an_env_closed_is_not_closed_again_by_its_own_del(monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    env = ClosesOnce()
    close_instance(env)
    assert env.closes == 1
    del env
    gc.collect()
    assert unraisable == []


def test_an_old_gym_env_with_a_four_tuple(gym_folder, trajectory_validator):
    path = write_config(gym_folder, gym_section("envfile.py:OldCorridor"), [{"id": "a", "seed": 1}])
    records = run(path, trajectory_validator, None, "train.batch_size=2")
    for record in records:
        assert "room 0 of the corridor" in user_text(record)
        assert all("corridor" in turn["observation"] for turn in record["turns"])
    episode = scripted(corridor(gym_folder, "OldCorridor"), {"seed": 3}, ["go east", "wait", "go east"])
    assert [turn.process_reward for turn in episode.turns] == [0.25, 0.0, 1.0]
    assert episode.turns[-1].done and episode.reward_breakdown["won"] == 1.0


def test_env_check_on_a_gym_config(gym_folder):
    path = write_config(gym_folder, gym_section(), [{"id": "a", "seed": 1}])
    diagnostics = check_env(path)
    assert not [d for d in diagnostics if d["severity"] == "error"], diagnostics


# 2. A SkyRL-gym-style env.
def test_an_evaluation_and_the_demo_score_a_gym_env_by_its_score_keys(gym_folder):
    """A Gym-style env reports no accuracy: `agentrl eval` averages its score keys, and `agentrl demo` compares the
    first of them (CoinCollector's demo compared an accuracy of 0 before and after)."""
    path = write_config(gym_folder, gym_section(), [{"id": "a", "seed": 1}, {"id": "b", "seed": 2}])
    config = resolve_paths(load_config(path), path.parent)
    evaluation = evaluate(
        config, config.data.train, limit=2, checkpoint=None, baseline=None, batch_size=2, runs_dir=gym_folder / "evals"
    )
    assert "won" in evaluation.metrics and "accuracy" not in evaluation.metrics
    assert evaluation.metrics["won"] == sum(task["won"] for task in evaluation.per_task) / 2
    assert main_metric(None, evaluation.metrics, config) == "won"
    assert main_metric(None, {**evaluation.metrics, "accuracy": 0.5}, config) == "accuracy"
    assert main_metric("reward", evaluation.metrics, config) == "reward"
    assert main_metric("f1", evaluation.metrics, config) is None  # demo refuses it, naming what the env reports


def test_a_skyrl_style_env(tmp_path, trajectory_validator):
    (tmp_path / "guess.py").write_text(SKYRL_ENV)
    prompt = [{"role": "user", "content": "Guess my number between 1 and 9. Reply with the number."}]
    env = {"gym": {"factory": "guess.py:GuessEnv", "score_keys": ["won"]}}
    path = write_config(tmp_path, env, [{"id": "g", "prompt": prompt}])
    records = run(path, trajectory_validator, None, "train.batch_size=2")
    for record in records:
        assert record["prompt"] == prompt
        for turn in record["turns"]:
            assert turn["done"] or "The number game says" in turn["observation"]
    section = {"factory": f"{tmp_path / 'guess.py'}:GuessEnv", "score_keys": ["won"]}
    episode = scripted(GymTextEnv(section), {"prompt": prompt}, ["5", "9", "I guess 7"])
    assert [turn.observation for turn in episode.turns[:2]] == [
        "The number game says: higher.",
        "The number game says: lower.",
    ]
    assert [turn.process_reward for turn in episode.turns] == [0.0, 0.0, 1.0]
    assert episode.turns[-1].done and episode.status == "finished"
    assert episode.reward_breakdown["won"] == 1.0


# 4. A TRL-style environment class (env.methods).
def test_a_trl_style_environment_class(tmp_path, trajectory_validator):
    (tmp_path / "pantry.py").write_text("import json\n" + METHODS_ENV)
    env = {"methods": {"factory": "pantry.py:Pantry"}}
    path = write_config(tmp_path, env, [{"id": "p", "prompt": "Kitchen duty.", "target": "honey"}])
    records = run(path, trajectory_validator, None, "train.batch_size=2")
    for record in records:
        assert "Fill the honey jar with exactly 3 spoons." in user_text(record)
        assert {tool["function"]["name"] for tool in record["tools"]} == {"fill", "look"}
    section = {"factory": f"{tmp_path / 'pantry.py'}:Pantry"}
    task = {"prompt": "Kitchen duty.", "target": "jam"}

    def call(name, **arguments):
        return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"

    episode = scripted(
        MethodsEnv(section), task, [call("fill", jar="jam", spoons=2), call("fill", jar="jam", spoons=1), "Done."]
    )
    assert [turn.tool_calls[0].result for turn in episode.turns[:2]] == [
        "The jam jar holds 2 spoons.",
        "The jam jar holds 3 spoons.",
    ]
    assert episode.outcome_reward == 1.0 and episode.status == "finished"
    episode = scripted(MethodsEnv(section), task, [call("fill", jar="jam", spoons=4), "Done."])
    assert episode.outcome_reward == 0.0


# 3. An OpenEnv server the trainer starts (env.openenv.command), one WebSocket session per episode.
OPENENV_SERVER = '''
import os
import sys

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class AddAction(Action):
    text: str


class TotalObservation(Observation):
    message: str
    reached: bool = False  # an observation field: openenv-core sends no metadata over the wire


class CounterEnvironment(Environment):
    """A total the actions add to (a number, else 1): state that lives in one session. A task's die_at makes that
    step end the server's process."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state, self.total, self.die_at = State(), 0, None

    def reset(self, seed=None, episode_id=None, die_at=None, **kwargs):
        self._state, self.total, self.die_at = State(episode_id=episode_id), 0, die_at
        return TotalObservation(message=f"Counter game {seed}: the total is 0.")

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        if self._state.step_count == self.die_at:
            print("counter server: ending its process on request", file=sys.stderr, flush=True)
            os._exit(3)
        amount = int(action.text) if action.text.strip().isdigit() else 1
        self.total += amount
        reached = self.total >= 10
        return TotalObservation(
            message=f"Counter game: the total is {self.total}.",
            reward=amount / 10,
            done=reached,
            reached=reached,
        )

    @property
    def state(self):
        return self._state


app = create_app(CounterEnvironment, AddAction, TotalObservation, max_concurrent_envs=2)
'''


@pytest.fixture
def openenv_folder(tmp_path):
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "counter_server.py").write_text(OPENENV_SERVER)
    return tmp_path


def openenv_section(**more) -> dict:
    command = [sys.executable, "-m", "uvicorn", "counter_server:app", "--host", "127.0.0.1", "--port", "{port}"]
    section = {
        "command": command,
        "cwd": "server",
        "action": "text",
        "observation_key": "message",
        "score_keys": ["reached"],
        "startup_timeout_s": 30,
    }
    return {"openenv": {**section, **more}}


def totals(turns: list[dict]) -> list[int]:
    return [int(turn["observation"].rsplit(" ", 1)[1].rstrip(".")) for turn in turns]


def test_an_openenv_server_trains_with_one_session_per_episode(openenv_folder, trajectory_validator):
    path = write_config(openenv_folder, openenv_section(), [{"id": "a", "seed": 1}, {"id": "b", "seed": 2}])
    records = run(path, trajectory_validator)
    assert len(records) == 8
    for record in records:
        assert record["status"] != "error", record["status_reason"]
        assert "Counter game" in user_text(record) and "the total is 0" in user_text(record)
        assert record["turns"] and all("Counter game" in turn["observation"] for turn in record["turns"])
        # the total carries over from step to step: the episode kept its session (and only it added to it)
        steps = totals(record["turns"])
        assert steps == sorted(steps) and steps[0] >= 1 and len(set(steps)) == len(steps)
        assert record["reward_breakdown"]["env_return"] == pytest.approx(steps[-1] / 10)

    # The tool form (env.openenv's default): the `act` tool's parameters are the server's action schema.
    section = openenv_section(action="tool", cwd=str(openenv_folder / "server"))["openenv"]
    act = '<tool_call>{"name": "act", "arguments": {"text": "4"}}</tool_call>'
    try:
        episode = scripted(OpenEnvEnv(section), {"seed": 5}, ["Thinking.", act, act, act])
    finally:
        stop_servers()
    assert episode.tool_schemas[0]["function"]["parameters"]["required"] == ["text"]
    assert episode.turns[0].observation == NO_ACTION
    assert episode.turns[1].tool_calls[0].result["observation"] == "Counter game: the total is 4."  # the raw outcome
    assert [turn.observation for turn in episode.turns[1:]] == [  # which the env reads back
        "Counter game: the total is 4.",
        "Counter game: the total is 8.",
        "Counter game: the total is 12.",
    ]
    assert [turn.process_reward for turn in episode.turns] == [0.0, 0.4, 0.4, 0.4]
    assert episode.turns[-1].done and episode.reward_breakdown["reached"] == 1.0


def test_more_episodes_than_the_server_takes_play_in_waves(openenv_folder, trajectory_validator):
    """8 episodes at once on a server of max_concurrent_envs=2, with env.openenv.max_sessions: 8: the episodes the
    server turns away wait for the first ones to end (EnvFull), and every one finishes."""
    path = write_config(openenv_folder, openenv_section(max_sessions=8), [{"id": "a", "seed": 1}])
    records = run(
        path,
        trajectory_validator,
        ScriptedPolicy(["3"]),
        "rollout.group_size=8",
        "train.batch_size=8",
        "train.micro_batch_size=8",
        "rollout.max_turns=5",
        "train.steps=1",
    )
    assert len(records) == 8
    for record in records:
        assert record["status"] == "finished", record["status_reason"]
        assert totals(record["turns"]) == [3, 6, 9, 12]  # each episode's own total, in its own session
        assert [turn["process_reward"] for turn in record["turns"]] == [0.3] * 4
        assert record["reward_breakdown"]["reached"] == 1.0


def test_a_server_that_dies_mid_episode_fails_that_episode_and_the_run_goes_on(openenv_folder, trajectory_validator):
    tasks = [{"id": "dies", "seed": 1, "reset_args": {"die_at": 2}}, {"id": "lives", "seed": 2}]
    path = write_config(openenv_folder, openenv_section(), tasks)
    records = run(
        path, trajectory_validator, None, "rollout.group_size=1", "train.batch_size=1", "train.micro_batch_size=1"
    )
    dead, alive = records
    assert dead["task_id"] == "dies" and dead["status"] == "error"
    assert "the OpenEnv server died" in dead["status_reason"]
    assert "counter server: ending its process on request" in dead["status_reason"]  # the tail of its log
    assert len(dead["turns"]) == 2 and "the total is 1" in dead["turns"][0]["observation"]
    assert alive["task_id"] == "lives" and alive["status"] != "error", alive["status_reason"]  # a new server
    assert all("Counter game" in turn["observation"] for turn in alive["turns"])


# 5. The TextWorldExpress CoinCollector recipe.
def textworld_overrides(*more: str) -> list[str]:
    return [
        "model.path=tiny",
        "rollout.engine=hf",
        "rollout.group_size=2",
        "rollout.max_turns=2",
        "rollout.max_new_tokens=8",
        "rollout.max_context=4096",
        "train.steps=2",
        "train.batch_size=4",
        "train.micro_batch_size=4",
        "train.checkpoint_every=2",
        *more,
    ]


def test_the_textworld_recipe_trains(tmp_path, trajectory_validator):
    config = load_config(TEXTWORLD / "coin_grpo.agentrl.yaml", textworld_overrides())
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=TEXTWORLD)
    assert latest_status(read_events(run_dir))["status"] == "completed"
    records = [
        json.loads(line)
        for path in (run_dir / "trajectories").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert len(records) == 8
    for record in records:
        trajectory_validator.validate(record)
        assert record["status"] != "error", record["status_reason"]
        assert record["prompt"][0]["role"] == "system" and "find the coin" in record["prompt"][0]["content"]
        assert "You are in the " in user_text(record) and "look around" in user_text(record)
        assert record["turns"]
        for turn in record["turns"]:
            assert "look around" in turn["valid_actions"] and "inventory" in turn["valid_actions"]
            assert turn["observation"] and (turn["done"] or "look around" in turn["observation"])
        assert {"tasksuccess", "env_return"} <= set(record["reward_breakdown"])


def test_the_gold_path_wins_the_coin_with_reward_one():
    config = load_config(TEXTWORLD / "coin_grpo.agentrl.yaml")
    section = config.env.gym.model_dump()
    task = {"id": "coin-train-3", "seed": 3, "reset_args": {"gameFold": "train", "generateGoldPath": True}}
    env = GymTextEnv(section)
    env.reset(task)
    gold = list(env.instance.getGoldActionSequence())
    env.close()
    assert gold[-1] == "take coin"
    episode = scripted(GymTextEnv(section), task, gold, max_turns=len(gold))
    assert episode.status == "finished" and len(episode.turns) == len(gold)
    assert all(turn.valid_actions and action in turn.valid_actions for turn, action in zip(episode.turns, gold))
    cost = config.env.gym.step_cost  # each action's, off the env's reward: 1 for the coin alone
    assert [turn.process_reward for turn in episode.turns] == pytest.approx([-cost] * (len(gold) - 1) + [1.0 - cost])
    assert episode.turns[-1].done
    assert episode.reward_breakdown["tasksuccess"] == 1.0 and episode.reward_breakdown["env_return"] == 1.0


def test_no_test_fold_game_is_trained_on():
    from agentrl.recipes.textworld.tasks import FILES, FOLDS, fold_of

    seeds = {}
    for fold, name in FILES.items():
        records = [json.loads(line) for line in (TEXTWORLD / "data" / name).read_text().splitlines()]
        seeds[fold] = {record["seed"] for record in records}
        assert len(seeds[fold]) == len(records)
        for record in records:
            assert fold_of(record["seed"]) == fold == record["reset_args"]["gameFold"], record
    assert not seeds["train"] & set(FOLDS["test"])
    assert not seeds["train"] & seeds["test"]


VALID = ["look around", "inventory", "move south", "take coin"]


@pytest.mark.parametrize(
    ("reply", "numbered", "action"),
    [
        ("take coin", False, "take coin"),
        ("> Take  Coin.", False, "take coin"),  # a prompt mark, case, spacing and a full stop
        ("move south to the kitchen", False, "move south"),  # starts with a valid action
        ("4", True, "take coin"),  # a number names the action it numbers
        ("1. take coin", True, "take coin"),  # a copied list line spells out its action, whatever its number
        ("3) move south\nbecause", True, "move south"),
        ("1. 1", True, "look around"),  # nothing spelled out: the number
        ("1. eat the coin", True, "look around"),
        ("1. take coin", False, "1. take coin"),  # no numbered list shown: the env reads it as written
        ("dance", True, "dance"),
    ],
)
def test_a_text_reply_names_its_action(reply, numbered, action):
    assert text_action(reply, VALID, numbered) == action
