"""Where a store lives: a local folder, or any fsspec URL (s3://, gs://, az://, an NFS mount, memory:// in tests).

Every write goes to a hidden temp name beside its destination and is then published under its real name, so a
reader never sees a partial file and concurrent writers (one file each, named with a uuid) never touch the same
name. Locally the publication is os.replace after an fsync (atomic, survives a crash); elsewhere it is the file
system's move (on object stores a copy of the whole object, then the temp is deleted; a temp left by a crash is
hidden and never read).
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable
from typing import BinaryIO

from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem


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
        finally:
            if self.fs.exists(temp):
                self.fs.rm(temp)


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
