"""Per-message arrays of a history, extended with what is new instead of rebuilt.

The window-sized compactor needs, on every call, each message's token cost, their running
totals, the unit starts (where a cut may fall) and a content digest of every prefix. An
agent's history only grows between calls. A caller that passes back the list it was
given hands over the very same message objects again; a checkpointer hands over equal
copies. So the arrays of the last history seen are kept, and a call whose history starts
with those messages only extends them by its new ones: a call costs what changed, not
the history.

A prefix is reused when its messages are the same objects with the same content objects
(a C-level identity check), or, failing that, when every sent field of every message
equals the snapshot taken when it was indexed (a checkpointer's copies). A message
replaced by id or edited (its content or tool calls reassigned) rebuilds the arrays from
the per-message memos, which give the same figures more slowly. A `tool_calls` list
reassigned on a message that keeps its object and content is the one edit the identity
check does not see.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
import threading
from dataclasses import dataclass, field
from itertools import accumulate, islice
from typing import TYPE_CHECKING

from langchain_core.messages import ToolMessage

from langchain_contextkit._count_memo import sent_fields
from langchain_contextkit.compaction._recap_grid import chain_digests
from langchain_contextkit.tokens import message_token_costs

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.tokens import TokenCounter

_CONTENT = operator.attrgetter("content")


@dataclass(frozen=True)
class HistoryArrays:
    """What the compactor reads of a history, one entry per message (or per prefix).

    Never changed once built: a longer history gets new lists (copying a few thousand
    pointers costs microseconds), so a caller may keep reading these while another thread
    extends the history.
    """

    messages: tuple[BaseMessage, ...] = ()
    contents: tuple[object, ...] = ()
    sent: tuple[tuple[object, ...], ...] = ()  # each message's sent fields when indexed
    costs: tuple[int, ...] = ()
    totals: tuple[int, ...] = (0,)  # totals[n] = sum(costs[:n])
    starts: tuple[int, ...] = ()  # unit starts
    unit_totals: tuple[int, ...] = ()  # totals at each unit start
    digests: tuple[str, ...] = ("",)  # digests[n] names messages[:n] by content
    state: hashlib.blake2b = field(default_factory=lambda: hashlib.blake2b(digest_size=16))

    def cost(self, start: int, end: int | None = None) -> int:
        """Tokens of `messages[start:end]`, without reply priming."""
        return self.totals[len(self.costs) if end is None else end] - self.totals[start]

    def extended(self, new: Sequence[BaseMessage], counter: TokenCounter) -> HistoryArrays:
        """These arrays with `new` appended to the history."""
        if not new:
            return self
        offset = len(self.messages)
        costs = message_token_costs(new, counter)
        state = self.state.copy()
        digests = chain_digests(state, new)
        totals = (*self.totals, *islice(accumulate(costs, initial=self.totals[-1]), 1, None))
        # A tool message never starts a unit (`unit_starts`): a cut never orphans a result.
        starts = [
            offset + i
            for i, m in enumerate(new)
            if not isinstance(m, ToolMessage) or offset + i == 0
        ]
        return HistoryArrays(
            messages=(*self.messages, *new),
            contents=(*self.contents, *map(_CONTENT, new)),
            sent=(*self.sent, *map(sent_fields, new)),
            costs=(*self.costs, *costs),
            totals=totals,
            starts=(*self.starts, *starts),
            unit_totals=(*self.unit_totals, *(totals[u] for u in starts)),
            digests=(*self.digests, *digests),
            state=state,
        )


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
        self._last = threading.local()  # each thread's latest arrays, for `suffix_cost`
        self.size = size

    @property
    def counter(self) -> TokenCounter:
        """The counter the costs are in."""
        return self._counter

    def suffix_cost(self, messages: Sequence[BaseMessage]) -> int | None:
        """Tokens of `messages` when they end the history this thread indexed last.

        A compacted view keeps a suffix of its history: its cost is then a difference of
        two running totals instead of a pass over it. None when it is not such a suffix.
        """
        arrays: HistoryArrays | None = getattr(self._last, "arrays", None)
        n = len(messages)
        if arrays is None or n > len(arrays.messages):
            return None
        if n == 0:
            return 0
        start = len(arrays.messages) - n
        tail = arrays.messages[start:]
        same = all(map(operator.is_, messages, tail)) and all(
            map(operator.is_, map(_CONTENT, messages), arrays.contents[start:])
        )
        return arrays.cost(start) if same else None

    def arrays(self, history: Sequence[BaseMessage]) -> HistoryArrays:
        """The arrays of `history` (a list of messages without the system prefix)."""
        key = _key(history)
        known = self._recent.get(key)
        base = _prefix_of(history, known) if known is not None else HistoryArrays()
        arrays = base.extended(history[len(base.messages) :], self._counter)
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

    The same objects are checked by identity alone (C speed). Equal copies (a
    checkpointer deserialises the thread for every run) are checked field by field,
    every sent field compared, and the arrays are then kept for the new objects.
    """
    n = len(known.messages)
    if len(history) < n:
        return HistoryArrays()
    head = history[:n]
    if all(map(operator.is_, head, known.messages)) and all(
        map(operator.is_, map(_CONTENT, head), known.contents)
    ):
        return known
    if tuple(map(sent_fields, head)) == known.sent:
        return dataclasses.replace(known, messages=tuple(head), contents=tuple(map(_CONTENT, head)))
    return HistoryArrays()
