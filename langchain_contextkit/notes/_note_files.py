"""The note files of a `FileNoteStore` folder: where each lives and how one is read.

A note is `<id>.md` directly inside the workspace. Reading opens it with `O_NOFOLLOW`
(a symbolic link is never followed) and returns the note with its file's stamp, which the
index compares to tell a note file it already knows from one changed behind its back.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from datetime import datetime, timezone

from langchain_contextkit.notes._fsio import _O_CLOEXEC, _O_NOFOLLOW, _Stamp, _stamp
from langchain_contextkit.notes._journal import _NOTE_SUFFIX, _Entry, _info_fields
from langchain_contextkit.notes._markdown import parse_note, split_front_matter
from langchain_contextkit.notes.model import Note, check_note_id

__all__ = ["note_path", "read_note"]

# The store's one log channel, whichever of its modules reports.
logger = logging.getLogger("langchain_contextkit.notes.file_store")


def note_path(root: str, note_id: str) -> str:
    """The file of note `note_id`, which is always directly inside the workspace `root`."""
    return os.path.join(root, check_note_id(note_id) + _NOTE_SUFFIX)


def read_note(root: str, note_id: str, known: _Entry | None = None) -> tuple[Note, _Stamp] | None:
    """Read and parse a note file; `None` if it is missing or not a regular file.

    When the file is still the version `known` was recorded from (same stamp), its
    metadata is taken from `known` and only the body is split off: parsing YAML is
    most of the cost of reading a note, and the index already holds the result.
    """
    try:
        fd = os.open(note_path(root, note_id), os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:  # a symbolic link: never followed
            logger.warning("ignoring note %s: its file is a symbolic link", note_id)
            return None
        raise
    with open(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        data = file.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        logger.warning("note %s is not valid UTF-8; undecodable bytes replaced", note_id)
        text = data.decode("utf-8", errors="replace")
    stamp = _stamp(info)
    if known is not None and known.stamp == stamp:
        front, body = split_front_matter(text)
        if front is not None:
            return Note(**_info_fields(known.info), content=body), stamp
    modified = datetime.fromtimestamp(info.st_mtime, timezone.utc)
    return parse_note(text, note_id=note_id, modified=modified), stamp
