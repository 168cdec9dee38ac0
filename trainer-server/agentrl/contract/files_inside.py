"""Files read from inside a folder that others may write to: a run folder (anyone who can write the runs folder can
plant a link to /etc/passwd or a FIFO in it), a run's code snapshot, an env folder being checked. Every reader of
such a folder opens its files through `open_inside` (or `read_inside`), which

- follows no link below the folder: each part of the path is opened with O_NOFOLLOW from the one before (a check
  of the resolved path first and an open after it could be raced by a link swapped in between);
- opens only a regular file, and never blocks on opening one that is not (a FIFO is opened with O_NONBLOCK, seen
  for what it is, and closed): one planted file never stalls a reader, nor the clients waiting behind it;
- refuses a file over the reader's cap, before reading it.

What it refuses raises RefusedFile, an OSError saying why, so a reader that already skips an unreadable file skips
a refused one the same way. The folder itself is the caller's to trust (a runs folder may well be a link to a
larger disk). `is_plain_file` and `is_plain_folder` are the same rules for a listing: a link is neither;
`open_to_write`, `open_own_file`, `folder_to_write` and `replace_file` (with `remove_staged`) for a writer of the
folder's own files.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class RefusedFile(OSError):
    """A file a reader will not open: behind a link, not a regular file, or over the reader's cap."""


def open_inside(folder: Path | str, relative: str | PurePosixPath, max_bytes: int | None) -> BinaryIO:
    """The regular file `relative` (plain names joined by '/') inside `folder`, opened for binary reading, reached
    without following any link; RefusedFile for a link, a file that is not regular, or one over `max_bytes` (None:
    no cap, for a log read in pieces). FileNotFoundError as open() raises it."""
    relative = PurePosixPath(relative)
    parts = relative.parts
    if not parts or relative.is_absolute() or any(part in ("..", ".") for part in parts):
        raise RefusedFile(f"{str(relative)!r} is not a relative path inside {folder}")
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            try:
                child = os.open(part, _OPEN_FLAGS | (0 if last else os.O_DIRECTORY), dir_fd=descriptor)
            except OSError as err:
                # O_NOFOLLOW met a link: ELOOP for the file, ENOTDIR for a folder on the way (O_DIRECTORY)
                if err.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(part, descriptor):
                    where = PurePosixPath(*parts[: index + 1])
                    raise RefusedFile(f"{where} is a link; links inside {folder} are not followed") from None
                raise
            os.close(descriptor)
            descriptor = child
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise RefusedFile(f"{relative} is not a regular file (a FIFO, a socket or a device)")
        if max_bytes is not None and status.st_size > max_bytes:
            raise RefusedFile(f"{relative} is {status.st_size:,} bytes, over the {max_bytes:,} read")
        os.set_blocking(descriptor, True)
        handle = os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
    return handle


def _is_link(name: str, folder_descriptor: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder_descriptor, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_to_write(folder: Path | str, name: str, *, append: bool) -> BinaryIO:
    """The regular file `name` directly inside `folder`, created if absent, opened to append (`append`) or to read
    and write ("r+b"), never through a link and never blocking on a FIFO: a writer of a run folder's own files
    (its event log) writes into the folder, or refuses with RefusedFile."""
    flags = os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    flags |= os.O_WRONLY | os.O_APPEND if append else os.O_RDWR
    if name in ("", ".", "..") or "/" in name:
        raise RefusedFile(f"{name!r} is not a file name inside {folder}")
    try:
        descriptor = os.open(Path(folder) / name, flags, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise RefusedFile(f"{name} is a link; links inside {folder} are not written through") from None
        if err.errno == errno.ENXIO:  # a FIFO no one reads, opened without blocking to write
            raise RefusedFile(f"{name} is not a regular file (a FIFO)") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise RefusedFile(f"{name} is not a regular file (a FIFO, a socket or a device)")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "ab" if append else "r+b")
    except BaseException:
        os.close(descriptor)
        raise


def open_own_file(folder: Path | str, name: str, *, append: bool) -> BinaryIO:
    """`open_to_write` for a file the folder's writer can begin anew (a log of its stderr, an index it rebuilds): a
    link or FIFO planted in its place is removed, never written through nor what it leads to, and the file made."""
    try:
        return open_to_write(folder, name, append=append)
    except RefusedFile:
        (Path(folder) / name).unlink()
        return open_to_write(folder, name, append=append)


def folder_to_write(folder: Path | str, name: str) -> Path:
    """The folder `name` directly inside `folder` (made if absent), for a writer of the folder's own files (an
    export): RefusedFile when a link, or anything but a folder, is in its place, so nothing is written through it
    to wherever it leads."""
    path = Path(folder) / name
    try:
        path.mkdir()
    except FileExistsError:
        pass
    if not is_plain_folder(path):
        raise RefusedFile(f"{name} is a link or not a folder; links inside {folder} are not written through")
    return path


def replace_file(folder: Path | str, name: str, data: bytes) -> Path:
    """`data` as the regular file `name` directly inside `folder`, whole or not at all (a reader sees the old file or
    the new one): written to a new file of a random name, created exclusively (never through a link nor onto a FIFO
    planted at a name known in advance, as a fixed `.tmp` name was), synced, then renamed over `name` (a rename
    replaces a link itself, never what it leads to)."""
    if name in ("", ".", "..") or "/" in name:
        raise RefusedFile(f"{name!r} is not a file name inside {folder}")
    descriptor, staging = tempfile.mkstemp(dir=folder, prefix=_staging_prefix(name))
    try:
        os.fchmod(descriptor, 0o666 & ~_umask())  # as open() creates it (the server's 077: private to its user)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, Path(folder) / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise
    return Path(folder) / name


def remove_staged(folder: Path | str, name: str) -> None:
    """What a `replace_file` of `name` into `folder` left when its process was ended while it wrote."""
    for staging in Path(folder).glob(f"{_staging_prefix(name)}*"):
        staging.unlink(missing_ok=True)


def _staging_prefix(name: str) -> str:
    return f".tmp-{name}-"


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would change it for every thread meanwhile)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o077  # unknown: private


def read_inside(folder: Path | str, relative: str | PurePosixPath, max_bytes: int) -> bytes:
    """The whole of `open_inside`'s file: RefusedFile also for one that grew past `max_bytes` while it was read."""
    with open_inside(folder, relative, max_bytes) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RefusedFile(f"{relative} grew over the {max_bytes:,} bytes read while it was read")
    return data


def parse_json(data: bytes | str) -> Any:
    """JSON from a file others may write, every failure a ValueError: Python's parser raises RecursionError for JSON
    nested past its stack (a line of 100,000 '[' planted in a run folder), which a reader that skips damage by
    catching ValueError let through as an internal error."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None


def read_json_inside(folder: Path | str, relative: str | PurePosixPath, max_bytes: int) -> Any:
    """`read_inside`'s file as JSON (`parse_json`)."""
    return parse_json(read_inside(folder, relative, max_bytes))


def is_plain_file(path: Path) -> bool:
    """Whether `path` is a regular file itself, not a link to one (nor a FIFO): what a listing of a folder keeps."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def is_planted(path: Path) -> bool:
    """Whether something other than a regular file is at `path`: a link (to anything), a FIFO, a folder. One lstat:
    a file that goes between two looks (SQLite removes its journal as its last connection closes) is not planted."""
    try:
        return not stat.S_ISREG(path.lstat().st_mode)
    except OSError:  # nothing there (or nothing reachable), as os.path.lexists reads it
        return False


def is_plain_folder(path: Path) -> bool:
    """Whether `path` is a folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False
