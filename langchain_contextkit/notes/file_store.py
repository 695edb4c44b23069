"""`FileNoteStore`: notes as markdown files in a folder, safe across processes and crashes.

One `<id>.md` file per note (YAML front matter and markdown, the format a person reads
and edits) is the source of truth; `_folder_index` keeps the JSON index and journal true
under a lock every process shares. Writes are atomic (`_fsio`). Ids are checked on every
call and symbolic links are never followed, so nothing outside the workspace is touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.notes._folder_index import (
    _NOTE_SUFFIX,
    INDEX_FILE,
    JOURNAL_FILE,
    LOCK_FILE,
    FolderIndex,
    _Entry,
    note_path,
    read_note,
)
from langchain_contextkit.notes._fsio import fsync_dir, write_atomic
from langchain_contextkit.notes._markdown import render_note
from langchain_contextkit.notes._search import SearchIndex, query_terms
from langchain_contextkit.notes.model import (
    DEFAULT_MAX_CONTENT_CHARS,
    DEFAULT_MAX_NOTES,
    Note,
    NoteHit,
    NoteInfo,
    NoteType,
    check_note_id,
    new_note_id,
    select,
)
from langchain_contextkit.notes.store import Flow, NoteStore, Revise, done, not_found

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from langchain_contextkit.notes._fsio import _Stamp

# The file names are the store's on-disk layout, which tools and tests look at.
__all__ = ["INDEX_FILE", "JOURNAL_FILE", "LOCK_FILE", "FileNoteStore"]


class FileNoteStore(NoteStore):
    """Notes as markdown files with YAML front matter in one folder, plus a JSON index.

    Safe across threads, processes on one machine and crashes. Needs POSIX file locks:
    on Windows use [`StoreNoteStore`][langchain_contextkit.notes.StoreNoteStore].

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
        """Open the notes folder `workspace`, checking its index against the note files.

        Args:
            workspace: The folder; created with its parents if missing.
            max_notes: Notes the store holds before `create` is refused; `None` for no cap.
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
        self._index = FolderIndex(self._root)
        self._search_index: SearchIndex | None = None
        # Check every file once now, so a store edited while nothing ran is caught at open.
        self._index.locked(lambda: None, write=False, full_scan=True)

    def __repr__(self) -> str:
        """Show the workspace."""
        return f"{type(self).__name__}({self._root!r})"

    # -- the operations (see `NoteStore`): plain calls under the folder's lock ----------

    def _insert(self, draft: Note, *, named: bool) -> Flow[Note]:
        def insert() -> Note:
            self._check_room(len(self._index.entries))
            note = draft
            while note.id in self._index.entries or os.path.lexists(note_path(self._root, note.id)):
                if named:
                    raise self._taken(note.id)
                note = dataclasses.replace(note, id=new_note_id(note.created_at))
            self._save(note)
            return note

        return done(self._index.locked(insert, write=True))

    def _read(self, note_id: str) -> Flow[Note]:
        return done(self._index.locked(lambda: self._load(note_id), write=False))

    def _change(self, note_id: str, revise: Revise | None) -> Flow[Note]:
        def change() -> Note:
            note = self._load(note_id)
            if revise is not None:
                note = revise(note)
                self._save(note)
                return note
            with contextlib.suppress(FileNotFoundError):
                os.unlink(note_path(self._root, note_id))
            fsync_dir(self._root)
            del self._index.entries[note_id]
            self._index.record([{"op": "del", "id": note_id, "dir": self._index.dir_mtime()}])
            return note

        return done(self._index.locked(change, write=True))

    def _infos(self) -> Flow[list[NoteInfo]]:
        entries = self._index.locked(lambda: list(self._index.entries.values()), write=False)
        return done([entry.info for entry in entries])

    def _search(
        self, query: str, kind: NoteType | None, tags: Sequence[str], limit: int
    ) -> Flow[list[NoteHit]]:
        def search() -> list[NoteHit]:
            if not query_terms(query):
                infos = (entry.info for entry in self._index.entries.values())
                recent = select(infos, note_type=kind, tags=tags, limit=limit)
                return [NoteHit(note=self._load(info.id), score=0.0) for info in recent]
            if self._search_index is None:
                self._search_index = SearchIndex()
            self._search_index.sync(
                {note_id: entry.stamp for note_id, entry in self._index.entries.items()},
                self._read_many,
            )
            ranked = self._search_index.search(query, note_type=kind, tags=tags, limit=limit)
            return [NoteHit(note=note, score=score) for note, score in ranked]

        return done(self._index.locked(search, write=False))

    def rebuild_index(self) -> int:
        """Rebuild the index from the note files; return how many notes it has.

        Only needed after hand edits that keep a file's inode, size and modification time.
        """

        def rebuild() -> int:
            self._index.rebuild("asked for")
            return len(self._index.entries)

        return self._index.locked(rebuild, write=True)

    # -- note files ---------------------------------------------------------------------

    def _load(self, note_id: str) -> Note:
        """Read a note the index knows, or raise `NoteNotFoundError`."""
        entries = self._index.entries
        read = None if note_id not in entries else read_note(self._root, note_id, entries[note_id])
        if read is None:
            raise not_found(note_id)
        return read[0]

    def _read_many(self, note_ids: Iterable[str]) -> Iterator[tuple[Note, _Stamp]]:
        for note_id in note_ids:
            read = read_note(self._root, note_id, self._index.entries.get(note_id))
            if read is not None:
                yield read

    def _save(self, note: Note) -> None:
        """Write a note's file and record it (exclusive lock held)."""
        data = render_note(note).encode("utf-8")
        stamp = write_atomic(self._root, f"{check_note_id(note.id)}{_NOTE_SUFFIX}", data)
        entry = _Entry(note.info(), stamp)
        # In memory first: recording may fold the journal into a new index, which must
        # include this note.
        self._index.entries[note.id] = entry
        self._index.record([{"op": "put", "note": entry.to_json(), "dir": self._index.dir_mtime()}])
