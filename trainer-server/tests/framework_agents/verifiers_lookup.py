"""One episode of verifiers_lookup_taskset played by verifiers' own code, given only the endpoint's base URL and key:
its single-agent env, its `null` harness (its chat program, run by uv, calling the model only with `stream: true`)
on the host (the subprocess runtime; the default is a Prime sandbox), its interception server relaying every request
to the endpoint. Runs in .venv-frameworks/verifiers (verifiers pins an OpenAI SDK older and an mcp newer than the
trainer's test environment), with this folder on PYTHONPATH (verifiers imports the taskset by its id):

    python verifiers_lookup.py BASE_URL API_KEY KEY

prints the agent's final reply, as JSON, on its last line; exits 1 with the episode's errors where it failed."""

import asyncio
import json
import os
import sys

import verifiers.v1 as vf
from verifiers.v1.utils.loaders import load_environment, resolve_env_config

API_KEY_VARIABLE = "AGENTRL_EPISODE_KEY"  # verifiers reads an endpoint's key from the environment variable it names


async def main(base_url: str, api_key: str, key: str) -> str:
    os.environ[API_KEY_VARIABLE] = api_key
    config = resolve_env_config(
        {
            "taskset": {"id": "verifiers_lookup_taskset", "key": key},
            "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}},
        }
    )
    env = load_environment(config)
    [task] = list(env.taskset)
    client = vf.EvalClientConfig(base_url=base_url, api_key_var=API_KEY_VARIABLE)
    async with env.serving():
        episode = await env.run_episode(task, vf.ModelContext(client=client, model="policy"))
    errors = [error.message for error in episode.errors + [e for trace in episode.traces for e in trace.errors]]
    if errors or not episode.traces:
        sys.exit(f"the episode failed: {errors}")
    return episode.traces[0].last_reply


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
