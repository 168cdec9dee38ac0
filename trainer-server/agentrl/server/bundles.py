"""Env bundles: how a local editor ships its env folder to a remote server.

An archive (zip or tar, optionally gzip) is checked member by member before anything is written:
no absolute paths, no `..`, no links or devices, bounded file count and sizes (declared and actual,
so a zip bomb stops at the limit). It is extracted into a temporary folder inside the store and
renamed to its content hash, so a bundle is complete or absent, and never outside the store.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import shutil
import tarfile
import uuid
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO

from agentrl.server.protocol import BUNDLE_NOT_FOUND, BUNDLE_REJECTED, RpcError

MAX_ARCHIVE_BYTES = 32 * 2**20
MAX_TOTAL_BYTES = 256 * 2**20
MAX_FILE_BYTES = 64 * 2**20
MAX_FILES = 2_000


@dataclass
class Member:
    name: str
    size: int
    is_dir: bool
    open: Callable[[], IO[bytes]]  # the member's bytes, read only after every member passed the checks


def _reject(message: str) -> RpcError:
    return RpcError(BUNDLE_REJECTED, f"env bundle rejected: {message}")


def _safe_relative(name: str) -> PurePosixPath:
    if "\\" in name or "\x00" in name:
        raise _reject(f"{name!r}: backslashes and NUL are not allowed in member names")
    path = PurePosixPath(name)
    if path.is_absolute() or (path.parts and path.parts[0].endswith(":")):
        raise _reject(f"{name!r}: absolute paths are not allowed")
    if ".." in path.parts:
        raise _reject(f"{name!r}: '..' would escape the bundle folder")
    if not path.parts or path == PurePosixPath("."):
        raise _reject(f"{name!r}: empty member name")
    return path


def _check_counts(members: list[Member]) -> None:
    files = [m for m in members if not m.is_dir]
    if len(members) > MAX_FILES:
        raise _reject(f"{len(members)} entries; at most {MAX_FILES} are allowed")
    declared = sum(m.size for m in files)
    if declared > MAX_TOTAL_BYTES:
        raise _reject(f"{declared} bytes uncompressed; at most {MAX_TOTAL_BYTES} are allowed")
    for m in files:
        if m.size > MAX_FILE_BYTES:
            raise _reject(f"{m.name!r} is {m.size} bytes; at most {MAX_FILE_BYTES} per file")


def _copy_bounded(source: io.BufferedIOBase, target: Path, limit: int, name: str, budget: list[int]) -> None:
    """Copy at most `limit` bytes, and never past the archive's total budget, whatever the header said."""
    written = 0
    with target.open("wb") as out:
        while chunk := source.read(1 << 16):
            written += len(chunk)
            budget[0] -= len(chunk)
            if written > limit or budget[0] < 0:
                raise _reject(f"{name!r} expands past its declared size or the bundle's size limit")
            out.write(chunk)


def _write_members(members: list[Member], dest: Path) -> int:
    """Checks the whole listing first, then writes; returns the number of files."""
    _check_counts(members)
    budget = [MAX_TOTAL_BYTES]
    for member in members:
        target = dest / _safe_relative(member.name)
        if member.is_dir:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with member.open() as source:
            _copy_bounded(source, target, member.size, member.name, budget)
    return sum(1 for m in members if not m.is_dir)


def _extract_zip(data: bytes, dest: Path) -> int:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = []
        for info in archive.infolist():
            mode = info.external_attr >> 16
            if mode and (mode & 0o170000) not in (0, 0o100000, 0o040000):
                raise _reject(f"{info.filename!r}: links and special files are not allowed")
            _safe_relative(info.filename)
            members.append(Member(info.filename, info.file_size, info.is_dir(), partial(archive.open, info)))
        return _write_members(members, dest)


def _extract_tar(data: bytes, dest: Path) -> int:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        members = []
        for info in archive:  # streaming: a tar with a million headers stops at the count limit
            if not (info.isfile() or info.isdir()):
                raise _reject(f"{info.name!r}: links and special files are not allowed")
            _safe_relative(info.name)
            members.append(Member(info.name, info.size, info.isdir(), partial(archive.extractfile, info)))
            if len(members) > MAX_FILES:
                raise _reject(f"more than {MAX_FILES} entries")
        return _write_members(members, dest)


class BundleStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def add(self, archive_b64: str) -> tuple[str, int]:
        """(sha256, number of files) of a stored bundle."""
        if len(archive_b64) > MAX_ARCHIVE_BYTES * 4 // 3 + 4:
            raise _reject(f"archive over {MAX_ARCHIVE_BYTES} bytes")
        try:
            data = base64.b64decode(archive_b64, validate=True)
        except (binascii.Error, ValueError):
            raise _reject("archive is not valid base64") from None
        digest = hashlib.sha256(data).hexdigest()
        final = self.root / digest
        if final.is_dir():
            return digest, sum(1 for p in final.rglob("*") if p.is_file())
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".tmp-{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            if zipfile.is_zipfile(io.BytesIO(data)):
                try:
                    files = _extract_zip(data, staging)
                except (zipfile.BadZipFile, zlib.error, EOFError) as err:
                    raise _reject(f"zip archive is corrupt: {err}") from None
            else:
                try:
                    files = _extract_tar(data, staging)
                except tarfile.ReadError:
                    raise _reject("archive is neither a zip nor a tar file") from None
                except (tarfile.TarError, zlib.error, EOFError) as err:
                    raise _reject(f"tar archive is corrupt: {err}") from None
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return digest, files

    def path(self, bundle_id: str) -> Path:
        if len(bundle_id) != 64 or any(c not in "0123456789abcdef" for c in bundle_id):
            raise RpcError(BUNDLE_NOT_FOUND, f"no bundle {bundle_id!r}: a bundle id is a sha256 hex digest")
        path = self.root / bundle_id
        if not path.is_dir():
            raise RpcError(BUNDLE_NOT_FOUND, f"no bundle {bundle_id}; upload it with env/upload first")
        return path
