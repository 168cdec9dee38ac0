"""A finite but huge reward (1e308) passes a NaN check, then overflows its group's advantages and fails the run as
"the gradient norm is nan" without naming the reward (issue #44, item 5). Rewards are bounded where they enter, by the
one screen that already refused NaN: the env's score() and step(), the agent's reward function and its
agentrl.process_reward, each named in the message with the episode."""

import json

import openai
import pytest
from agent_endpoint_harness import make_engine, script
from agentrl import EpisodeScore, StepResult
from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.agent import AgentFailure, AgentProgram
from agentrl.examples.lookup.env import LookupEnv
from agentrl.learning.learner import NonFiniteError
from agentrl.rollout.scripted_episode import run_scripted_episode
from agentrl.run.reward_screen import screen_rewards
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from test_train import example

HUGE = 1e308
BOUND = RolloutConfig().max_abs_reward  # rollout.max_abs_reward's default, 1e6


class HugeStepReward(LookupEnv):
    def step(self, assistant_text, calls):
        return StepResult(super().step(assistant_text, calls).messages, reward=HUGE)


class HugeScore(LookupEnv):
    def score(self, final_text):
        return EpisodeScore(reward=-HUGE, breakdown={"fine": 1.0})


class IntegerTooLargeForAFloat(LookupEnv):
    def step(self, assistant_text, calls):
        return StepResult([], reward=10**400, done=True)


def scripted(env):
    return run_scripted_episode(env, {"key": "3"}, env.scripted_turns({"key": "3"}), RolloutConfig())


def test_a_huge_finite_reward_is_refused_where_it_enters_and_named(tiny, monkeypatch):
    step_reward, outcome = scripted(HugeStepReward()), scripted(HugeScore())
    with pytest.raises(
        NonFiniteError,
        match=r"step 2: episode 0/0 of task .*: the process reward of turn 0 from the env's step\(\) is 1e\+308, "
        r"beyond ±1e\+06 \(rollout.max_abs_reward\); the process reward of turn 1 .* Make the rewards finite and "
        r"within ±1e\+06 \(rollout.max_abs_reward\), or set train.non_finite_rewards: drop",
    ):
        screen_rewards([step_reward], 2, "fail", from_agent=False, max_abs=BOUND)
    with pytest.raises(NonFiniteError, match=r"the outcome reward from the env's score\(\) is -1e\+308, beyond"):
        screen_rewards([outcome], 2, "fail", from_agent=False, max_abs=BOUND)
    # Dropped instead, the episodes at the bound stay.
    at_bound = scripted(LookupEnv())
    at_bound.outcome_reward = -BOUND
    assert screen_rewards([step_reward, at_bound, outcome], 2, "drop", from_agent=False, max_abs=BOUND) == (
        [at_bound],
        2,
    )

    # A reward that is no float at all ends its episode as the env's error, not the rollout.
    too_large = scripted(IntegerTooLargeForAFloat())
    assert (too_large.status, too_large.status_reason) == (
        "error",
        "env_error: step()'s reward is an integer too large for a float",
    )

    # The agent's reward function: the episode's error, named.
    program = AgentProgram(run=None, score=lambda task, result: HUGE, timeout_s=1, name="agent.py:run")
    with pytest.raises(AgentFailure, match=r"^the reward function's reward is 1e\+308, beyond ±1e\+06 \(rollout"):
        program.reward({}, None, BOUND)
    program = AgentProgram(
        run=None, score=lambda task, result: EpisodeScore(1.0, {"style": 1e9}), timeout_s=1, name="agent.py:run"
    )
    with pytest.raises(AgentFailure, match=r"^the reward function's breakdown 'style' is 1e\+09, beyond ±1e\+06 "):
        program.reward({}, None, BOUND)
    assert program.reward({}, None, 1e10).breakdown == {"style": 1e9}, "within a bound set higher"

    # The agent's process_reward, which the endpoint takes as any finite number: screened with its episode.
    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "a"}]
        first = client.chat.completions.create(model="p", messages=messages).choices[0].message
        messages += [first, {"role": "user", "content": "b"}]
        client.chat.completions.create(model="p", messages=messages, extra_body={"agentrl": {"process_reward": HUGE}})

    engine = make_engine(tiny, agent)
    script(engine, monkeypatch, lambda text, turn: "ok")
    try:
        [episode] = engine.run([{"key": "1"}], group_size=1, seed=0)
    finally:
        engine.close()
    with pytest.raises(
        NonFiniteError, match=r"the process reward of turn 0 from the agent's agentrl.process_reward is 1e\+308, beyond"
    ):
        screen_rewards([episode], 1, "fail", from_agent=True, max_abs=BOUND)


HUGE_FROM_STEP_2 = """
from agentrl import StepResult
from agentrl.examples.lookup.env import LookupEnv

class HugeFromStep2(LookupEnv):
    '''Rewards as the example during step 1 (4 episodes), then 1e308 for the first turn of each later step's first.'''
    started = 0
    def reset(self, task):
        HugeFromStep2.started += 1
        self.huge = HugeFromStep2.started > 4 and HugeFromStep2.started % 4 == 1
        return super().reset(task)
    def step(self, assistant_text, calls):
        result = super().step(assistant_text, calls)
        return StepResult(result.messages, 1e308, result.done) if self.huge else result
"""


def test_a_huge_reward_fails_the_run_naming_it_not_as_a_nan_gradient(tmp_path):
    (tmp_path / "env.py").write_text(HUGE_FROM_STEP_2)
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps({"key": str(k)}) + "\n" for k in range(4)))
    config = example(
        "env.module=" + str(tmp_path / "env.py"),
        "env.class_name=HugeFromStep2",
        "data.train=" + str(tmp_path / "tasks.jsonl"),
        "rollout.group_size=2",
        "train.batch_size=4",
        "train.micro_batch_size=4",
        "train.steps=2",
    )
    with pytest.raises(ValueError, match=r"step 2: episode 0/0 .*the process reward of turn 0 from the env's step"):
        train(config, runs_dir=tmp_path / "runs", run_id="huge")
    failed = latest_status(read_events(tmp_path / "runs" / "huge"))
    assert failed["status"] == "failed" and "1e+308, beyond ±1e+06" in failed["message"]
    assert "gradient" not in failed["message"]


def test_the_reward_bound_is_the_run_configs_rollout_max_abs_reward(tmp_path):
    """A run whose rewards are legitimately large sets rollout.max_abs_reward: 5e6 is refused under the default bound,
    named with the setting, and trained on under a bound set higher."""
    five_million = scripted(LookupEnv())
    five_million.outcome_reward = 5e6
    with pytest.raises(NonFiniteError, match=r"is 5e\+06, beyond ±1e\+06 \(rollout.max_abs_reward\)"):
        screen_rewards([five_million], 1, "fail", from_agent=False, max_abs=BOUND)
    assert screen_rewards([five_million], 1, "fail", from_agent=False, max_abs=1e7) == ([five_million], 0)
    assert example("rollout.max_abs_reward=1e7").rollout.max_abs_reward == 1e7
    for refused in ("0", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match="rollout.max_abs_reward"):
            example(f"rollout.max_abs_reward={refused}")
