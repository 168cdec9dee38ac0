"""`agentrl eval` stopped by SIGTERM, as a terminal's close or a scheduler ends it: the command unwinds (exit 143),
its engine is closed on the way out (vLLM's engine processes outlived a process ended at once), and its run folder
says it was stopped and how far it got, rather than running forever."""

import signal
import subprocess
import sys
import time

from agentrl.run.runstore import latest_status, read_events
from conftest import EXAMPLE_CONFIG

SLOW_ENV = """
import time
from pathlib import Path

from agentrl.examples.lookup.env import LookupEnv

class SlowLookupEnv(LookupEnv):
    def reset(self, task):
        Path(__file__).with_name("started").touch()
        time.sleep(0.5)
        return super().reset(task)
"""


def test_a_sigterm_stops_an_evaluation_and_its_run_says_so(tmp_path):
    (tmp_path / "slow_env.py").write_text(SLOW_ENV)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(f'{{"id": "key-{i}", "key": "{i % 10}"}}\n' for i in range(64)))
    command = [sys.executable, "-m", "agentrl.cli", "eval", str(EXAMPLE_CONFIG), "--data", str(tasks)]
    command += ["--batch-size", "2", "--runs-dir", str(tmp_path / "runs")]
    command += ["--set", f"env.module={tmp_path / 'slow_env.py'}", "--set", "env.class_name=SlowLookupEnv"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "started").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process.poll() is None, process.communicate()
    time.sleep(1.0)  # into the episodes
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    [run_dir] = (tmp_path / "runs").iterdir()
    status = latest_status(read_events(run_dir))
    assert status["status"] == "stopped", status
    assert "the evaluation stopped, after " in status["message"] and " of 64 episodes" in status["message"]
