"""Equal copies of the messages a thread's last call saw, swapped for those very objects.

A checkpointer deserialises the whole thread for every run: the first model call of
every turn meets a history of equal copies. The checks a call makes (the repair scan,
the retrieval-block filter, the result cutter, the history index) remember what they
saw by object and resume where the last call ended when the list starts with those
objects. One C-level comparison of every field here lets all of them do so, instead of
each reading the whole history again. Within a run the state keeps its objects, so the
next call's list starts with the very copies met before: they are swapped again after
a pointer comparison, not a second field-by-field one.

The request is a view: the objects swapped in are equal in every field to the ones
they stand for (class, content, ids, tool calls, metadata, extra fields), so what is
sent does not change, and the stored history is never touched.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

__all__ = ["KnownMessages"]

_CONTENT = operator.attrgetter("content")
_EXTRA = operator.attrgetter("__pydantic_extra__")
"""The fields a message was given beyond its declared ones (kept outside its dict)."""


@dataclass(frozen=True, slots=True)
class _Seen:
    """A call's list as given, the contents it held, and the list the call used."""

    given: tuple[BaseMessage, ...]
    contents: tuple[object, ...]
    used: tuple[BaseMessage, ...]


class KnownMessages:
    """Each thread's last request history; `adopt` maps equal copies back onto it."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        """Nothing is known until the first call."""
        self._last = threading.local()

    def adopt(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """`messages`, its start swapped for the last call's objects when they are equal.

        Only a list that starts with the whole of the last one is swapped (an agent's
        history grows); anything else is returned as it is and becomes the one known.
        """
        given = list(messages)
        out = list(given)
        seen: _Seen | None = getattr(self._last, "seen", None)
        if seen is not None and len(seen.given) <= len(given):
            n = len(seen.given)
            head = given[:n]
            if _same_objects(head, seen.given, seen.contents) or _equal(head, seen.used):
                out[:n] = seen.used
        self._last.seen = _Seen(tuple(given), tuple(map(_CONTENT, given)), tuple(out))
        return out


def _same_objects(
    head: list[BaseMessage], given: tuple[BaseMessage, ...], contents: tuple[object, ...]
) -> bool:
    """The very objects of the last list, each still holding the content it had."""
    return all(map(operator.is_, head, given)) and all(
        map(operator.is_, map(_CONTENT, head), contents)
    )


def _equal(head: list[BaseMessage], known: tuple[BaseMessage, ...]) -> bool:
    """Equal in every field: classes, extra fields, then the declared ones, all in C."""
    # Pydantic keeps declared fields in the instance dict; the comparison stops at the
    # first difference.
    return (
        list(map(type, head)) == list(map(type, known))
        and list(map(_EXTRA, head)) == list(map(_EXTRA, known))
        and all(map(operator.eq, map(vars, head), map(vars, known)))
    )
