"""Notes: the value types every note store returns, and the rules a note must follow.

A note is a small, titled, typed piece of project memory that an agent *updates in
place*, so it stays the one authoritative record (unlike append-only memory).

```python
from langchain_contextkit.notes import NOTE_TYPES, check_note_id, new_note_id

note_id = new_note_id()
print(check_note_id(note_id) == note_id, note_id.startswith("note_"))
# True True
print(NOTE_TYPES)
# ('task_state', 'conclusion', 'blocker', 'action', 'reference', 'general')
```
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from langchain_contextkit.errors import InvalidNoteError, NoteLimitError

__all__ = [
    "DEFAULT_MAX_CONTENT_CHARS",
    "DEFAULT_MAX_NOTES",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_TITLE_CHARS",
    "NOTE_TYPES",
    "Note",
    "NoteHit",
    "NoteInfo",
    "NoteSummary",
    "NoteType",
    "check_content",
    "check_note_id",
    "check_note_type",
    "check_tags",
    "check_title",
    "is_note_id",
    "new_note_id",
    "utc_now",
]

NoteType = Literal["task_state", "conclusion", "blocker", "action", "reference", "general"]
"""What a note records."""

NOTE_TYPES: tuple[NoteType, ...] = get_args(NoteType)
"""Every note type, in the order the tool documents them."""

DEFAULT_MAX_NOTES = 1000
"""Notes a store holds by default before `create` is refused."""

DEFAULT_MAX_CONTENT_CHARS = 20_000
"""Characters a note's content may have by default."""

MAX_TITLE_CHARS = 200
"""Characters a title may have."""

MAX_TAGS = 20
"""Tags a note may have."""

MAX_TAG_CHARS = 64
"""Characters a tag may have."""

# ASCII letters, digits, `_` and `-` after `note_`: never a separator, a dot or a control
# character, so `<id>.md` always names a file directly inside the workspace.
_ID_PATTERN = re.compile(r"note_[A-Za-z0-9_-]{1,100}")
_ID_EXAMPLE = "note_20250119_153000_1a2b3c4d"
_SUFFIX_BYTES = 4  # 8 hex digits: two notes made in the same second collide 1 in 4e9 times


@dataclass(frozen=True, kw_only=True, slots=True)
class NoteInfo:
    """A note's metadata: its front matter, without the content."""

    id: str
    """The note's id, `note_<YYYYMMDD>_<HHMMSS>_<suffix>` (UTC)."""

    title: str
    """A one-line title."""

    type: NoteType
    """What the note records (one of `NOTE_TYPES`)."""

    tags: tuple[str, ...] = ()
    """Free-form labels, in the order given, without duplicates."""

    created_at: datetime
    """When the note was created (timezone-aware, UTC)."""

    updated_at: datetime
    """When the note was last changed (timezone-aware, UTC)."""

    def to_dict(self) -> dict[str, Any]:
        """Return the metadata as JSON-ready data (timestamps as ISO 8601 strings)."""
        return {
            "id": self.id,
            "title": self.title,
            "type": self.type,
            "tags": list(self.tags),
            "created_at": format_timestamp(self.created_at),
            "updated_at": format_timestamp(self.updated_at),
        }

    def info(self) -> NoteInfo:
        """Return the metadata alone."""
        return NoteInfo(
            id=self.id,
            title=self.title,
            type=self.type,
            tags=self.tags,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Note(NoteInfo):
    """A whole note: its metadata and its markdown content."""

    content: str = ""
    """The note's body, markdown, exactly as written."""

    def to_dict(self) -> dict[str, Any]:
        """Return the note as JSON-ready data (timestamps as ISO 8601 strings)."""
        data = NoteInfo.to_dict(self)
        data["content"] = self.content
        return data

    @classmethod
    def from_dict(cls, data: object) -> Note:
        """Rebuild a note from `to_dict`'s output (or a store item's value).

        Raises:
            InvalidNoteError: If a field is missing or malformed.
        """
        if not isinstance(data, dict):
            msg = f"a stored note must be a mapping, got {type(data).__name__}"
            raise InvalidNoteError(msg)
        try:
            return cls(
                id=check_note_id(data["id"]),
                title=_require_str(data["title"], "title"),
                type=check_note_type(data["type"]),
                tags=tuple(_require_str(tag, "tag") for tag in data.get("tags") or ()),
                created_at=parse_timestamp(data["created_at"]),
                updated_at=parse_timestamp(data["updated_at"]),
                content=_require_str(data.get("content", ""), "content"),
            )
        except KeyError as missing:
            msg = f"a stored note lacks the field {missing}"
            raise InvalidNoteError(msg) from None


@dataclass(frozen=True, kw_only=True, slots=True)
class NoteHit:
    """A search result: a note and how well it matches the query."""

    note: Note
    """The matching note."""

    score: float
    """BM25 relevance, higher is better; 0 when the query had no word (newest first)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoteSummary:
    """A store at a glance: how many notes of each type, and the latest ones."""

    total: int
    """Number of notes."""

    by_type: dict[str, int] = field(default_factory=dict)
    """Number of notes per type, for the types that have any."""

    recent: tuple[NoteInfo, ...] = ()
    """The most recently updated notes, newest first."""

    def to_dict(self) -> dict[str, Any]:
        """Return the summary as JSON-ready data."""
        return {
            "total": self.total,
            "by_type": dict(self.by_type),
            "recent": [info.to_dict() for info in self.recent],
        }


# -- rules -----------------------------------------------------------------------------


def utc_now() -> datetime:
    """Return the current time, timezone-aware, in UTC."""
    return datetime.now(timezone.utc)


def new_note_id(now: datetime | None = None) -> str:
    """Return a fresh note id, `note_<YYYYMMDD>_<HHMMSS>_<8 hex digits>`, in UTC.

    The random suffix keeps ids unique across processes without coordination.

    Args:
        now: The creation time; defaults to the current time.
    """
    moment = (now or utc_now()).astimezone(timezone.utc)
    return f"note_{moment:%Y%m%d_%H%M%S}_{secrets.token_hex(_SUFFIX_BYTES)}"


def check_note_id(note_id: object) -> str:
    """Validate a note id and return it unchanged.

    Raises:
        InvalidNoteError: If it is not `note_` and ASCII letters, digits, `_` or `-`.
    """
    if not isinstance(note_id, str):
        msg = f"note_id must be a string like {_ID_EXAMPLE!r}, got {type(note_id).__name__}"
        raise InvalidNoteError(msg)
    if _ID_PATTERN.fullmatch(note_id) is None:
        shown = note_id if len(note_id) <= 60 else note_id[:57] + "..."  # noqa: PLR2004
        msg = (
            f"invalid note_id {shown!r}: an id looks like {_ID_EXAMPLE!r} (ASCII letters, "
            "digits, '_' and '-' after 'note_'); use an id returned by create, list or search"
        )
        raise InvalidNoteError(msg)
    return note_id


def is_note_id(text: str) -> bool:
    """Tell whether `text` is a well-formed note id."""
    return _ID_PATTERN.fullmatch(text) is not None


def check_note_type(note_type: object) -> NoteType:
    """Validate a note type (one of `NOTE_TYPES`) and return it."""
    for known in NOTE_TYPES:
        if note_type == known:
            return known
    msg = f"invalid note_type {note_type!r}: use one of {', '.join(NOTE_TYPES)}"
    raise InvalidNoteError(msg)


def check_title(title: object) -> str:
    """Validate a title (a non-blank line of `MAX_TITLE_CHARS` at most) and return it."""
    text = _require_str(title, "title")
    if not text.strip():
        msg = "title must not be empty: give the note a short one-line title"
        raise InvalidNoteError(msg)
    if _has_control(text):
        msg = "title must be a single line (no line breaks or control characters)"
        raise InvalidNoteError(msg)
    if len(text) > MAX_TITLE_CHARS:
        msg = (
            f"title is {len(text)} characters long; keep it under {MAX_TITLE_CHARS} "
            "and put details in content"
        )
        raise InvalidNoteError(msg)
    return text


def check_tags(tags: object) -> tuple[str, ...]:
    """Validate tags (non-blank lines, `MAX_TAGS` of `MAX_TAG_CHARS` at most); drop repeats."""
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        msg = f"tags must be a list of strings, got {type(tags).__name__}"
        raise InvalidNoteError(msg)
    unique: dict[str, None] = {}
    for tag in tags:
        text = _require_str(tag, "tag")
        if not text.strip() or _has_control(text):
            msg = f"invalid tag {text!r}: a tag is a non-empty single line"
            raise InvalidNoteError(msg)
        if len(text) > MAX_TAG_CHARS:
            msg = f"tag {text[:20]!r}... is too long; keep tags under {MAX_TAG_CHARS} characters"
            raise InvalidNoteError(msg)
        unique[text] = None
    if len(unique) > MAX_TAGS:
        msg = f"a note has at most {MAX_TAGS} tags, got {len(unique)}"
        raise InvalidNoteError(msg)
    return tuple(unique)


def check_content(content: object, max_chars: int) -> str:
    """Validate a note's content (text of `max_chars` at most) and return it unchanged."""
    text = _require_str(content, "content")
    if len(text) > max_chars:
        msg = (
            f"content is {len(text)} characters, over this store's cap of {max_chars}: "
            "shorten it or split it into several notes"
        )
        raise NoteLimitError(msg)
    return text


def format_timestamp(moment: datetime) -> str:
    """Format a timestamp as ISO 8601 in UTC with microseconds (sorts as text)."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def parse_timestamp(value: object) -> datetime:
    """Read a timestamp from ISO 8601 text or a `datetime`; naive times count as UTC."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            msg = f"invalid timestamp {value!r}: expected ISO 8601"
            raise InvalidNoteError(msg) from None
    if not isinstance(value, datetime):
        msg = f"invalid timestamp {value!r}: expected ISO 8601"
        raise InvalidNoteError(msg)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def newest_first(infos: Iterable[NoteInfo]) -> list[NoteInfo]:
    """Sort notes by last update, newest first (ties by id, for a stable order)."""
    return sorted(infos, key=lambda info: (info.updated_at, info.id), reverse=True)


def select(
    infos: Iterable[NoteInfo],
    *,
    note_type: NoteType | None = None,
    tags: Sequence[str] = (),
    limit: int | None = None,
) -> list[NoteInfo]:
    """Keep notes of `note_type` with any of `tags` (if given), newest first, `limit` at most."""
    kept = newest_first(
        info
        for info in infos
        if (note_type is None or info.type == note_type)
        and (not tags or any(tag in info.tags for tag in tags))
    )
    return kept if limit is None else kept[:limit]


def summarize(infos: Sequence[NoteInfo], *, recent: int) -> NoteSummary:
    """Count notes per type and pick the `recent` latest."""
    counts = Counter(info.type for info in infos)
    return NoteSummary(
        total=len(infos),
        by_type={kind: counts[kind] for kind in NOTE_TYPES if counts[kind]},
        recent=tuple(newest_first(infos)[:recent]),
    )


def _require_str(value: object, what: str) -> str:
    """Return `value` if it is valid Unicode text, else raise `InvalidNoteError`."""
    if not isinstance(value, str):
        msg = f"{what} must be a string, got {type(value).__name__}"
        raise InvalidNoteError(msg)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        msg = f"{what} is not valid Unicode text (it holds an unpaired surrogate)"
        raise InvalidNoteError(msg) from None
    return value


def _has_control(text: str) -> bool:
    """Tell whether `text` holds a line break or another control character."""
    return any(unicodedata.category(char) in {"Cc", "Zl", "Zp"} for char in text)
