"""Notes: durable, updatable project memory for agents, on files or any LangGraph store.

- [`NoteStore`][langchain_contextkit.notes.NoteStore]: the interface (sync and async).
- [`FileNoteStore`][langchain_contextkit.notes.FileNoteStore]: markdown files with YAML
  front matter plus a JSON index, in one folder; safe across processes and crashes.
- [`StoreNoteStore`][langchain_contextkit.notes.StoreNoteStore]: any LangGraph
  `BaseStore` (`InMemoryStore`, `PostgresStore`), for notes shared between machines.
- [`Note`][langchain_contextkit.notes.Note], `NoteInfo`, `NoteHit`, `NoteSummary`: what
  they return.

The agent-facing tool over a store is
[`NoteTool`][langchain_contextkit.tools.notes.NoteTool]; the context source that feeds
notes to the builder is [`NoteSource`][langchain_contextkit.retrieval.sources.notes.NoteSource].
"""

from langchain_contextkit.notes.file_store import FileNoteStore
from langchain_contextkit.notes.langgraph_store import DEFAULT_NAMESPACE, StoreNoteStore
from langchain_contextkit.notes.model import (
    DEFAULT_MAX_CONTENT_CHARS,
    DEFAULT_MAX_NOTES,
    NOTE_TYPES,
    Note,
    NoteHit,
    NoteInfo,
    NoteSummary,
    NoteType,
    check_note_id,
    new_note_id,
)
from langchain_contextkit.notes.store import DEFAULT_RECENT, DEFAULT_SEARCH_LIMIT, NoteStore

__all__ = [
    "DEFAULT_MAX_CONTENT_CHARS",
    "DEFAULT_MAX_NOTES",
    "DEFAULT_NAMESPACE",
    "DEFAULT_RECENT",
    "DEFAULT_SEARCH_LIMIT",
    "NOTE_TYPES",
    "FileNoteStore",
    "Note",
    "NoteHit",
    "NoteInfo",
    "NoteStore",
    "NoteSummary",
    "NoteType",
    "StoreNoteStore",
    "check_note_id",
    "new_note_id",
]
