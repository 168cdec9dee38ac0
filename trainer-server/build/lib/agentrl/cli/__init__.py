"""The command line: `agentrl ARGS` in, a subcommand run out (main dispatches to the module that owns each
subcommand: train, schema, demo here; eval, env check and serve beside their code)."""
