"""How the server starts a child process of agentrl's (a run, an env check, an export, a Tool re-run).

`python -P -m agentrl...`: without -P, `python -m` puts the working folder first on the child's import path, so an
`agentrl/` planted in the folder the server was started from would run as the server's user in place of agentrl.
"""

from __future__ import annotations

import sys


def agentrl_command(module: str, *args: str) -> list[str]:
    """The command line that runs agentrl module `module` (`agentrl.cli`, ...) with `args` in a child process."""
    return [sys.executable, "-P", "-m", module, *args]
