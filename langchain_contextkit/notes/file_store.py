"""`FileNoteStore`: notes as markdown files in a folder, safe across processes and crashes.

One `<id>.md` file per note (YAML front matter and the markdown content, the format a
person reads and edits) is the source of truth; `notes_index.json` and
`notes_journal.jsonl` (see `_journal`) let listing and writing avoid opening or rewriting
every file: a write appends a journal line, and the journal is folded into a new index
once it outgrows the store, so a write costs the same whatever the store's size. A
`.notes.lock` `fcntl.flock` lock, shared for reads and exclusive for writes, is held
around every operation. Writes are atomic (see `_fsio`). The index and journal are
rebuilt from the note files when missing, corrupt, or when the folder changed behind the
store's back (noticed through the folder's modification time, recorded after every own
write). Ids are checked on every call and symbolic links are never followed, so nothing
outside the workspace is read or written.

`FileNoteStore` is one class because its API, lock protocol and journal replay share state.
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
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_contextkit.errors import ConfigError, NoteError, NoteNotFoundError
from langchain_contextkit.notes._fsio import (
    _O_CLOEXEC,
    _O_NOFOLLOW,
    _TMP_PREFIX,
    _Stamp,
    _stamp,
    file_stamp,
    fsync_dir,
    read_bytes,
    write_atomic,
)
from langchain_contextkit.notes._journal import (
    _FORMAT,
    _NOTE_SUFFIX,
    INDEX_FILE,
    JOURNAL_FILE,
    _CorruptJournal,
    _Entry,
    _info_fields,
)
from langchain_contextkit.notes._markdown import parse_note, render_note, split_front_matter
from langchain_contextkit.notes._search import SearchIndex, query_terms
from langchain_contextkit.notes.model import (
    DEFAULT_MAX_CONTENT_CHARS,
    DEFAULT_MAX_NOTES,
    Note,
    NoteHit,
    NoteInfo,
    check_note_id,
    is_note_id,
    new_note_id,
    select,
)
from langchain_contextkit.notes.store import DEFAULT_SEARCH_LIMIT, NoteStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from langchain_contextkit.notes.model import NoteType

if sys.platform != "win32":
    import fcntl

__all__ = ["FileNoteStore"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

LOCK_FILE = ".notes.lock"
# The journal is folded into the index once it has more lines than notes, and never
# sooner than this: small stores would otherwise rewrite their index every few writes.
_COMPACT_MIN = 256


class _NeedsExclusiveLock(Exception):  # noqa: N818 - a signal, not an error
    """The index must be repaired, which a reader holding a shared lock may not do."""


class FileNoteStore(NoteStore):
    """Notes as markdown files with YAML front matter in one folder, plus a JSON index.

    Safe to share between threads and between processes on one machine (all of them
    lock the same file), and against crashes (atomic writes; the index is rebuilt from
    the files whenever it cannot be trusted). Needs POSIX file locks, so not Windows:
    use [`StoreNoteStore`][langchain_contextkit.notes.StoreNoteStore] there.

    ```python
    import tempfile
    from pathlib import Path

    from langchain_contextkit.notes import FileNoteStore

    with tempfile.TemporaryDirectory() as workspace:
        store = FileNoteStore(workspace, max_notes=100)
        note = store.create(
            title="重构项目 - 第一阶段",
            content="已完成数据模型层的重构。",
            note_type="task_state",
            tags=["refactoring", "phase1"],
        )
        text = (Path(workspace) / f"{note.id}.md").read_text(encoding="utf-8")
        print(text.splitlines()[2:5])
        print(store.search("数据模型")[0].note.id == note.id)
    # ['title: 重构项目 - 第一阶段', 'type: task_state', 'tags: [refactoring, phase1]']
    # True
    ```
    """

    workspace: Path
    """The folder holding the notes (resolved: symbolic links in its path followed once)."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        max_notes: int | None = DEFAULT_MAX_NOTES,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
    ) -> None:
        """Open (creating if needed) the notes folder `workspace`.

        Opening checks the index against the note files and rebuilds it if it is
        missing, corrupt or stale.

        Args:
            workspace: The folder; created with its parents if missing.
            max_notes: Notes the store holds before `create` is refused; `None` for no
                cap.
            max_content_chars: Characters a note's content may have.

        Raises:
            ConfigError: If a limit is invalid, `workspace` is not a folder, or the
                platform has no POSIX file locks.
        """
        super().__init__(max_notes=max_notes, max_content_chars=max_content_chars)
        if sys.platform == "win32":
            msg = "FileNoteStore needs POSIX file locks (fcntl); on Windows use StoreNoteStore"
            raise ConfigError(msg)
        path = Path(workspace).expanduser()
        try:
            path.mkdir(parents=True, exist_ok=True)
            self.workspace = path.resolve(strict=True)
        except OSError as error:
            msg = f"cannot use {str(path)!r} as a notes workspace: {error}"
            raise ConfigError(msg) from error
        if not self.workspace.is_dir():
            msg = f"notes workspace {str(path)!r} is not a folder"
            raise ConfigError(msg)
        self._root = str(self.workspace)
        self._mutex = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._index_stamp: _Stamp | None = None
        self._journal_offset = 0
        self._journal_lines = 0
        self._dir_mark: int | None = None
        self._search: SearchIndex | None = None
        # Check every file once now, so a store edited while nothing ran is caught at open.
        self._with_lock(lambda: None, write=False, full_scan=True)

    def __repr__(self) -> str:
        """Show the workspace."""
        return f"{type(self).__name__}({self._root!r})"

    # -- the interface -----------------------------------------------------------------

    def create(
        self,
        *,
        title: str,
        content: str,
        note_type: NoteType = "general",
        tags: Sequence[str] = (),
        note_id: str | None = None,
    ) -> Note:
        """Create a note and return it, with its new id (see `NoteStore.create`)."""
        draft = self._draft(
            title=title, content=content, note_type=note_type, tags=tags, note_id=note_id
        )

        def create() -> Note:
            self._check_room(len(self._entries))
            note = draft
            while note.id in self._entries or os.path.lexists(self._path(note.id)):
                if note_id is not None:
                    raise self._taken(note_id)
                note = dataclasses.replace(note, id=new_note_id(note.created_at))
            self._save(note)
            return note

        return self._with_lock(create, write=True)

    def get(self, note_id: str) -> Note:
        """Return the note `note_id` (see `NoteStore.get`)."""
        check_note_id(note_id)
        return self._with_lock(lambda: self._load(note_id), write=False)

    def update(
        self,
        note_id: str,
        *,
        title: str | None = None,
        content: str | None = None,
        note_type: NoteType | None = None,
        tags: Sequence[str] | None = None,
    ) -> Note:
        """Change the given fields of a note (see `NoteStore.update`)."""
        check_note_id(note_id)

        def update() -> Note:
            note = self._revise(
                self._load(note_id), title=title, content=content, note_type=note_type, tags=tags
            )
            self._save(note)
            return note

        return self._with_lock(update, write=True)

    def delete(self, note_id: str) -> NoteInfo:
        """Delete a note and return what it was (see `NoteStore.delete`)."""
        check_note_id(note_id)

        def delete() -> NoteInfo:
            entry = self._entries.get(note_id)
            if entry is None:
                raise _not_found(note_id)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(note_id))
            self._fsync_dir()
            del self._entries[note_id]
            if self._search is not None:
                self._search.remove(note_id)
            self._record([{"op": "del", "id": note_id, "dir": self._dir_mtime()}])
            return entry.info

        return self._with_lock(delete, write=True)

    def list_notes(
        self,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[NoteInfo]:
        """Return notes newest first, filtered (see `NoteStore.list`)."""
        kind, wanted, most = self._check_filters(note_type, tags, limit, allow_none=True)
        return self._with_lock(
            lambda: select(
                (entry.info for entry in self._entries.values()),
                note_type=kind,
                tags=wanted,
                limit=most,
            ),
            write=False,
        )

    def search(
        self,
        query: str,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int = DEFAULT_SEARCH_LIMIT,
    ) -> list[NoteHit]:
        """Return the notes most relevant to `query` (see `NoteStore.search`)."""
        kind, wanted, most = self._check_filters(note_type, tags, limit, allow_none=False)
        assert most is not None  # noqa: S101 - allow_none=False guarantees it

        def search() -> list[NoteHit]:
            if not query_terms(query):
                recent = select(
                    (entry.info for entry in self._entries.values()),
                    note_type=kind,
                    tags=wanted,
                    limit=most,
                )
                return [NoteHit(note=self._load(info.id), score=0.0) for info in recent]
            if self._search is None:
                self._search = SearchIndex()
            self._search.sync(
                {note_id: entry.stamp for note_id, entry in self._entries.items()},
                self._read_many,
            )
            ranked = self._search.search(query, note_type=kind, tags=wanted, limit=most)
            return [NoteHit(note=note, score=score) for note, score in ranked]

        return self._with_lock(search, write=False)

    def rebuild_index(self) -> int:
        """Rebuild the index from the note files now, and return how many notes it has.

        Never needed for the store's own writes; use it after editing note files by hand
        in a way that keeps their inode, size and modification time.
        """

        def rebuild() -> int:
            self._rebuild("asked for")
            return len(self._entries)

        return self._with_lock(rebuild, write=True)

    # -- locking and refreshing ---------------------------------------------------------

    def _with_lock(self, action: Callable[[], _T], *, write: bool, full_scan: bool = False) -> _T:
        """Run `action` under the process lock, with the in-memory index up to date."""
        with self._mutex:
            exclusive = write
            while True:
                fd = os.open(
                    os.path.join(self._root, LOCK_FILE),
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
        index_stamp = self._file_stamp(INDEX_FILE)
        if index_stamp is None or index_stamp != self._index_stamp:
            loaded = self._load_index()
            if loaded is None:
                if not exclusive:
                    raise _NeedsExclusiveLock
                self._rebuild("missing" if index_stamp is None else "unreadable")
                return
            self._entries, self._dir_mark = loaded
            self._index_stamp = index_stamp
            self._journal_offset = 0
            self._journal_lines = 0
        try:
            self._replay_journal()
        except _CorruptJournal:
            if not exclusive:
                raise _NeedsExclusiveLock from None
            self._rebuild("journal unreadable")
            return
        if full_scan or self._dir_mtime() != self._dir_mark:
            self._reconcile(exclusive=exclusive)

    def _check_own_files(self, *, exclusive: bool) -> None:
        """The index and journal must be regular files, or absent.

        A symbolic link in their place is removed (never followed: the index is then
        rebuilt from the note files). A folder or a special file there is not ours to
        delete, and the store cannot work around it: a `NoteError` says what to move.
        """
        for name in (INDEX_FILE, JOURNAL_FILE):
            path = os.path.join(self._root, name)
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
        mark = self._dir_mtime()
        changes = self._scan()
        if changes and not exclusive:
            raise _NeedsExclusiveLock
        if changes:
            logger.warning(
                "notes index in %s was stale (%d files changed outside the store); updated",
                self._root,
                len(changes),
            )
            records: list[dict[str, Any]] = []
            for note_id, entry in changes:
                if entry is None:
                    self._entries.pop(note_id, None)
                    records.append({"op": "del", "id": note_id, "dir": mark})
                else:
                    self._entries[note_id] = entry
                    records.append({"op": "put", "note": entry.to_json(), "dir": mark})
            self._record(records)
        elif exclusive and mark != self._dir_mark:
            self._record([{"op": "mark", "dir": mark}])
        self._dir_mark = mark

    def _scan(self) -> list[tuple[str, _Entry | None]]:
        """Note files that differ from the index: `(id, entry)`, or `(id, None)` if gone."""
        changes: list[tuple[str, _Entry | None]] = []
        seen: set[str] = set()
        with os.scandir(self._root) as entries:
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
                held = self._entries.get(note_id)
                if held is not None and held.stamp == _stamp(item.stat(follow_symlinks=False)):
                    seen.add(note_id)
                    continue
                read = self._read(note_id)
                if read is not None:  # else it vanished meanwhile: gone, below
                    seen.add(note_id)
                    note, stamp = read
                    changes.append((note_id, _Entry(note.info(), stamp)))
        changes.extend((note_id, None) for note_id in self._entries.keys() - seen)
        return changes

    def _rebuild(self, why: str) -> None:
        """Rebuild index and journal from the note files (exclusive lock held)."""
        self._entries = {}
        self._dir_mark = None
        changes = self._scan()
        self._entries = {note_id: entry for note_id, entry in changes if entry is not None}
        # A new, empty workspace has no index yet: nothing worth a warning.
        level = logging.WARNING if self._entries or why != "missing" else logging.DEBUG
        logger.log(
            level,
            "notes index in %s %s; rebuilt from %d note files",
            self._root,
            why,
            len(self._entries),
        )
        self._write_index()

    # -- the index and the journal ------------------------------------------------------

    def _load_index(self) -> tuple[dict[str, _Entry], int | None] | None:
        """Read the index, or return `None` if it is missing or unreadable."""
        data = self._read_bytes(INDEX_FILE)
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
            logger.warning("notes index in %s is corrupt (%s)", self._root, error)
            return None
        return entries, mark if isinstance(mark, int) else None

    def _write_index(self) -> None:
        """Write every entry to a new index and empty the journal (exclusive lock held)."""
        document = {
            "format": _FORMAT,
            "dir": self._dir_mark,
            "notes": {note_id: entry.to_json() for note_id, entry in self._entries.items()},
        }
        data = json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
        self._index_stamp = self._write_atomic(INDEX_FILE, data)
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
        self._record([{"op": "mark", "dir": self._dir_mtime()}], compact=False)

    def _replay_journal(self) -> None:
        """Apply the journal lines written since we last read it."""
        try:
            fd = os.open(
                os.path.join(self._root, JOURNAL_FILE), os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC
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
            self._entries[entry.info.id] = entry
        elif op == "del":
            self._entries.pop(check_note_id(record["id"]), None)
        elif op != "mark":
            msg = f"unknown journal op {op!r}"
            raise ValueError(msg)
        mark = record.get("dir")
        if isinstance(mark, int):
            self._dir_mark = mark

    def _record(self, records: Sequence[dict[str, Any]], *, compact: bool = True) -> None:
        """Append records to the journal, durably (exclusive lock held)."""
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
        if compact and self._journal_lines > max(_COMPACT_MIN, len(self._entries)):
            self._write_index()

    def _open_journal(self) -> int:
        return os.open(
            os.path.join(self._root, JOURNAL_FILE),
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC,
            0o644,
        )

    # -- note files ---------------------------------------------------------------------

    def _path(self, note_id: str) -> str:
        """The file of note `note_id`, which is always directly inside the workspace."""
        return os.path.join(self._root, check_note_id(note_id) + _NOTE_SUFFIX)

    def _load(self, note_id: str) -> Note:
        """Read a note the index knows, or raise `NoteNotFoundError`."""
        if note_id not in self._entries:
            raise _not_found(note_id)
        read = self._read(note_id, self._entries.get(note_id))
        if read is None:
            raise _not_found(note_id)
        return read[0]

    def _read(self, note_id: str, known: _Entry | None = None) -> tuple[Note, _Stamp] | None:
        """Read and parse a note file; `None` if it is missing or not a regular file.

        When the file is still the version `known` was recorded from (same stamp), its
        metadata is taken from `known` and only the body is split off: parsing YAML is
        most of the cost of reading a note, and the index already holds the result.
        """
        try:
            fd = os.open(self._path(note_id), os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
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

    def _read_many(self, note_ids: Iterable[str]) -> Iterator[tuple[Note, _Stamp]]:
        for note_id in note_ids:
            read = self._read(note_id, self._entries.get(note_id))
            if read is not None:
                yield read

    def _save(self, note: Note) -> None:
        """Write a note's file and record it (exclusive lock held)."""
        data = render_note(note).encode("utf-8")
        stamp = self._write_atomic(f"{check_note_id(note.id)}{_NOTE_SUFFIX}", data)
        entry = _Entry(note.info(), stamp)
        # In memory first: recording may fold the journal into a new index, which must
        # include this note.
        self._entries[note.id] = entry
        if self._search is not None:
            self._search.put(note, stamp)
        self._record([{"op": "put", "note": entry.to_json(), "dir": self._dir_mtime()}])

    def _write_atomic(self, name: str, data: bytes) -> _Stamp:
        """Replace the workspace file `name` with `data`: temporary file, fsync, rename."""
        return write_atomic(self._root, name, data)

    def _fsync_dir(self) -> None:
        """Make renames and deletions in the workspace durable."""
        fsync_dir(self._root)

    def _dir_mtime(self) -> int:
        return os.stat(self._root).st_mtime_ns

    def _file_stamp(self, name: str) -> _Stamp | None:
        return file_stamp(self._root, name)

    def _read_bytes(self, name: str) -> bytes | None:
        return read_bytes(self._root, name)


def _not_found(note_id: str) -> NoteNotFoundError:
    return NoteNotFoundError(
        f"no note with id {note_id!r} (deleted, or never created): use list or search "
        "to find the ids of existing notes"
    )
