"""Recognising a history across calls: the same messages, cheaply, in C.

An agent's history is re-sent on every call, and each per-call memo asks whether this
call's list extends the one it saw last, and whether the messages it knows still hold
the contents it read. Both are asked of every message of a long history on every call,
so both are one C-level list comparison rather than a Python step per message.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

__all__ = ["same_contents", "same_messages", "starts_with"]

_CONTENT = operator.attrgetter("content")


def same_messages(messages: Sequence[BaseMessage], known: Sequence[BaseMessage]) -> bool:
    """Whether `messages` are `known`'s messages, one for one: a pointer comparison, in C.

    The memos of an agent's growing history ask this of every call's list. Both ends must
    be the very objects; between them one C-level list comparison, which compares each
    pair's pointers before anything else (about 25 times faster than an `is` per pair
    through `map`). An equal copy between two very objects is the same message by its
    fields: all a memo derives from a message is derived from those.
    """
    n = len(known)
    if len(messages) != n:
        return False
    if not n:
        return True
    if messages[0] is not known[0] or messages[-1] is not known[-1]:
        return False
    mine = messages if isinstance(messages, list) else list(messages)
    theirs = known if isinstance(known, list) else list(known)
    try:
        return mine == theirs
    except Exception:  # noqa: BLE001 - a field whose `==` raises (an array): not the same
        return False


def same_contents(messages: Sequence[BaseMessage], contents: Sequence[object]) -> bool:
    """Whether each message still holds its content in `contents` (that object or an equal one).

    How a memo that knows messages by their objects sees a content reassigned in place
    (``message.content = ...``): one C-level read of every content, compared as a list.
    """
    try:
        return list(map(_CONTENT, messages)) == list(contents)
    except Exception:  # noqa: BLE001 - a content whose `==` raises: read as changed
        return False


def starts_with(messages: Sequence[BaseMessage], known: Sequence[BaseMessage]) -> bool:
    """Whether `messages` begins with `known`'s messages (`same_messages` on its head)."""
    n = len(known)
    return n <= len(messages) and same_messages(
        messages[:n] if n < len(messages) else messages, known
    )
