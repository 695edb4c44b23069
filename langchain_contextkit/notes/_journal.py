"""The on-disk index format of `FileNoteStore`: file names, format version, index entries.

An index entry is a note's metadata plus its file's stamp (inode, mtime, size), as one
JSON object; the journal is one JSON record per line, replayed over the index.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_contextkit.notes.model import (
    Note,
    NoteInfo,
)

if TYPE_CHECKING:
    from langchain_contextkit.notes._fsio import _Stamp

__all__ = ["INDEX_FILE", "JOURNAL_FILE"]


INDEX_FILE = "notes_index.json"
JOURNAL_FILE = "notes_journal.jsonl"
_NOTE_SUFFIX = ".md"


_FORMAT = 1


_STAMP_PARTS = 3


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the index knows of one note: its metadata and its file's stamp."""

    info: NoteInfo
    stamp: _Stamp

    def to_json(self) -> dict[str, Any]:
        data = self.info.to_dict()
        data["file"] = f"{self.info.id}{_NOTE_SUFFIX}"
        data["stamp"] = list(self.stamp)
        return data

    @classmethod
    def from_json(cls, data: object) -> _Entry:
        """Read an index entry; raises `ValueError` (or a subclass) if malformed."""
        if not isinstance(data, dict):
            msg = "index entry is not an object"
            raise TypeError(msg)
        stamp = data.get("stamp")
        if (
            not isinstance(stamp, list)
            or len(stamp) != _STAMP_PARTS
            or not all(isinstance(part, int) for part in stamp)
        ):
            msg = "index entry has no valid file stamp"
            raise ValueError(msg)
        return cls(Note.from_dict(data).info(), (stamp[0], stamp[1], stamp[2]))


class _CorruptJournal(Exception):  # noqa: N818 - a signal, not an error
    """The journal has an unreadable line: rebuild from the note files."""


def _info_fields(info: NoteInfo) -> dict[str, Any]:
    return {field.name: getattr(info, field.name) for field in dataclasses.fields(NoteInfo)}
