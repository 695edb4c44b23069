"""Trade a checkpointer's fresh copies of a history for the message objects seen before.

A caller that passes back the list it was given hands over the same message objects
every call, and each per-call memo of the layout (the repair scan, the retrieval-block
filter, the result cutter, the history index) recognises them by a pointer comparison.
A checkpointer deserialises the thread on every run: the same history arrives as equal
copies, and every one of those memos would read the whole history again, once per memo.

`KnownMessages.adopt` compares the copies with the messages last seen for the thread
once, field by field in C (one comparison of the messages' field dicts), and hands back
the known objects in their place, so that the memos after it compare pointers. The
copies themselves are remembered too, by weak reference: the run's next call (after a
tool) passes the same copies again and is matched by pointers alone, and copies the run
has let go of are not kept alive (freeing them stays with the framework). A list whose
known part differs in any field of any message (an edit, a message replaced by id) is
not adopted: the caller's own objects are used, as they came.
"""

from __future__ import annotations

import operator
import threading
import weakref
from typing import TYPE_CHECKING

from langchain_contextkit._same_messages import same_contents, starts_with
from langchain_contextkit.messages import equal_copies

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence

    from langchain_core.messages import BaseMessage

__all__ = ["KnownMessages"]

_CALL = operator.call  # a weak reference's referent, or None once it is gone
_CONTENT = operator.attrgetter("content")
_Came = tuple["weakref.ref[BaseMessage]", ...]


class KnownMessages:
    """The last list of messages seen per history, to adopt equal copies of it.

    Keyed by a history's first message id (copies keep it), so threads sharing one
    assembler do not evict each other; a handful are kept. Safe to share across threads.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage

        from langchain_contextkit.agents.known_messages import KnownMessages

        known = KnownMessages()
        first = [HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")]
        known.adopt(first)
        copies = [m.model_copy() for m in first] + [HumanMessage("more", id="h2")]
        adopted = known.adopt(copies)
        assert adopted[0] is first[0] and adopted[1] is first[1]
        assert adopted[2] is copies[2]
        ```
    """

    __slots__ = ("_lock", "_recent", "size")

    def __init__(self, size: int = 8) -> None:
        """Keep the lists of up to `size` histories."""
        # Per history: the list as adopted, and the list as it came (weak references).
        self._recent: dict[Hashable, tuple[list[BaseMessage], _Came | None]] = {}
        self._lock = threading.Lock()
        self.size = size

    def adopt(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """`messages`, with its leading equal copies of the known list swapped for it.

        Equal means every field equal (content, ids, tool calls, metadata, and any extra
        field), so the list sent is the same list; only the objects are the known ones.
        """
        out = list(messages)
        if not out or not isinstance(key := out[0].id, str):
            return out  # no id: nothing names the history across copies
        with self._lock:
            known, came = self._recent.get(key, ([], None))
        n = len(known)
        if n and starts_with(out, known):
            self._remember(key, (list(out), None))  # the caller's own list, passed back
            return out
        n = len(came or ())
        if (
            came
            and n <= len(out)
            and all(map(operator.is_, out[:n], map(_CALL, came)))
            # Still equal: a content reassigned in place since, on either side, must not
            # be traded away (the request would carry the old text).
            and same_contents(out[:n], list(map(_CONTENT, known[:n])))
        ):
            raw = came + tuple(map(weakref.ref, out[n:]))  # the same copies, and new ones
        else:
            n = _adoptable(out, known)  # not the copies of the last call: compare fields
            raw = tuple(map(weakref.ref, out))
        if n:
            out[:n] = known[:n]
        self._remember(key, (list(out), raw))
        return out

    def _remember(self, key: Hashable, lists: tuple[list[BaseMessage], _Came | None]) -> None:
        with self._lock:
            self._recent.pop(key, None)
            self._recent[key] = lists  # the newest last: eviction takes the oldest
            while len(self._recent) > self.size:
                del self._recent[next(iter(self._recent))]


def _adoptable(messages: list[BaseMessage], known: list[BaseMessage]) -> int:
    """How many leading messages equal `known`'s: all of it, or none.

    The whole known list or nothing: an agent's history grows at its end, so a list
    that differs inside the known part was edited, and is read as it came.
    """
    n = len(known)
    if not n or n > len(messages):
        return 0
    # (`adopt` has found them not to be the very objects: no pointer pass again.)
    return n if equal_copies(messages[:n], known) else 0
