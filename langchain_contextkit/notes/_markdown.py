"""A note as a markdown file with YAML front matter (the seed's layout), and back.

Titles and tags are single lines emitted by PyYAML, which quotes whatever YAML would
misread, so the first line that is exactly `---` after the opening one always closes the
front matter, whatever the content holds. Only `yaml.safe_load` reads it.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, TypeVar

import yaml

from langchain_contextkit.errors import InvalidNoteError
from langchain_contextkit.notes.model import (
    Note,
    check_note_type,
    check_tags,
    format_timestamp,
    parse_timestamp,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# libyaml's emitter when PyYAML was built with it (5x faster), else the pure-Python one;
# both emit only standard tags, and the output is read back with `yaml.safe_load`.
_SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_FENCE = "---"
# The opening fence, the lines up to the first closing one (YAML's `...` too, as some
# editors write), and the one blank line our writer puts after it.
_FRONT_MATTER = re.compile(r"---\r*\n((?:[^\n]*\n)*?)(?:---|\.\.\.)\r*(?:\n(?:\r?\n)?|\Z)")
# Front matter beyond this is not ours (our own is a few hundred bytes): refuse to parse it.
_MAX_FRONT_MATTER_CHARS = 64_000


def render_note(note: Note) -> str:
    """Render `note` as markdown with YAML front matter."""
    header = yaml.dump(
        {"id": note.id, "title": note.title, "type": note.type, "tags": list(note.tags)},
        Dumper=_SAFE_DUMPER,
        allow_unicode=True,
        sort_keys=False,
        default_flow_style=None,  # tags on one line, `[a, b]`, as in the seed
        width=2**31 - 1,  # never fold a long title over two lines
    )
    # Timestamps are written by hand: PyYAML would use a space instead of the seed's `T`.
    return (
        f"{_FENCE}\n{header}"
        f"created_at: {format_timestamp(note.created_at)}\n"
        f"updated_at: {format_timestamp(note.updated_at)}\n"
        f"{_FENCE}\n\n{note.content}"
    )


def split_front_matter(text: str) -> tuple[str | None, str]:
    """Split a note file into its front matter (or `None`) and its body."""
    match = _FRONT_MATTER.match(text)
    return (match[1], text[match.end() :]) if match else (None, text)


def parse_note(text: str, *, note_id: str, modified: datetime) -> Note:
    """Read a note file; the file name gives the id.

    A hand-written file may lack fields or front matter: the title falls back to the id,
    the type to `general`, the times to `modified` (the file's), with a warning.
    """
    front, body = split_front_matter(text)
    meta: dict[object, object] = {}
    if front is not None and len(front) <= _MAX_FRONT_MATTER_CHARS:
        try:
            loaded = yaml.safe_load(front)
        except yaml.YAMLError as error:
            logger.warning("note %s: unreadable front matter (%s); using defaults", note_id, error)
            loaded = None
        if isinstance(loaded, dict):
            meta = loaded
    elif front is not None:
        logger.warning("note %s: front matter too long; using defaults", note_id)
    if meta.get("id", note_id) != note_id:
        logger.warning("note %s: front matter says id %r; the file name wins", note_id, meta["id"])
    title = meta.get("title")
    return Note(
        id=note_id,
        title=title if isinstance(title, str) and title.strip() else note_id,
        type=_field(note_id, "type", meta.get("type", "general"), check_note_type, "general"),
        tags=_field(note_id, "tags", meta.get("tags"), check_tags, ()),
        created_at=_field(
            note_id, "created_at", meta.get("created_at", modified), parse_timestamp, modified
        ),
        updated_at=_field(
            note_id, "updated_at", meta.get("updated_at", modified), parse_timestamp, modified
        ),
        content=body,
    )


def _field(
    note_id: str, name: str, value: object, check: Callable[[object], _T], default: _T
) -> _T:
    """Validate one front-matter field, falling back to `default` with a warning."""
    try:
        return check(value)
    except InvalidNoteError as error:
        logger.warning(
            "note %s: bad %s in front matter (%s); using %r", note_id, name, error, default
        )
        return default
