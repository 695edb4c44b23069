"""Descriptor-level file I/O for `FileNoteStore` and `WorkspaceOffloadStore`: atomic, no symlinks.

Every write goes to a temporary file, is fsynced, then renamed over the old one (and the
folder fsynced), so a crash leaves the old version or the new one. Files are opened with
`O_NOFOLLOW`: a symbolic link in the workspace is never followed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

__all__ = ["file_stamp", "fsync_dir", "read_bytes", "write_atomic"]


# (inode, mtime in ns, size): changes whenever a note file is replaced or edited.
_Stamp = tuple[int, int, int]


def _stamp(st: os.stat_result) -> _Stamp:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


_TMP_PREFIX = ".tmp-"
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def write_atomic(root: str, name: str, data: bytes) -> _Stamp:
    """Replace the file `name` in `root` with `data`: temporary file, fsync, rename."""
    tmp = os.path.join(root, f"{_TMP_PREFIX}{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            stamp = _stamp(os.fstat(fd))
        finally:
            os.close(fd)
        # Renaming over a symbolic link replaces the link, never what it points to.
        os.replace(tmp, os.path.join(root, name))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(root)
    return stamp


def fsync_dir(root: str) -> None:
    """Make renames and deletions in `root` durable."""
    fd = os.open(root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_stamp(root: str, name: str) -> _Stamp | None:
    """The stamp of the regular file `name` in `root`; None when missing or not regular."""
    try:
        info = os.lstat(os.path.join(root, name))
    except FileNotFoundError:
        return None
    return _stamp(info) if stat.S_ISREG(info.st_mode) else None


def read_bytes(root: str, name: str) -> bytes | None:
    """The bytes of the file `name` in `root`, without following a link; None if unreadable."""
    try:
        fd = os.open(os.path.join(root, name), os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
    except OSError:
        return None
    with open(fd, "rb") as file:
        return file.read()
