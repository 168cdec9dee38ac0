"""A real MCP server written with the official SDK, for the MCP tests (tests/test_mcp.py): tools that answer,
fail, crash the server and hang it.

    python mcp_server.py                  # stdio
    python mcp_server.py http PORT        # streamable HTTP on 127.0.0.1:PORT/mcp; checks the test's header
"""

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("arithmetic")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    print(f"shouting {text!r}", file=sys.stderr, flush=True)  # what a server logs lands in the run's folder
    return text.upper()


@server.tool()
def divide(a: float, b: float) -> float:
    """a / b; fails on b = 0."""
    return a / b


@server.tool()
def crash() -> str:
    """Ends the server's process, as a server with a fatal bug does."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answers in time."""
    time.sleep(60)
    return "too late"


@server.tool()
def pid() -> int:
    """The server's process id: a restarted server answers with another one."""
    return os.getpid()


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
