"""Records the replay panel's test fixtures with the real trainer on the tiny model.

    .venv/bin/python protocol/examples/trajectories/make_fixtures.py

- lookup.trajectories.jsonl: step 3 of the bundled lookup example (two GRPO groups of 8).
- tool-errors.trajectories.jsonl: a scripted policy whose calls raise, time out, return garbage, name an
  unknown tool and are malformed; one episode runs out of context (truncated).
- hostile.trajectories.jsonl: a real record whose model and tool text carry HTML, script and markdown.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
EXAMPLE = REPO / "trainer-server" / "agentrl" / "examples" / "lookup" / "lookup.agentrl.yaml"

# The tools are the tests' own (trainer-server/tests/failing_tools.py, on sys.path while this runs).
FAILING_ENV = """
from agentrl import EpisodeScore, ToolEnv
from failing_tools import Boom, Echo, Hang

class FailingEnv(ToolEnv):
    def __init__(self, **args):
        self.tools = [Boom(), Hang(), Echo()]
    def reset(self, task):
        return [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": task["q"]}]
    def score(self, final_text):
        ok = "done" in final_text
        return EpisodeScore(reward=float(ok), breakdown={"done": float(ok)}, final_answer=final_text or None)
"""

SCRIPT = [
    '<tool_call>{"name": "echo", "arguments": {"text": "hello"}}</tool_call>'
    '<tool_call>{"name": "boom", "arguments": {}}</tool_call><tool_call>{"name": "hang", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "echo", "arguments": {"txt": 1}}</tool_call><tool_call>{"name": "nope", "arguments": {}}'
    '</tool_call><tool_call>{"name": "echo", "arguments": {</tool_call>',
    "done",
]

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">[click](javascript:alert(1)) &amp; **bold**'


def read(run_dir: Path, step: int) -> list[dict]:
    path = run_dir / "trajectories" / f"step-{step:06d}.trajectories.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(name: str, records: list[dict]) -> None:
    (HERE / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def main() -> None:
    import torch
    from agentrl.contract.config import load_config
    from agentrl.rollout.scripted import ScriptedPolicy
    from agentrl.run.trainer import train

    torch.set_num_threads(1)
    sys.path.insert(0, str(REPO / "trainer-server" / "tests"))  # failing_tools, for FAILING_ENV
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        run_dir = train(
            load_config(EXAMPLE, ["train.steps=3", "train.lr=0.01"]),
            runs_dir=tmp_path / "runs",
            run_id="lookup-fixture",
            config_base_dir=EXAMPLE.parent,
        )
        lookup = read(run_dir, 3)
        write("lookup.trajectories.jsonl", lookup)

        (tmp_path / "env.py").write_text(FAILING_ENV)
        (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "fail-1", "q": "go"}) + "\n")
        (tmp_path / "f.agentrl.yaml").write_text(
            "env: {module: env.py, class_name: FailingEnv}\ndata: {train: tasks.jsonl}\n"
            "rollout: {group_size: 2, max_turns: 3, max_new_tokens: 200, max_context: 2000}\n"
            "train: {steps: 1, batch_size: 2}\n"
        )

        policy = ScriptedPolicy(SCRIPT, logprob=-0.5)  # everything but the assistant's text is the real trainer
        finished = read(
            train(
                load_config(tmp_path / "f.agentrl.yaml"),
                runs_dir=tmp_path / "runs",
                run_id="errors",
                config_base_dir=tmp_path,
                policy=policy,
            ),
            1,
        )
        truncated = read(
            train(
                load_config(tmp_path / "f.agentrl.yaml", ["rollout.max_context=520"]),
                runs_dir=tmp_path / "runs",
                run_id="overflow",
                config_base_dir=tmp_path,
                policy=policy,
            ),
            1,
        )
        write("tool-errors.trajectories.jsonl", [finished[0], {**truncated[0], "id": "1-0-9", "sample": 9}])

    hostile = json.loads(json.dumps(lookup[0]))
    hostile["id"], hostile["final_answer"] = "3-9-0", HOSTILE
    hostile["group"] = 9
    hostile["turns"][0]["assistant"] = HOSTILE
    hostile["turns"][0]["observation"] = HOSTILE
    hostile["turns"][0]["tool_calls"] = [
        {
            "id": "call-0-0",
            "name": "lookup<b>",
            "arguments": {"key": HOSTILE},
            "raw": HOSTILE,
            "result": {"html": HOSTILE},
            "error": HOSTILE,
            "error_kind": "exception",
            "latency_ms": 1.0,
        }
    ]
    hostile["prompt"][-1]["content"] = HOSTILE
    hostile["tokens"]["text"][-1] = HOSTILE
    write("hostile.trajectories.jsonl", [hostile])


if __name__ == "__main__":
    main()
