"""Equal copies of the messages a thread's last call saw, swapped for those very objects.

A checkpointer deserialises the whole thread for every run, and LangGraph's message
reducer hands a stateless caller's list back as new objects too: the first model call
of every turn meets a history of equal copies. The checks a call makes (the repair
scan, the retrieval-block filter, the result cutter, the history index) remember what
they saw by object and resume where the last call ended when the list starts with
those objects. One C-level comparison of every field here lets all of them do so,
instead of each reading the whole history again.

The request is a view: the objects swapped in are equal in every field to the ones
they stand for (type, content, ids, tool calls, metadata), so what is sent does not
change, and the stored history is never touched.
"""

from __future__ import annotations

import operator
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

__all__ = ["KnownMessages"]


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
        known: tuple[BaseMessage, ...] = getattr(self._last, "messages", ())
        n = len(known)
        out = list(messages)
        if n and len(out) >= n and not all(map(operator.is_, out[:n], known)):
            head = out[:n]
            # Same classes, extra fields, then every declared field (pydantic keeps them
            # in the instance dict), compared in C and stopping at the first difference.
            same = (
                list(map(type, head)) == list(map(type, known))
                and list(map(_extra, head)) == list(map(_extra, known))
                and all(map(operator.eq, map(vars, head), map(vars, known)))
            )
            if same:
                out[:n] = known
        self._last.messages = tuple(out)
        return out


def _extra(message: BaseMessage) -> object:
    """The fields a message was given beyond its declared ones (kept outside its dict)."""
    return getattr(message, "__pydantic_extra__", None)
