"""The index of a `FileNoteStore` folder, kept true under a lock across processes and crashes.

A note is `<id>.md` directly inside the folder (the source of truth). `notes_index.json`
holds every note's metadata and file stamp (inode, mtime, size); `notes_journal.jsonl` one
record per write since, so a write appends a line instead of rewriting the index; the
journal is folded into a new index once it has more lines than the store has notes. Every
operation runs under the `.notes.lock` `flock` (shared to read, exclusive to write) after
catching up with the index, the journal and the folder; the index is rebuilt from the note
files when missing, corrupt, or when the folder changed behind the store's back (its
modification time moved). Symbolic links are never followed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import stat
import sys
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_contextkit.errors import NoteError
from langchain_contextkit.notes._fsio import (
    _O_CLOEXEC,
    _O_NOFOLLOW,
    _TMP_PREFIX,
    _Stamp,
    _stamp,
    file_stamp,
    read_bytes,
    write_atomic,
)
from langchain_contextkit.notes._markdown import parse_note, split_front_matter
from langchain_contextkit.notes.model import Note, NoteInfo, check_note_id, is_note_id

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

if sys.platform != "win32":
    import fcntl

__all__ = ["INDEX_FILE", "JOURNAL_FILE", "LOCK_FILE", "FolderIndex", "note_path", "read_note"]

logger = logging.getLogger("langchain_contextkit.notes.file_store")

_T = TypeVar("_T")

INDEX_FILE = "notes_index.json"
JOURNAL_FILE = "notes_journal.jsonl"
LOCK_FILE = ".notes.lock"
_NOTE_SUFFIX = ".md"
_FORMAT = 1
# The journal is folded into the index once it has more lines than notes, and never
# sooner than this: small stores would otherwise rewrite their index every few writes.
_COMPACT_MIN = 256


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the index knows of one note: its metadata and its file's stamp."""

    info: NoteInfo
    stamp: _Stamp

    def to_json(self) -> dict[str, Any]:
        return {
            **self.info.to_dict(),
            "file": f"{self.info.id}{_NOTE_SUFFIX}",
            "stamp": list(self.stamp),
        }

    @classmethod
    def from_json(cls, data: object) -> _Entry:
        """Read an index entry; raises `ValueError` (or a subclass) if malformed."""
        match data.get("stamp") if isinstance(data, dict) else None:
            case [int() as inode, int() as mtime, int() as size]:
                return cls(Note.from_dict(data).info(), (inode, mtime, size))
        msg = "index entry has no valid file stamp"
        raise ValueError(msg)


class _CorruptJournal(Exception):  # noqa: N818 - a signal, not an error
    """The journal has an unreadable line: rebuild from the note files."""


class _NeedsExclusiveLock(Exception):  # noqa: N818 - a signal, not an error
    """The index must be repaired, which a reader holding a shared lock may not do."""


def note_path(root: str, note_id: str) -> str:
    """The file of note `note_id`, which is always directly inside the workspace `root`."""
    return os.path.join(root, check_note_id(note_id) + _NOTE_SUFFIX)


def read_note(root: str, note_id: str, known: _Entry | None = None) -> tuple[Note, _Stamp] | None:
    """Read a note file and its stamp; `None` if it is missing or not a regular file.

    When the file is still the version `known` was recorded from (same stamp), the
    metadata comes from `known` and only the body is split off (parsing YAML is most of
    the cost of a read).
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
            fields = {f.name: getattr(known.info, f.name) for f in dataclasses.fields(NoteInfo)}
            return Note(**fields, content=body), stamp
    modified = datetime.fromtimestamp(info.st_mtime, timezone.utc)
    return parse_note(text, note_id=note_id, modified=modified), stamp


class FolderIndex:
    """What a notes folder holds, as `entries`, and the lock every access runs under.

    `entries` maps each note id to its metadata and file stamp. It is current inside
    `locked`, and replaced (not updated in place) when the index is reloaded or rebuilt,
    so read it through this object, never keep the dict. A writer changes `entries`,
    then calls `record` to make the change durable.
    """

    def __init__(self, root: str) -> None:
        """Track the folder `root` (a resolved, existing path); nothing is read yet."""
        self.root = root
        self.entries: dict[str, _Entry] = {}
        self._index_stamp: _Stamp | None = None
        self._journal_offset = 0
        self._journal_lines = 0
        self._dir_mark: int | None = None
        # This process's threads take turns: they share the in-memory index.
        self._mutex = threading.RLock()

    # -- locking and refreshing ---------------------------------------------------------

    def locked(self, action: Callable[[], _T], *, write: bool, full_scan: bool = False) -> _T:
        """Run `action` under the folder's lock, with `entries` up to date.

        `write` takes the lock exclusively; a reader that finds the index in need of repair
        retakes it exclusively. `full_scan` checks every note file, not only when the
        folder's modification time moved.
        """
        with self._mutex:
            exclusive = write
            while True:
                fd = os.open(
                    os.path.join(self.root, LOCK_FILE),
                    os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC,
                    0o644,
                )
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                    try:
                        self._refresh(exclusive=exclusive, full_scan=full_scan)
                    except _NeedsExclusiveLock:
                        exclusive = True
                        continue
                    try:
                        return action()
                    except OSError:
                        # A write failed half-way: forget what we hold and reread it all.
                        self._index_stamp = None
                        raise
                finally:
                    os.close(fd)  # closing the descriptor releases the lock

    def _refresh(self, *, exclusive: bool, full_scan: bool) -> None:
        """Catch up with the index, the journal and the folder, repairing if needed."""
        self._check_own_files(exclusive=exclusive)
        index_stamp = file_stamp(self.root, INDEX_FILE)
        if index_stamp is None or index_stamp != self._index_stamp:
            loaded = self._load_index()
            if loaded is None:
                if not exclusive:
                    raise _NeedsExclusiveLock
                self.rebuild("missing" if index_stamp is None else "unreadable")
                return
            self.entries, self._dir_mark = loaded
            self._index_stamp = index_stamp
            self._journal_offset = 0
            self._journal_lines = 0
        try:
            self._replay_journal()
        except _CorruptJournal:
            if not exclusive:
                raise _NeedsExclusiveLock from None
            self.rebuild("journal unreadable")
            return
        if full_scan or self.dir_mtime() != self._dir_mark:
            self._reconcile(exclusive=exclusive)

    def _check_own_files(self, *, exclusive: bool) -> None:
        """The index and journal must be regular files, or absent.

        A symbolic link in their place is removed (never followed: the index is then
        rebuilt from the note files). A folder or a special file there is not ours to
        delete, and the store cannot work around it: a `NoteError` says what to move.
        """
        for name in (INDEX_FILE, JOURNAL_FILE):
            path = os.path.join(self.root, name)
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISREG(mode):
                continue
            if stat.S_ISLNK(mode):
                if not exclusive:
                    raise _NeedsExclusiveLock
                os.unlink(path)
                self._index_stamp = None
                logger.warning("removed a symbolic link in place of %s; index rebuilt", path)
                continue
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            msg = (
                f"{path} is {kind}, where the notes store keeps its own file: move it away "
                "and the index is rebuilt from the note files"
            )
            raise NoteError(msg)

    def _reconcile(self, *, exclusive: bool) -> None:
        """Compare the index with the note files and record any difference."""
        mark = self.dir_mtime()
        changes = self._scan()
        if changes and not exclusive:
            raise _NeedsExclusiveLock
        if changes:
            logger.warning(
                "notes index in %s was stale (%d files changed outside the store); updated",
                self.root,
                len(changes),
            )
            records: list[dict[str, Any]] = []
            for note_id, entry in changes:
                if entry is None:
                    self.entries.pop(note_id, None)
                    records.append({"op": "del", "id": note_id, "dir": mark})
                else:
                    self.entries[note_id] = entry
                    records.append({"op": "put", "note": entry.to_json(), "dir": mark})
            self.record(records)
        elif exclusive and mark != self._dir_mark:
            self.record([{"op": "mark", "dir": mark}])
        self._dir_mark = mark

    def _scan(self) -> list[tuple[str, _Entry | None]]:
        """Note files that differ from the index: `(id, entry)`, or `(id, None)` if gone."""
        changes: list[tuple[str, _Entry | None]] = []
        seen: set[str] = set()
        with os.scandir(self.root) as entries:
            for item in entries:
                if item.name.startswith(_TMP_PREFIX):
                    # Writers hold the exclusive lock while their temporary file exists,
                    # so any we can see was left by a crash.
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(item.path)
                    continue
                note_id = item.name.removesuffix(_NOTE_SUFFIX)
                if note_id == item.name or not is_note_id(note_id):
                    continue
                if item.is_symlink() or not item.is_file(follow_symlinks=False):
                    logger.warning("ignoring %s: not a regular file", item.path)
                    continue
                held = self.entries.get(note_id)
                if held is not None and held.stamp == _stamp(item.stat(follow_symlinks=False)):
                    seen.add(note_id)
                    continue
                read = read_note(self.root, note_id)
                if read is not None:  # else it vanished meanwhile: gone, below
                    seen.add(note_id)
                    note, stamp = read
                    changes.append((note_id, _Entry(note.info(), stamp)))
        changes.extend((note_id, None) for note_id in self.entries.keys() - seen)
        return changes

    def rebuild(self, why: str) -> None:
        """Rebuild index and journal from the note files (exclusive lock held)."""
        self.entries = {}
        self._dir_mark = None
        changes = self._scan()
        self.entries = {note_id: entry for note_id, entry in changes if entry is not None}
        # A new, empty workspace has no index yet: nothing worth a warning.
        level = logging.WARNING if self.entries or why != "missing" else logging.DEBUG
        logger.log(
            level,
            "notes index in %s %s; rebuilt from %d note files",
            self.root,
            why,
            len(self.entries),
        )
        self._write_index()

    # -- the index and the journal ------------------------------------------------------

    def _load_index(self) -> tuple[dict[str, _Entry], int | None] | None:
        """Read the index, or return `None` if it is missing or unreadable."""
        data = read_bytes(self.root, INDEX_FILE)
        if data is None:
            return None
        try:
            parsed = json.loads(data)
            if parsed.get("format") != _FORMAT:
                msg = f"unknown format {parsed.get('format')!r}"
                raise ValueError(msg)  # noqa: TRY301 - handled with the parse errors below
            entries = {}
            for note_id, raw in parsed["notes"].items():
                entry = _Entry.from_json(raw)
                if entry.info.id != note_id:
                    msg = f"entry {note_id!r} holds note {entry.info.id!r}"
                    raise ValueError(msg)  # noqa: TRY301
                entries[note_id] = entry
            mark = parsed.get("dir")
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            logger.warning("notes index in %s is corrupt (%s)", self.root, error)
            return None
        return entries, mark if isinstance(mark, int) else None

    def _write_index(self) -> None:
        """Write every entry to a new index and empty the journal (exclusive lock held)."""
        document = {
            "format": _FORMAT,
            "dir": self._dir_mark,
            "notes": {note_id: entry.to_json() for note_id, entry in self.entries.items()},
        }
        data = json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
        self._index_stamp = write_atomic(self.root, INDEX_FILE, data)
        # The journal's lines are all in the new index now. A crash before this truncation
        # only means replaying them again, which ends in the same state.
        fd = self._open_journal()
        try:
            os.ftruncate(fd, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._journal_offset = 0
        self._journal_lines = 0
        # Record the folder's time after our own renames, so no one rescans for them.
        self.record([{"op": "mark", "dir": self.dir_mtime()}], compact=False)

    def _replay_journal(self) -> None:
        """Apply the journal lines written since we last read it."""
        try:
            fd = os.open(
                os.path.join(self.root, JOURNAL_FILE), os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC
            )
        except FileNotFoundError:
            self._journal_offset = 0
            return
        except OSError as error:
            raise _CorruptJournal from error
        try:
            size = os.fstat(fd).st_size
            if size < self._journal_offset:
                raise _CorruptJournal  # shrunk without a new index: not our doing
            if size == self._journal_offset:
                return
            data = os.pread(fd, size - self._journal_offset, self._journal_offset)
        finally:
            os.close(fd)
        # A line without its newline is a write cut short by a crash: not yet a record.
        complete = data[: data.rfind(b"\n") + 1]
        for line in complete.splitlines():
            try:
                self._apply(json.loads(line))
            except (ValueError, TypeError, KeyError) as error:
                raise _CorruptJournal from error
            self._journal_lines += 1
        self._journal_offset += len(complete)

    def _apply(self, record: dict[str, Any]) -> None:
        """Apply one journal record to the in-memory index."""
        op = record["op"]
        if op == "put":
            entry = _Entry.from_json(record["note"])
            self.entries[entry.info.id] = entry
        elif op == "del":
            self.entries.pop(check_note_id(record["id"]), None)
        elif op != "mark":
            msg = f"unknown journal op {op!r}"
            raise ValueError(msg)
        mark = record.get("dir")
        if isinstance(mark, int):
            self._dir_mark = mark

    def record(self, records: Sequence[dict[str, Any]], *, compact: bool = True) -> None:
        """Append records to the journal, durably (exclusive lock held).

        Each record is `{"op": "put", "note": ...}`, `{"op": "del", "id": ...}` or
        `{"op": "mark"}`, with `"dir"`: the folder's modification time after the change.
        """
        data = b"".join(
            json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n" for record in records
        )
        fd = self._open_journal()
        try:
            if os.fstat(fd).st_size != self._journal_offset:
                # Bytes past what we replayed are a line torn by a crash: drop them.
                os.ftruncate(fd, self._journal_offset)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._journal_offset += len(data)
        self._journal_lines += len(records)
        for record in records:
            self._dir_mark = record.get("dir", self._dir_mark)
        if compact and self._journal_lines > max(_COMPACT_MIN, len(self.entries)):
            self._write_index()

    def _open_journal(self) -> int:
        return os.open(
            os.path.join(self.root, JOURNAL_FILE),
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC,
            0o644,
        )

    def dir_mtime(self) -> int:
        """The folder's modification time (ns), the mark of its last known change."""
        return os.stat(self.root).st_mtime_ns
