"""One read of a history's contents per call, shared by the memos that must see edits.

A message whose content is reassigned in place (``message.content = ...``) keeps its
object, so a memo that recognises a history by pointers must also read every known
message's content to see the edit. The history index and the result cutter each did:
two passes over every message of the history on every call, each touching every message
object, which on a long history is most of what a steady call costs.

A `ContentWitness` reads them once per call instead. For each history (named by its first
message's id) it keeps the list it read last and those contents, and each call it compares
them again, then appends what is new. While the contents are unchanged and each call's
list extends the last one, the history keeps one `Lineage`; an edit, or a list that does
not extend the last, starts a new one. During a call the witness *vouches* for its
lineage (`vouching`): a memo that stored its state during an earlier call of the same
lineage knows its messages' contents are unchanged without reading them, because each call
of the lineage compared every content since. A memo used outside a vouched call (a
compactor called directly) reads the contents itself, as before.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_contextkit._same_messages import same_contents, starts_with

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterator, Sequence

    from langchain_core.messages import BaseMessage

__all__ = ["ContentWitness", "Lineage", "vouched", "vouching"]

_CONTENT = operator.attrgetter("content")


class Lineage:
    """A run of calls over one history whose known contents were never changed.

    Opaque: compared by identity only. A memo stores the lineage vouched for when it
    stored its state (`vouched()`), and may skip reading contents while the same lineage
    is vouched for.
    """

    __slots__ = ()


_VOUCHED: ContextVar[Lineage | None] = ContextVar("contextkit_vouched_lineage", default=None)


def vouched() -> Lineage | None:
    """The lineage the running call's witness vouches for; None outside such a call."""
    return _VOUCHED.get()


@contextlib.contextmanager
def vouching(lineage: Lineage) -> Iterator[None]:
    """Vouch for `lineage` while the block runs (the memos it calls may then trust it)."""
    token = _VOUCHED.set(lineage)
    try:
        yield
    finally:
        _VOUCHED.reset(token)


@dataclass(slots=True)
class _Chain:
    messages: list[BaseMessage]  # our own copy, grown in place
    contents: list[object]  # each message's content object when last read
    lineage: Lineage


class ContentWitness:
    """Reads each history's message contents once per call, for every memo of the call.

    Safe to share across threads: a history's chain is read and grown under a lock.

    Example:
        ```python
        from langchain_core.messages import HumanMessage

        from langchain_contextkit._content_witness import ContentWitness

        witness = ContentWitness()
        history = [HumanMessage("hi", id="h1")]
        first = witness.read(history)
        history.append(HumanMessage("more", id="h2"))
        assert witness.read(history) is first  # the list grew: the same lineage
        history[0].content = "edited"
        assert witness.read(history) is not first  # an edit in place: a new lineage
        ```
    """

    __slots__ = ("_chains", "_lock", "size")

    def __init__(self, size: int = 8) -> None:
        """Keep the chains of up to `size` histories."""
        self._chains: dict[Hashable, _Chain] = {}
        self._lock = threading.Lock()
        self.size = size

    def read(self, messages: Sequence[BaseMessage]) -> Lineage:
        """Read `messages`' contents; the lineage they continue, or a new one."""
        if not messages:
            return Lineage()
        first = messages[0]
        key = first.id if isinstance(first.id, str) else ("object", id(first))
        with self._lock:
            chain = self._chains.pop(key, None)
            if (
                chain is not None
                and starts_with(messages, chain.messages)
                # The one pass over every known message: any content reassigned since.
                and same_contents(chain.messages, chain.contents)
            ):
                new = messages[len(chain.messages) :]
                chain.messages.extend(new)
                chain.contents.extend(map(_CONTENT, new))
            else:
                chain = _Chain(list(messages), list(map(_CONTENT, messages)), Lineage())
            self._chains[key] = chain  # the newest last: eviction takes the oldest
            while len(self._chains) > self.size:
                del self._chains[next(iter(self._chains))]
            return chain.lineage
