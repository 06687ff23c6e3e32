"""Where a store lives: a local folder, or any fsspec URL (s3://, gs://, az://, an NFS mount, memory:// in tests).

Every write goes to a hidden temp name beside its destination and is then published under its real name, so a
reader never sees a partial file and concurrent writers (one file each, named with a uuid) never touch the same
name. Locally the publication is os.replace after an fsync (atomic, survives a crash); elsewhere it is the file
system's move (on object stores a copy of the whole object, then the temp is deleted; a temp left by a crash is
hidden and never read).

check_store_root says, before anything starts, why a location cannot hold a store: a run that cannot write its
lineage would otherwise fail only after Prefect has started, or (memory://) succeed and lose everything.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from fsspec import get_filesystem_class
from fsspec.core import split_protocol, url_to_fs
from fsspec.implementations.local import LocalFileSystem
from fsspec.registry import known_implementations

_LOCAL_PROTOCOLS = {None, "file", "local"}
# File systems that keep nothing once the process ends: a lineage written there is lost at exit.
_NOT_KEPT = {"memory"}


class Storage:
    def __init__(self, root: str | os.PathLike) -> None:
        self.url = os.fspath(root)
        if not self.url:
            raise ValueError("the store's location is empty: give a folder or an fsspec URL")
        self.fs, self.root = url_to_fs(self.url)
        self.local = isinstance(self.fs, LocalFileSystem)

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def exists(self, path: str) -> bool:
        return self.fs.exists(path)

    def files(self, folder: str, pattern: str) -> list[str]:
        """Paths in `folder` whose names match the glob `pattern`, sorted; hidden temp files never match."""
        if not self.fs.isdir(folder):
            return []
        return sorted(p for p in self.fs.glob(posixpath.join(folder, pattern)) if not _hidden(p))

    def folders(self, folder: str) -> list[str]:
        """Names of the sub-folders of `folder` ([] when it does not exist)."""
        if not self.fs.isdir(folder):
            return []
        entries = self.fs.ls(folder, detail=True)
        return sorted(posixpath.basename(e["name"].rstrip("/")) for e in entries if e["type"] == "directory")

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open(path, "rb") as f:
            return f.read()

    def open(self, path: str) -> BinaryIO:
        return self.fs.open(path, "rb")

    def write_atomic(self, path: str, write: Callable[[BinaryIO], object]) -> None:
        """Write through `write(binary_file)` to a hidden temp name beside `path`, then publish it as `path`."""
        folder = posixpath.dirname(path)
        temp = posixpath.join(folder, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
        self.fs.makedirs(folder, exist_ok=True)
        try:
            with self.fs.open(temp, "wb") as f:
                write(f)
                if self.local:
                    f.flush()
                    os.fsync(f.fileno())
            if self.local:
                os.replace(temp, path)
                _fsync_dir(folder)
            else:
                self.fs.mv(temp, path)
        except OSError as exc:  # a write's ENOSPC names no file: the one being published is named for the user
            if exc.filename is None:
                raise OSError(exc.errno, exc.strerror or " ".join(str(exc).split()), path) from exc
            raise
        finally:
            if self.fs.exists(temp):
                self.fs.rm(temp)


def check_store_root(root: str | os.PathLike, *, write: bool) -> str | None:
    """Why `root` cannot hold a lineage store (to read it, or with `write` to add to it), in one line; None if it
    can. Checks what can be known without touching a remote system: for a URL, that fsspec knows its scheme and
    its package is installed (naming the package to install) and that it keeps files; for a local folder, that it
    is a folder, or can be made one, and that it can be read and, with `write`, written."""
    url = os.fspath(root)
    if not url:
        return "the store's location is empty: give a folder or an fsspec URL"
    protocols = [split_protocol(piece)[0] or piece for piece in url.split("::")[:-1]]
    protocols.append(split_protocol(url.split("::")[-1])[0])
    for protocol in protocols:
        problem = _protocol_problem(url, protocol)
        if problem:
            return problem
    if protocols == [protocols[-1]] and protocols[-1] in _LOCAL_PROTOCOLS:
        return _folder_problem(url, Path(LocalFileSystem._strip_protocol(url)), write)
    return None


def _protocol_problem(url: str, protocol: str | None) -> str | None:
    if protocol in _LOCAL_PROTOCOLS:
        return None
    if protocol in _NOT_KEPT:
        return f"the store {url} is in this process's memory and would be lost at exit: give a folder or a shared URL"
    try:
        get_filesystem_class(protocol)
    except ValueError:
        return f"the store {url}: unknown URL scheme {protocol}:// (fsspec knows none by that name)"
    except ImportError as exc:
        package = known_implementations.get(protocol, {}).get("class", "fsspec").split(".")[0]
        if package == "fsspec":  # one of fsspec's own file systems, missing a library of its own; fsspec names it
            return f"the store {url} cannot be used: {' '.join(str(exc).split())}"
        return f"the store {url} needs the {package} package for {protocol}://: pip install {package}"
    return None


def _folder_problem(url: str, folder: Path, write: bool) -> str | None:
    """A local store's folder: a folder (or creatable under its nearest existing parent), readable, writable."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "is a file" if existing == folder else f"cannot be created: {existing} is a file"
        return f"the store {url} {where}, not a folder"
    if existing == folder and not os.access(folder, os.R_OK | os.X_OK):
        return f"the store {url} cannot be read (permission denied)"
    if write and not os.access(existing, os.W_OK | os.X_OK):
        where = "is read-only" if existing == folder else f"cannot be created: {existing} is read-only"
        return f"the store {url} {where}"
    return None


def _hidden(path: str) -> bool:
    return posixpath.basename(path).startswith(".")


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename is still atomic
    finally:
        os.close(fd)
