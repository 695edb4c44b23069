"""Per-message arrays of a history, extended with what is new instead of rebuilt.

The window-sized compactor needs, on every call, each message's token cost, their running
totals, the unit starts (where a cut may fall) and a content digest of every prefix. An
agent's history only grows between calls. A caller that passes back the list it was
given hands over the very same message objects again; a checkpointer hands over equal
copies. So the arrays of the last history seen are kept, and a call whose history starts
with those messages only extends them by its new ones: a call costs what changed, not
the history.

A prefix is reused when the known messages still hold the content objects they were
indexed with, and the history starts with those very objects (a C-level identity check)
or with equal copies (a checkpointer's: every field compared with the known message's in
C, `equal_copies`). A message replaced by id or edited (its content reassigned)
rebuilds the arrays from the per-message memos, which give the same figures more slowly.
Inside an assembler's call the contents were already read once for the call by its
`ContentWitness`: arrays built during an earlier call of the same vouched lineage skip
that read (it touches every message object, most of a long history's steady cost).
A `tool_calls` list reassigned on a message that keeps its object and content is the one
edit these checks do not see.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import operator
import threading
from array import array
from dataclasses import dataclass, field
from itertools import accumulate, islice
from typing import TYPE_CHECKING

from langchain_core.messages import ToolMessage

from langchain_contextkit._content_witness import Lineage, vouched
from langchain_contextkit._same_messages import same_contents, same_messages
from langchain_contextkit.compaction._recap_grid import chain_digests
from langchain_contextkit.messages import CleanScan, equal_copies, resume_scan
from langchain_contextkit.tokens import message_token_costs

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.tokens import TokenCounter

_CONTENT = operator.attrgetter("content")
_CLEAN = CleanScan()


@dataclass(frozen=True, eq=False)
class HistoryArrays:
    """What the compactor reads of a history, one entry per message (or per prefix).

    Never changed once built (the number arrays are never written after): a longer history
    gets new ones (copying a few thousand pointers costs microseconds), so a caller may
    keep reading these while another thread extends the history. Compared by identity.
    """

    messages: tuple[BaseMessage, ...] = ()
    contents: tuple[object, ...] = ()
    # Numbers in machine arrays: a longer history's copy is one memcpy, where a tuple of
    # ints touched every int object (most of the arrays' steady cost on a long history).
    costs: array[int] = field(default_factory=lambda: array("q"))
    totals: array[int] = field(default_factory=lambda: array("q", (0,)))  # sum(costs[:n])
    starts: array[int] = field(default_factory=lambda: array("q"))  # unit starts
    unit_totals: array[int] = field(default_factory=lambda: array("q"))  # totals at starts
    digests: tuple[str, ...] = ("",)  # digests[n] names messages[:n] by content
    scan: CleanScan | None = _CLEAN  # the rules' state at the end; None: a problem
    state: hashlib.blake2b = field(default_factory=lambda: hashlib.blake2b(digest_size=16))
    lineage: Lineage | None = field(default=None, compare=False)
    """The lineage vouched for when these were built (`_content_witness`): while it still
    is, the contents need not be read again."""

    def cost(self, start: int, end: int | None = None) -> int:
        """Tokens of `messages[start:end]`, without reply priming."""
        return self.totals[len(self.costs) if end is None else end] - self.totals[start]

    def extended(self, history: Sequence[BaseMessage], counter: TokenCounter) -> HistoryArrays:
        """The arrays of `history`, which starts with these arrays' messages.

        They then hold `history`'s own objects: its head may be equal copies of the
        messages indexed (`same_messages`), and a later `suffix` compares pointers.
        """
        offset = len(self.messages)
        new = history[offset:]
        if not new:  # (a new tuple of pointers costs less than proving the old one's)
            if not offset:
                return self
            return dataclasses.replace(self, messages=tuple(history), lineage=vouched())
        # The arrays keep what was derived: no entry per message in the object memo.
        costs = message_token_costs(new, counter, by_object=False)
        state = self.state.copy()
        digests = chain_digests(state, new, by_object=False)
        totals = self.totals + array(
            "q", islice(accumulate(costs, initial=self.totals[-1]), 1, None)
        )
        # A tool message never starts a unit (`unit_starts`): a cut never orphans a result.
        starts = [
            offset + i
            for i, m in enumerate(new)
            if not isinstance(m, ToolMessage) or offset + i == 0
        ]
        return HistoryArrays(
            messages=tuple(history),
            contents=(*self.contents, *map(_CONTENT, new)),
            costs=self.costs + array("q", costs),
            totals=totals,
            starts=self.starts + array("q", starts),
            unit_totals=self.unit_totals + array("q", [totals[u] for u in starts]),
            digests=(*self.digests, *digests),
            scan=None if self.scan is None else resume_scan(self.scan, new),
            lineage=vouched(),
            state=state,
        )

    def clean_from(self, start: int) -> CleanScan | None:
        """The rules' state at the end of `messages[start:]`, when it is known clean.

        A history clean from its first message is clean from any unit start (the scan
        is then between units, with nothing open), and ends in the same state.
        """
        if self.scan is None or start >= len(self.messages):
            return None
        at = bisect.bisect_left(self.starts, start)
        return self.scan if at < len(self.starts) and self.starts[at] == start else None


class HistoryIndex:
    """The arrays of the last few histories seen, each extended when it grows.

    Keyed by the identity of a history's first message, so threads and conversations that
    share one compactor do not evict each other's arrays; a handful are kept.
    """

    __slots__ = ("_counter", "_last", "_lock", "_recent", "size")

    def __init__(self, counter: TokenCounter, size: int = 8) -> None:
        """Keep the arrays of up to `size` histories, counted with `counter`."""
        self._counter = counter
        self._recent: dict[Hashable, HistoryArrays] = {}
        self._lock = threading.Lock()
        self._last = threading.local()  # each thread's latest arrays, for `suffix`
        self.size = size

    @property
    def counter(self) -> TokenCounter:
        """The counter the costs are in."""
        return self._counter

    def suffix(self, messages: Sequence[BaseMessage]) -> tuple[HistoryArrays, int] | None:
        """The arrays this thread indexed last and where `messages` starts in them.

        A compacted view keeps a suffix of its history: what is known of it (its cost, a
        difference of two running totals; whether it is clean) is then read, not
        recomputed. None when `messages` is not such a suffix (the same objects).
        """
        arrays: HistoryArrays | None = getattr(self._last, "arrays", None)
        n = len(messages)
        if arrays is None or n > len(arrays.messages):
            return None
        start = len(arrays.messages) - n
        # Pointers only: the arrays were checked against these objects' contents when
        # this thread's call indexed them, a moment before its layout asks.
        same = same_messages(messages, arrays.messages[start:])
        return (arrays, start) if same else None

    def arrays(self, history: Sequence[BaseMessage]) -> HistoryArrays:
        """The arrays of `history` (a list of messages without the system prefix)."""
        key = _key(history)
        known = self._recent.get(key)
        base = _prefix_of(history, known) if known is not None else HistoryArrays()
        arrays = base.extended(history, self._counter)
        self._last.arrays = arrays
        with self._lock:
            self._recent.pop(key, None)
            self._recent[key] = arrays  # the newest last: eviction takes the oldest
            while len(self._recent) > self.size:
                del self._recent[next(iter(self._recent))]
        return arrays


def _key(history: Sequence[BaseMessage]) -> Hashable:
    """A history's name: its first message's id (copies keep it), else the object's."""
    if not history:
        return 0
    first = history[0]
    return first.id if isinstance(first.id, str) else id(first)


def _prefix_of(history: Sequence[BaseMessage], known: HistoryArrays) -> HistoryArrays:
    """`known` when `history` starts with its messages, else empty arrays.

    The known messages must still hold the content objects they were indexed with (a
    reassigned content is an edit). Then the same objects are checked by identity
    alone; equal copies (a checkpointer deserialises the thread for every run) by
    comparing each copy's fields with the known message's, all of them and in C
    (`equal_copies`), and the arrays are then kept for the new objects.
    """
    n = len(known.messages)
    if len(history) < n:
        return HistoryArrays()
    # Contents read this call by the lineage's witness need no second read here.
    vouched_for = known.lineage is not None and known.lineage is vouched()
    if not vouched_for and not same_contents(known.messages, known.contents):
        return HistoryArrays()
    head = history[:n]
    if same_messages(head, known.messages):
        return known
    if equal_copies(head, known.messages):
        return dataclasses.replace(known, messages=tuple(head), contents=tuple(map(_CONTENT, head)))
    return HistoryArrays()
