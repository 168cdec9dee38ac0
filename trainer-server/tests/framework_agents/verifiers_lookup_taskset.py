"""A verifiers v1 taskset with one tool, as verifiers' `vf-init --add-tool` scaffolds one: the lookup tool served by a
`vf.Toolset` (an MCP server: verifiers starts it as `python -m verifiers_lookup_taskset`), one task per key, and a
reward. verifiers_lookup.py plays it; both run in .venv-frameworks/verifiers."""

import verifiers.v1 as vf

TABLE = {"3": "blue"}


class LookupToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = None  # the tool is `lookup`, as in every other framework's agent, not `lookup_toolset_lookup`

    @vf.tool
    def lookup(self, key: str) -> str:
        """Return the value stored under a key."""
        return TABLE.get(key, "none")


class LookupData(vf.TaskData):
    key: str


class LookupTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class LookupTask(vf.Task[LookupData, vf.State, LookupTaskConfig]):
    @classmethod
    def toolsets(cls, config: LookupTaskConfig) -> list[vf.Toolset]:
        return [LookupToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def found(self, trace: vf.Trace) -> float:
        return float(TABLE.get(self.data.key, "none") in trace.last_reply)


class LookupConfig(vf.TasksetConfig):
    key: str = "3"
    task: LookupTaskConfig = LookupTaskConfig()


class LookupTaskset(vf.Taskset[LookupTask, LookupConfig]):
    def load(self) -> list[LookupTask]:
        data = LookupData(key=self.config.key, prompt=f"What is under key {self.config.key}?")
        return [LookupTask(data, self.config.task)]


__all__ = ["LookupTaskset"]

if __name__ == "__main__":
    LookupToolset.run()
