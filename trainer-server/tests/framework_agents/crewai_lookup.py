"""A CrewAI agent with one tool, as CrewAI's docs write one, given only the endpoint's base URL and key: a Crew of one
Agent and one Task over CrewAI's own OpenAI provider, streamed. Runs in .venv-frameworks/crewai (CrewAI pins an
OpenAI SDK older than the trainer's test environment):

    python crewai_lookup.py BASE_URL API_KEY KEY

prints its final answer, as JSON, on its last line."""

import json
import os
import sys

# A test phones nowhere: CrewAI's telemetry and its tracing prompt are off.
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import LLM, Agent, Crew, Task  # noqa: E402 - after the settings above, which it reads on import
from crewai.tools import tool  # noqa: E402

TABLE = {"3": "blue"}


@tool("lookup")
def lookup(key: str) -> str:
    """Return the value stored under a key."""
    return TABLE.get(key, "none")


def main(base_url: str, api_key: str, key: str) -> str:
    # custom_openai: CrewAI's native OpenAI provider for a model name it does not know, at this base URL.
    llm = LLM(model="policy", base_url=base_url, api_key=api_key, custom_openai=True, stream=True, max_retries=0)
    clerk = Agent(
        role="Lookup clerk",
        goal="Answer with the value stored under a key",
        backstory="You use the lookup tool.",
        tools=[lookup],
        llm=llm,
        max_iter=3,
    )
    task = Task(description=f"What is under key {key}?", expected_output="The value", agent=clerk)
    return Crew(agents=[clerk], tasks=[task]).kickoff().raw


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
