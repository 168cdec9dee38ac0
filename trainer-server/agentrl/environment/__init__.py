"""The environment side: a Tool's call in, its raw outcome out (tool, toolprocess); a turn's text in, the calls it
makes out (toolcall); the outcomes in, the next observation, process reward and done out (env's ToolEnv); a run
config in, the user's ToolEnv class out (loader); `agentrl env check` (check); a recorded call in, its outcome
with the Tool's current code (or the run's recorded code) out, in a process of its own (rerun, for the server's
`tool/rerun`); a run's loaded env in, the code it trains with copied into its folder out (code_snapshot)."""
