"""What the server keeps is its user's alone: run folders hold configs with credentials (MCP headers, env values),
and bundles hold code the server runs. Everything it writes is created under umask 077 (so 0700 folders and 0600
files, in its children too), and a folder it is given is used only if no other user owns it or may write to it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077


def make_private_by_default() -> None:
    """Every file and folder this process and its children create from now on: readable by their user only."""
    os.umask(PRIVATE_UMASK)


def private_folder(path: Path) -> Path:
    """`path`, created 0700 if missing; ValueError if another user owns it or may write into it (they could swap a
    bundle's code or a run's config under the server). A folder of ours that others may read is made 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.getuid():
        raise ValueError(
            f"{path} belongs to another user (uid {info.st_uid}): refusing to keep runs or code there; "
            "give a folder of your own"
        )
    if info.st_mode & 0o022:
        raise ValueError(
            f"{path} can be written by other users (mode {stat.S_IMODE(info.st_mode):04o}): refusing to keep runs or "
            f"code there; chmod 700 {path}"
        )
    if info.st_mode & 0o077:
        path.chmod(0o700)
    return path
