"""Agent RL Studio trainer: write Tools and a ToolEnv, train an LLM agent on them with RL."""

from agentrl.environment.env import EpisodeScore, StepResult, ToolEnv, format_outcome
from agentrl.environment.function_tool import tool
from agentrl.environment.tool import Tool, ToolCallOutcome

__version__ = "0.1.0"
__all__ = ["EpisodeScore", "StepResult", "Tool", "ToolCallOutcome", "ToolEnv", "format_outcome", "tool", "__version__"]
