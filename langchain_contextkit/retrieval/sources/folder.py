"""Read a folder of text and markdown documents, safely, and chunk every file.

`load_folder` reads every ``.md``, ``.markdown``, ``.txt`` and ``.rst`` file under a folder,
skipping hidden folders, files that are not UTF-8 text, anything that is not a regular
file and symbolic links that lead out of the folder, with a time limit per read; it
reports what it skipped and why.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_contextkit.retrieval.sources.chunking import (
    DEFAULT_CHUNK_TOKENS,
    DocChunk,
    _check_chunk_tokens,
    split_document,
)
from langchain_contextkit.tokens.count import TokenCounter, count_tokens

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["DEFAULT_SUFFIXES", "LoadedFolder", "SkippedFile", "load_folder"]


DEFAULT_SUFFIXES: tuple[str, ...] = (".md", ".markdown", ".txt", ".rst")
"""File name endings `load_folder` reads (compared case-insensitively)."""

# Bytes read to tell a binary file from text: a NUL byte there means binary.
_SNIFF_BYTES = 8192

# A document is opened without blocking (a FIFO would wait for a writer forever), without
# following a final symbolic link (unless asked to), and never inherited by a child.
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows would otherwise translate line ends

# A document still being read after this long (a stalled network or FUSE mount) is skipped.
_READ_SECONDS = 10.0

_READ_BLOCK = 1 << 16

_clock = time.monotonic  # a module attribute, so a test can make time pass

_LEAVES_FOLDER = "symlink leaves the folder"

_INTO_HIDDEN = "symlink points into a hidden file or folder"


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A document (or a linked folder) `load_folder` did not read, and why."""

    path: str
    """The file's path, relative to the folder."""

    reason: str
    """Why it was skipped: ``symlink leaves the folder``, ``symlink points into a hidden
    file or folder``, ``not a regular file (a FIFO)`` (or a socket, a device...), ``binary
    file``, ``not UTF-8 text (byte N)``, ``read did not finish within 10 s`` or
    ``cannot read: ...`` with the system's reason."""


@dataclass(frozen=True, slots=True)
class LoadedFolder:
    """What `load_folder` found: the chunks, the files read and the files skipped."""

    chunks: tuple[DocChunk, ...]
    files: tuple[str, ...]
    """Relative paths of the documents read, in walk order."""
    skipped: tuple[SkippedFile, ...]


def load_folder(
    folder: str | os.PathLike[str],
    *,
    suffixes: Sequence[str] = DEFAULT_SUFFIXES,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    token_counter: TokenCounter = count_tokens,
    follow_symlinks: bool = False,
) -> LoadedFolder:
    """Read and chunk every document under `folder`, recursively.

    Hidden folders and files (names starting with ``.``) are not visited. A document that
    holds a NUL byte (binary) or is not UTF-8 (a BOM is allowed) or cannot be read is
    skipped and listed in `skipped`, with the reason.

    Only regular files are read. Each is opened without blocking and its type checked on
    the open descriptor, so a FIFO, socket or device named ``*.md`` is skipped (``not a
    regular file``) instead of hanging the load; a read still running after 10 seconds
    (a stalled network mount) is skipped too.

    By default the folder confines what is read, since its text goes into a prompt: every
    document's real path (all symbolic links resolved) must lie inside the folder's real
    path, so a link such as ``leak.md -> /etc/passwd`` is skipped (``symlink leaves the
    folder``), as is a link into a hidden file or folder inside it (``.git/config`` may
    hold credentials). A link to another document inside the folder is read. Linked
    folders are never entered: one that leaves the folder is listed in `skipped`, one
    inside it holds files that are read where they are. A link swapped in by someone
    writing to the folder *while* it is read is outside what this guards (the last step
    of the path is still opened with ``O_NOFOLLOW``).

    With `follow_symlinks` true, links to files and folders are followed wherever they
    lead (each folder is entered once, so a link to an ancestor cannot loop); use it only
    on a folder whose links you trust.

    Args:
        folder: The folder to read.
        suffixes: File name endings to read, compared case-insensitively.
        chunk_tokens: Largest chunk, measured with `token_counter`.
        token_counter: Counts the tokens of a string.
        follow_symlinks: Follow symbolic links that lead out of the folder (see above).

    Returns:
        The chunks of every document read, in a stable order (sorted names).

    Raises:
        FileNotFoundError: If `folder` does not exist.
        NotADirectoryError: If `folder` is not a folder.
        ConfigError: If `chunk_tokens` is not an int >= 1.
    """
    _check_chunk_tokens(chunk_tokens)
    root = Path(folder)
    if not root.exists():
        msg = f"no such folder: {root}"
        raise FileNotFoundError(msg)
    if not root.is_dir():
        msg = f"not a folder: {root}"
        raise NotADirectoryError(msg)
    wanted = {suffix.lower() for suffix in suffixes}
    real_root = os.path.realpath(root)
    chunks: list[DocChunk] = []
    files: list[str] = []
    skipped: list[SkippedFile] = []
    entered = {_identity(root)}
    for directory, subdirectories, names in os.walk(root, followlinks=follow_symlinks):
        subdirectories[:] = _folders_to_enter(
            Path(directory),
            subdirectories,
            root=root,
            real_root=real_root,
            entered=entered if follow_symlinks else None,
            skipped=skipped,
        )
        for name in sorted(names):
            if name.startswith(".") or Path(name).suffix.lower() not in wanted:
                continue
            path = Path(directory) / name
            relative = path.relative_to(root).as_posix()
            text, problem = _load_document(path, real_root, follow_symlinks=follow_symlinks)
            if text is None:
                skipped.append(SkippedFile(relative, problem))
                continue
            files.append(relative)
            chunks.extend(
                split_document(
                    text, path=relative, chunk_tokens=chunk_tokens, token_counter=token_counter
                )
            )
    return LoadedFolder(tuple(chunks), tuple(files), tuple(skipped))


def _folders_to_enter(
    directory: Path,
    names: Iterable[str],
    *,
    root: Path,
    real_root: str,
    entered: set[tuple[int, int] | None] | None,
    skipped: list[SkippedFile],
) -> list[str]:
    """The sub-folders of `directory` the walk goes on into, sorted, hidden ones left out.

    `entered` is None when links are not followed: then no linked folder is entered, and
    one that leads out of the folder is added to `skipped`. Otherwise it holds the folders
    entered so far, and a folder is entered only once, so a link back to an ancestor
    cannot make the walk go round for ever.
    """
    kept: list[str] = []
    for name in sorted(n for n in names if not n.startswith(".")):
        path = directory / name
        if entered is not None:
            identity = _identity(path)
            if identity is None or identity in entered:
                continue
            entered.add(identity)
        elif path.is_symlink():
            if not _within(os.path.realpath(path), real_root):
                skipped.append(SkippedFile(path.relative_to(root).as_posix(), _LEAVES_FOLDER))
            continue  # one inside the folder holds files the walk reads where they are
        kept.append(name)
    return kept


def _within(path: str, directory: str) -> bool:
    """Tell whether the real path `path` is `directory` (a real path) or inside it."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """The device and inode of what `path` leads to; None if it cannot be looked at."""
    try:
        info = Path(path).stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _load_document(path: Path, real_root: str, *, follow_symlinks: bool) -> tuple[str | None, str]:
    """A document's text, or None and why it is not read; confined unless links are followed."""
    if follow_symlinks:
        return _read_text(str(path), follow_final_link=True)
    real = os.path.realpath(path)
    if not _within(real, real_root):
        return None, _LEAVES_FOLDER
    # The walk never enters hidden folders; a link must not reach into one either.
    if any(part.startswith(".") for part in Path(os.path.relpath(real, real_root)).parts):
        return None, _INTO_HIDDEN
    # The real path has no link left in it: opening it refuses one swapped in meanwhile.
    return _read_text(real, follow_final_link=False)


def _not_regular(mode: int) -> str:
    """Why a file of this type is not read."""
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    )
    kind = next((name for test, name in kinds if test(mode)), "an unknown kind of file")
    return f"not a regular file ({kind})"


def _read_text(path: str, *, follow_final_link: bool) -> tuple[str | None, str]:
    """The file's text, or None and why it cannot be read as text."""
    data, problem = _read_regular_file(path, follow_final_link=follow_final_link)
    if data is None:
        return None, problem
    if b"\0" in data[:_SNIFF_BYTES]:
        return None, "binary file"
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start})"


def _read_regular_file(path: str, *, follow_final_link: bool) -> tuple[bytes | None, str]:
    """The bytes of a regular file, or None and why they cannot be had.

    The type is looked at first, so a device or FIFO is not even opened (opening some
    devices does something), then checked again on the open descriptor, which is what
    counts: the file may have been replaced between the two. The open does not block, so
    a FIFO swapped in meanwhile is refused rather than waited on.
    """
    try:
        if not stat.S_ISREG(mode := Path(path).stat().st_mode):
            return None, _not_regular(mode)
        flags = os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
        fd = os.open(path, flags if follow_final_link else flags | _O_NOFOLLOW)
    except OSError as exc:
        return None, _cannot_read(exc)
    try:
        if not stat.S_ISREG(mode := os.fstat(fd).st_mode):
            return None, _not_regular(mode)
        return _read_all(fd), ""
    except _SlowReadError:
        return None, f"read did not finish within {_READ_SECONDS:g} s"
    except OSError as exc:
        return None, _cannot_read(exc)
    finally:
        os.close(fd)


class _SlowReadError(Exception):
    """A document was still being read when its time ran out."""


def _cannot_read(exc: OSError) -> str:
    if isinstance(exc, BlockingIOError):  # nothing to read yet: waiting could take for ever
        return "read would block"
    return f"cannot read: {exc.strerror or exc}"


def _read_all(fd: int) -> bytes:
    """Everything left in `fd`, block by block.

    Raises:
        _SlowReadError: If the blocks are still coming after `_READ_SECONDS`.
    """
    deadline = _clock() + _READ_SECONDS
    blocks: list[bytes] = []
    while block := os.read(fd, _READ_BLOCK):
        blocks.append(block)
        if _clock() > deadline:
            raise _SlowReadError
    return b"".join(blocks)
