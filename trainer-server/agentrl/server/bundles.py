"""Env bundles: how a local editor ships its env folder to a remote server.

An archive (zip or tar, optionally gzip) is checked member by member before anything is written:
no absolute paths, no `..`, no links or devices, no name twice and no name both a file and a folder,
names and depths every file system can hold, zip members that are neither encrypted nor compressed
with a method Python cannot read, at least one file, bounded file count and sizes (declared and actual,
so a zip bomb stops at the limit). The folder entry `./` that `tar -C dir .` writes is accepted. It is
extracted into a temporary folder inside the store and renamed to its content hash, so a bundle is
complete or absent, and never outside the store.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import io
import os
import shutil
import tarfile
import threading
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
MAX_STORE_BYTES = 4 * 2**30  # every stored bundle together, extracted
MAX_NAME_BYTES = 255  # one path component: what common file systems hold
MAX_DEPTH = 32
# A member's PAX records or GNU long name: its path (at most MAX_DEPTH names of MAX_NAME_BYTES) and a few attributes.
MAX_EXTENDED_HEADER_BYTES = 64 * 2**10
EXTENDED_HEADER_TYPES = {
    tarfile.XHDTYPE: "PAX",
    tarfile.XGLTYPE: "PAX global",
    tarfile.SOLARIS_XHDTYPE: "PAX",
    tarfile.GNUTYPE_LONGNAME: "GNU long-name",
    tarfile.GNUTYPE_LONGLINK: "GNU long-link",
}
READABLE_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


@dataclass
class Member:
    name: str  # as written in the archive, for messages
    path: PurePosixPath  # where it goes inside the bundle folder
    size: int
    is_dir: bool
    open: Callable[[], IO[bytes]]  # the member's bytes, read only after every member passed the checks


def _reject(message: str) -> RpcError:
    return RpcError(BUNDLE_REJECTED, f"env bundle rejected: {message}")


def _safe_relative(name: str) -> PurePosixPath:
    """Where a member goes inside the bundle folder; `.` for the folder itself (`./` in a tar of `.`)."""
    if "\\" in name or "\x00" in name:
        raise _reject(f"{name!r}: backslashes and NUL are not allowed in member names")
    path = PurePosixPath(name)
    if path.is_absolute() or (path.parts and path.parts[0].endswith(":")):
        raise _reject(f"{name!r}: absolute paths are not allowed")
    if ".." in path.parts:
        raise _reject(f"{name!r}: '..' would escape the bundle folder")
    if not name:
        raise _reject("a member has an empty name")
    if len(path.parts) > MAX_DEPTH:
        raise _reject(f"{name[:80]!r}...: {len(path.parts)} folder levels; at most {MAX_DEPTH}")
    long_part = next((part for part in path.parts if len(part.encode()) > MAX_NAME_BYTES), None)
    if long_part is not None:
        raise _reject(f"{name[:80]!r}...: a name of {len(long_part.encode())} bytes; at most {MAX_NAME_BYTES}")
    return path


def _member(name: str, size: int, is_dir: bool, open_member: Callable[[], IO[bytes]]) -> Member | None:
    """The member to write, or None for the bundle folder's own entry."""
    path = _safe_relative(name)
    if path == PurePosixPath("."):
        if not is_dir:
            raise _reject(f"{name!r}: a file cannot be the bundle folder itself")
        return None
    return Member(name, path, size, is_dir, open_member)


def _check_listing(members: list[Member]) -> None:
    files = [m for m in members if not m.is_dir]
    if not files:
        raise _reject("the archive holds no files")
    seen: dict[PurePosixPath, Member] = {}
    for member in members:
        if member.path in seen and not (member.is_dir and seen[member.path].is_dir):
            raise _reject(f"{member.name!r} appears twice in the archive")
        seen[member.path] = member
    for member in files:
        folder = next((parent for parent in member.path.parents if parent in seen and not seen[parent].is_dir), None)
        if folder is not None:
            raise _reject(f"{seen[folder].name!r} is both a file and the folder of {member.name!r}")
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
    _check_listing(members)
    budget = [MAX_TOTAL_BYTES]
    for member in members:
        target = dest / member.path
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
            if info.orig_filename != info.filename:  # zipfile cuts a name at its first NUL
                raise _reject(f"{info.orig_filename!r}: backslashes and NUL are not allowed in member names")
            mode = info.external_attr >> 16
            if mode and (mode & 0o170000) not in (0, 0o100000, 0o040000):
                raise _reject(f"{info.filename!r}: links and special files are not allowed")
            if info.flag_bits & 0x1:
                raise _reject(f"{info.filename!r} is encrypted; bundles cannot carry passwords")
            if info.compress_type not in READABLE_ZIP_METHODS:
                raise _reject(
                    f"{info.filename!r} uses compression method {info.compress_type}; use stored, "
                    "deflate, bzip2 or lzma"
                )
            member = _member(info.filename, info.file_size, info.is_dir(), partial(archive.open, info))
            if member is not None:
                members.append(member)
        return _write_members(members, dest)


class _BoundedTarInfo(tarfile.TarInfo):
    """A tar header whose extended header (a PAX record set or a GNU long name or link) is refused when it declares
    more than MAX_EXTENDED_HEADER_BYTES: tarfile reads such a header's data into memory whole, so a 1,399-byte
    .tar.bz2 declaring a 1 GiB long name cost 1 GB of memory and 13 s of CPU before any member was seen."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in EXTENDED_HEADER_TYPES and self.size > MAX_EXTENDED_HEADER_BYTES:
            kind = EXTENDED_HEADER_TYPES[self.type]
            raise _reject(f"a {kind} header of {self.size} bytes; at most {MAX_EXTENDED_HEADER_BYTES} are allowed")
        return super()._proc_member(tarfile_)


def _extract_tar(data: bytes, dest: Path) -> int:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*", tarinfo=_BoundedTarInfo) as archive:
        members = []
        declared = 0
        for info in archive:  # streaming: a tar with a million headers stops at the count limit
            if not (info.isfile() or info.isdir()):
                raise _reject(f"{info.name!r}: links and special files are not allowed")
            # Reading the next header decompresses this member's data: check its size first, so a small
            # .tar.bz2 that declares gigabytes is rejected before any of them are decompressed.
            declared += info.size
            if info.size > MAX_FILE_BYTES:
                raise _reject(f"{info.name!r} is {info.size} bytes; at most {MAX_FILE_BYTES} per file")
            if declared > MAX_TOTAL_BYTES:
                raise _reject(f"{declared} bytes uncompressed; at most {MAX_TOTAL_BYTES} are allowed")
            member = _member(info.name, info.size, info.isdir(), partial(archive.extractfile, info))
            if member is not None:
                members.append(member)
            if len(members) > MAX_FILES:
                raise _reject(f"more than {MAX_FILES} entries")
        return _write_members(members, dest)


class BundleStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._admitting = threading.Lock()  # uploads run in worker threads
        for leftover in root.glob(".tmp-*") if root.is_dir() else []:
            shutil.rmtree(leftover, ignore_errors=True)  # an upload the server was killed in the middle of

    def stored_bytes(self) -> int:
        """Every stored file's size, in-flight uploads' included; a file another upload removes meanwhile (its
        staging folder renamed or cleaned up) is not counted, never an error (it was an internal error before)."""
        total = 0
        for folder, _, files in os.walk(self.root):
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    total += os.stat(os.path.join(folder, name), follow_symlinks=False).st_size
        return total

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
        with self._admitting:  # the quota is checked by one upload at a time
            stored = self.stored_bytes()
            if stored >= MAX_STORE_BYTES:
                raise _reject(
                    f"the server's bundle store holds {stored} bytes, its limit is {MAX_STORE_BYTES}; "
                    f"remove old bundles from {self.root}"
                )
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
            try:
                staging.rename(final)
            except OSError:
                if not final.is_dir():
                    raise
                # Another connection uploaded the same archive meanwhile: its bundle is this one.
                shutil.rmtree(staging, ignore_errors=True)
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
