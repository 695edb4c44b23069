"""`NoteTool`: structured notes an agent keeps up to date, over any `NoteStore`.

An agent records what it must not forget (a task's state, a conclusion, a blocker, the
next action) and *updates* those notes as things change, so each stays the one
authoritative record. [`NoteSource`][langchain_contextkit.retrieval.sources.notes.NoteSource] feeds
them back into the context; storage, validation and ranking live in
`langchain_contextkit.notes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field, ValidationError

from langchain_contextkit.errors import ConfigError, NoteError
from langchain_contextkit.notes.file_store import FileNoteStore
from langchain_contextkit.notes.model import DEFAULT_MAX_NOTES, NOTE_TYPES, Note, NoteInfo, NoteType
from langchain_contextkit.notes.store import NoteStore  # noqa: TC001 - a field's type

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Sequence

    from langchain_contextkit.notes.model import NoteHit, NoteSummary

__all__ = ["NoteTool", "NoteToolError", "NoteToolInput"]

_Answer = tuple[str, dict[str, Any]]  # text for the model, structured data for the artifact
NoteAction = Literal["create", "read", "update", "delete", "list", "search", "summary"]

_DEFAULT_LIST_LIMIT = 20
_DEFAULT_SEARCH_LIMIT = 10
_MAX_LIMIT = 100
_SNIPPET_CHARS = 160  # content shown per search hit: enough to judge, cheap to read
_RECENT_IN_SUMMARY = 5


class NoteToolError(ToolException):
    """A note action failed in a way the model can fix; the message says how."""


class NoteToolInput(BaseModel):
    """Arguments of the `note` tool."""

    action: NoteAction = Field(
        description=(
            "create: new note (title, content; optional note_type, tags). "
            "read: one note in full (note_id). "
            "update: change a note in place (note_id plus the fields to change). "
            "delete: remove a note (note_id). "
            "list: newest notes (optional note_type, tags, limit). "
            "search: notes most relevant to query (optional note_type, tags, limit). "
            "summary: counts per type and the latest notes."
        )
    )
    title: str | None = Field(default=None, description="One-line title (create, update).")
    content: str | None = Field(
        default=None, description="Markdown body (create, update: replaces the old body)."
    )
    note_type: NoteType | None = Field(
        default=None,
        description=(
            "task_state, conclusion, blocker, action, reference or general (create: "
            "defaults to general; update: changes it; list/search: filter)."
        ),
    )
    tags: list[str] | None = Field(
        default=None,
        description="Labels (create, update: replaces them; list/search: any of them).",
    )
    note_id: str | None = Field(
        default=None, description="Id of the note to read, update or delete."
    )
    query: str | None = Field(default=None, description="What to search for (search).")
    limit: int | None = Field(
        default=None, ge=1, le=_MAX_LIMIT, description="Maximum notes to return (list, search)."
    )


def _explain_validation_error(error: ValidationError) -> str:
    """Turn a pydantic error into a message the model can act on."""
    problems = []
    for detail in error.errors():
        where = ".".join(str(part) for part in detail.get("loc", ())) or "input"
        problems.append(f"{where}: {detail.get('msg', 'invalid')}")
    return (
        "Invalid note tool call: "
        + "; ".join(problems)
        + f". note_type must be one of {', '.join(NOTE_TYPES)}."
    )


class NoteTool(BaseTool):
    """A LangChain tool over a [`NoteStore`][langchain_contextkit.notes.NoteStore].

    One tool, one `action` argument (create / read / update / delete / list / search /
    summary), sync and async. It answers with compact text for the model and, as the
    `ToolMessage` artifact, the same data structured (`note`, `notes`, `hits` or
    `summary`). Mistakes the model can fix (an unknown id, a missing field, a bad type,
    a full store) come back as an error `ToolMessage` saying what to do; other failures
    propagate.

    ```python
    from langgraph.store.memory import InMemoryStore

    from langchain_contextkit.notes import StoreNoteStore
    from langchain_contextkit.tools.notes import NoteTool

    tool = NoteTool(store=StoreNoteStore(InMemoryStore()))
    tool.invoke({"action": "create", "title": "Phase 1", "content": "Models refactored."})
    print(tool.invoke({"action": "search", "query": "refactor models"}).splitlines()[0])
    # 1 note:
    ```
    """

    name: str = "note"
    description: str = (
        "Keep structured project notes that persist across turns: record task state, "
        "conclusions, blockers and next actions, and UPDATE an existing note when things "
        "change instead of creating a new one, so every note stays the current truth. "
        "Search or list notes before starting work."
    )
    args_schema: type[BaseModel] = NoteToolInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool = True
    handle_validation_error: Any = _explain_validation_error

    store: NoteStore
    """Where the notes live."""

    def __init__(
        self,
        *,
        store: NoteStore | None = None,
        workspace: str | os.PathLike[str] | None = None,
        max_notes: int | None = DEFAULT_MAX_NOTES,
        **kwargs: Any,  # noqa: ANN401 - BaseTool's own fields (name, callbacks, tags, ...)
    ) -> None:
        """Build the tool over a store, or over a folder of notes (the seed's shape).

        ``NoteTool(workspace="./project_notes", max_notes=1000)`` keeps its notes in a
        `FileNoteStore` there; ``NoteTool(store=...)`` takes any other backend (for
        example `StoreNoteStore` over a LangGraph `BaseStore`).

        Args:
            store: Where the notes live.
            workspace: A folder for a `FileNoteStore` (created if missing), instead of
                `store`.
            max_notes: With `workspace`: notes kept before `create` is refused (`None`
                for no cap). A `store` has its own.
            **kwargs: Other `BaseTool` fields.

        Raises:
            ConfigError: When neither or both of `store` and `workspace` are given, or
                `max_notes` is given with `store`.
        """
        if (store is None) == (workspace is None):
            msg = "pass store=... (any NoteStore) or workspace=... (a folder of notes)"
            raise ConfigError(msg)
        if store is None:
            store = FileNoteStore(cast("str | os.PathLike[str]", workspace), max_notes=max_notes)
        elif max_notes != DEFAULT_MAX_NOTES:
            msg = "max_notes belongs to the store: FileNoteStore(..., max_notes=...)"
            raise ConfigError(msg)
        super().__init__(store=store, **kwargs)

    def _run(self, action: NoteAction, **fields: Any) -> _Answer:  # noqa: ANN401 - the schema's fields
        """Run one action against the store."""
        name, args, kwargs, render = _Request(action=action, **fields).call()
        try:
            return render(getattr(self.store, name)(*args, **kwargs))
        except NoteError as error:
            raise NoteToolError(str(error)) from error

    async def _arun(self, action: NoteAction, **fields: Any) -> _Answer:  # noqa: ANN401 - the schema's fields
        """Async twin of `_run`, through the store's async methods."""
        name, args, kwargs, render = _Request(action=action, **fields).call()
        try:
            return render(await getattr(self.store, f"a{name}")(*args, **kwargs))
        except NoteError as error:
            raise NoteToolError(str(error)) from error


@dataclass(frozen=True, kw_only=True, slots=True)
class _Request:
    """A tool call's arguments, checked per action (so sync and async share the checks)."""

    action: str
    title: str | None = None
    content: str | None = None
    note_type: NoteType | None = None
    tags: list[str] | None = None
    note_id: str | None = None
    query: str | None = None
    limit: int | None = None

    def call(self) -> tuple[str, tuple[str, ...], dict[str, Any], Callable[[Any], _Answer]]:  # noqa: PLR0911 - one per action
        """The store method to call (its sync name), its arguments, and the renderer."""
        if self.action == "create":
            return "create", (), self.create_args(), _created
        if self.action == "read":
            return "get", (self.require_id(),), {}, _read
        if self.action == "update":
            return "update", (self.require_id(),), self.update_args(), _updated
        if self.action == "delete":
            return "delete", (self.require_id(),), {}, _deleted
        if self.action == "list":
            return "list_notes", (), self.filters(_DEFAULT_LIST_LIMIT), _listed
        if self.action == "search":
            return "search", (self.require_query(),), self.filters(_DEFAULT_SEARCH_LIMIT), _found
        return "summary", (), {"recent": _RECENT_IN_SUMMARY}, _summarised

    def create_args(self) -> dict[str, Any]:
        missing = [name for name in ("title", "content") if getattr(self, name) is None]
        if missing:
            msg = f"create needs {' and '.join(missing)}: pass a one-line title and the content"
            raise NoteToolError(msg)
        return {
            "title": self.title,
            "content": self.content,
            "note_type": self.note_type or "general",
            "tags": self.tags or (),
        }

    def update_args(self) -> dict[str, Any]:
        changes = {
            "title": self.title,
            "content": self.content,
            "note_type": self.note_type,
            "tags": self.tags,
        }
        if all(value is None for value in changes.values()):
            msg = "update needs note_id and at least one of title, content, note_type, tags"
            raise NoteToolError(msg)
        return changes

    def filters(self, default_limit: int) -> dict[str, Any]:
        return {
            "note_type": self.note_type,
            "tags": self.tags or (),
            "limit": self.limit or default_limit,
        }

    def require_id(self) -> str:
        if not self.note_id:
            msg = f"{self.action} needs note_id: use list or search to find it"
            raise NoteToolError(msg)
        return self.note_id

    def require_query(self) -> str:
        if self.query is None or not self.query.strip():
            msg = "search needs a query; to browse notes without one, use list"
            raise NoteToolError(msg)
        return self.query


# -- compact text for the model, structured data for the artifact ---------------------


def _line(info: NoteInfo) -> str:
    """One line per note: id, type, title, tags, last update (to the minute)."""
    tags = f" #{' #'.join(info.tags)}" if info.tags else ""
    return f"{info.id} [{info.type}] {info.title}{tags} (updated {info.updated_at:%Y-%m-%d %H:%M}Z)"


def _snippet(content: str) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 3] + "..."


def _plural(count: int) -> str:
    return f"{count} note{'' if count == 1 else 's'}"


def _created(note: Note) -> _Answer:
    return f"Created note {note.id}: {note.title}", {"action": "create", "note": note.to_dict()}


def _read(note: Note) -> _Answer:
    return f"{_line(note)}\n\n{note.content}", {"action": "read", "note": note.to_dict()}


def _updated(note: Note) -> _Answer:
    return f"Updated note {_line(note)}", {"action": "update", "note": note.to_dict()}


def _deleted(info: NoteInfo) -> _Answer:
    return f"Deleted note {info.id}: {info.title}", {"action": "delete", "note": info.to_dict()}


def _listed(infos: Sequence[NoteInfo]) -> _Answer:
    if not infos:
        text = "No notes match."
    else:
        text = "\n".join([f"{_plural(len(infos))}, newest first:", *map(_line, infos)])
    return text, {"action": "list", "notes": [info.to_dict() for info in infos]}


def _found(hits: Sequence[NoteHit]) -> _Answer:
    if not hits:
        text = "No notes match; try other words, or list to browse."
    else:
        lines = [f"{_plural(len(hits))}:"]
        for hit in hits:
            lines.append(_line(hit.note))
            if hit.note.content.strip():
                lines.append(f"  {_snippet(hit.note.content)}")
        text = "\n".join(lines)
    hits_data = [{**hit.note.to_dict(), "score": hit.score} for hit in hits]
    return text, {"action": "search", "hits": hits_data}


def _summarised(summary: NoteSummary) -> _Answer:
    counts = ", ".join(f"{kind} {count}" for kind, count in summary.by_type.items())
    lines = [f"{_plural(summary.total)}" + (f" ({counts})" if counts else "") + "."]
    if summary.recent:
        lines.append("Latest:")
        lines.extend(_line(info) for info in summary.recent)
    return "\n".join(lines), {"action": "summary", "summary": summary.to_dict()}
