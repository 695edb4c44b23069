"""Where a window-sized compaction cuts: a grid fixed by the history alone.

In an agent, compaction is sized by the window (high- and low-water marks of the history's
room). A cut chosen as "keep the tail that fits the low mark" depends on the moment the
trigger fired, so a caller that keeps no checkpointer (and re-sends the whole list) would
get a different cut, hence a different recap and a broken prompt cache, on every call.

Here each cut is placed from the previous one alone: it advances by at most the distance
between the marks, to the last unit boundary that fits. Whether the k-th cut is in force
only depends on how long the history is, so the cuts (and with a deterministic summariser
the recaps) are one function of the message list: the same for a stateless caller as for
one whose checkpointer kept the running summary, and byte-stable between two cuts.

Prefix digests name "the first n messages" by content (not by id, which a caller that
round-trips through JSON loses), so a recap can be found again for the same prefix.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, ToolMessage

from langchain_contextkit._count_memo import SEEN_MESSAGES

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from langchain_core.messages import BaseMessage

__all__ = [
    "HIGH_WATER",
    "LOW_WATER",
    "RECAP_SHARE",
    "WaterMarks",
    "chain_digests",
    "grid_cuts",
    "grid_points",
    "message_digest",
    "prefix_digests",
]

HIGH_WATER = 0.92
"""Compact when the history would take more than this share of its room."""

LOW_WATER = 0.10
"""... and then down to about this share (the recap's reserve included)."""

RECAP_SHARE = 0.20
"""The recap's cap, as a share of the room (never above `max_summary_tokens`).

The recap is the only memory of every turn before the cut, so in a small window it is
worth more than the oldest verbatim turns it displaces. At a tenth of a 4,000-token
window (about 340 tokens) it held some 20 one-line facts and a 40-turn benchmark kept
half of its planted facts (`bench/bench_facts.py`); at a fifth, 98-100%. From a room of
5,000 tokens up, `max_summary_tokens` (1,000 by default) is the cap.
"""


@dataclass(frozen=True, slots=True)
class WaterMarks:
    """The marks of one history room, in tokens of the history's view."""

    high: int
    """Compaction fires when the view (recap at its cap, older turns) is above this."""

    low: int
    """A compaction brings the view down to about this."""

    recap: int
    """The recap's cap; reserved in full when the trigger is checked."""

    @classmethod
    def for_room(cls, room: int, *, max_summary_tokens: int) -> WaterMarks:
        """The default marks of a room of `room` tokens."""
        recap = max(1, min(max_summary_tokens, int(room * RECAP_SHARE)))
        high = max(1, int(room * HIGH_WATER))
        low = min(high - 1, max(recap, int(room * LOW_WATER)))
        return cls(high=high, low=max(0, low), recap=recap)


def grid_points(
    costs: Sequence[int],
    starts: Sequence[int],
    *,
    base: int,
    marks: WaterMarks,
    min_units: int,
    settled: bool = True,
    totals: Sequence[int] | None = None,
    unit_totals: Sequence[int] | None = None,
) -> Iterator[int]:
    """Every place the grid may cut after `base`, in order (whether in force or not).

    Each point depends on the one before it alone: it advances by at most the distance
    between the marks, to the last unit start that fits, and a unit larger than that
    still moves it by that one unit. The points stop before the last `min_units` units,
    and (when `settled`) before a point that later messages could still move: one whose
    step reaches past the end of the history. `totals` (running sums of `costs`, from 0)
    and `unit_totals` (the totals at each unit start) may be passed when already known.
    """
    prefix = [0, *accumulate(costs)] if totals is None else totals
    # tokens before each unit start (non-decreasing)
    at = [prefix[u] for u in starts] if unit_totals is None else unit_totals
    if min_units <= 0:
        keep_from = len(costs)
    else:
        keep_from = starts[-min_units] if min_units <= len(starts) else 0
    step = max(1, marks.high - marks.low)
    cut = base
    while True:
        first = bisect_right(starts, cut)
        if first >= len(starts):
            return
        fitting = bisect_right(at, prefix[cut] + step, lo=first) - 1
        if settled and fitting >= first and prefix[cut] + step >= prefix[-1]:
            return  # a unit start yet to come could still fit the step
        following = starts[max(fitting, first)]
        if following > keep_from:
            # It would take the last `min_units` units: wait until the history has grown
            # past it, rather than cut short at a point that depends on the history's end.
            return
        yield following
        cut = following


def grid_cuts(
    costs: Sequence[int],
    starts: Sequence[int],
    *,
    base: int,
    fixed: int,
    marks: WaterMarks,
    min_units: int,
    limit: int | None = None,
    settled: bool = True,
    totals: Sequence[int] | None = None,
    unit_totals: Sequence[int] | None = None,
) -> list[int]:
    """The grid's cuts in force after `base` for a history of `len(costs)` messages.

    A cut is in force once the view from the cut before it is over the high mark (or
    over `limit`); it only depends on how long the history is, never on when a call saw it.

    Args:
        costs: Tokens of each message (after the system prefix and any recap).
        starts: Unit starts of those messages (`unit_starts`).
        base: Messages already covered by the summary in force.
        fixed: Tokens of the view that do not move with the cut (system prefix, reply
            priming, the recap at its cap).
        marks: The high and low marks.
        min_units: Units the tail always keeps (a cut never passes them).
        limit: The view must also stay within this (a hard ceiling for this call, for
            forced cuts); None for the marks alone.
        settled: Only cuts that later messages cannot move (see `grid_points`); False
            when this call must fit whatever the grid's future.
        totals: Running sums of `costs` from 0, when known (`HistoryArrays.totals`).
        unit_totals: `totals` at each of `starts`, when known.

    Returns:
        Increasing message indices, each a unit start after `base` (empty: nothing to do).
    """
    prefix = [0, *accumulate(costs)] if totals is None else totals
    total = prefix[-1]

    def over(cut: int) -> bool:
        view = fixed + total - prefix[cut]
        return view > marks.high or (limit is not None and view > limit)

    cuts: list[int] = []
    if not over(base):
        return cuts
    points = grid_points(
        costs,
        starts,
        base=base,
        marks=marks,
        min_units=min_units,
        settled=settled,
        totals=prefix,
        unit_totals=unit_totals,
    )
    for cut in points:
        cuts.append(cut)
        if not over(cut):
            break
    return cuts


def _fingerprint(message: BaseMessage) -> bytes:
    """What a provider is sent of a message, canonically; ids left out on purpose."""
    # pydantic keeps the fields in the instance dict: one read of it for every field.
    fields = vars(message)
    content = fields["content"]
    called = b""
    if isinstance(message, AIMessage):
        # Invalid calls are sent too (`_message_rules`); a message without any keeps the
        # fingerprint it always had.
        calls: list[Any] = [*fields["tool_calls"], *fields["invalid_tool_calls"]]
        if calls:
            listed = [[c["name"], c["args"], c.get("id")] for c in calls]
            called = _canonical(listed).encode("utf-8", "surrogatepass")
    call_id = fields["tool_call_id"] if isinstance(message, ToolMessage) else None
    answered = call_id.encode("utf-8", "surrogatepass") if call_id else b""
    # Each field length-prefixed, so no two messages share a fingerprint. Text content,
    # the bulk of a history, is taken as it is: JSON-escaping it was most of the cost.
    kind = fields["type"].encode("utf-8", "surrogatepass")
    if isinstance(content, str):
        body, blocks = content.encode("utf-8", "surrogatepass"), b""
    else:
        body, blocks = b"", _canonical(content).encode("utf-8", "surrogatepass")
    # One formatting of the five fields: a cold history's digests are mostly this.
    return b"%d:%s%d:%s%d:%s%d:%s%d:%s" % (
        len(kind),
        kind,
        len(body),
        body,
        len(blocks),
        blocks,
        len(called),
        called,
        len(answered),
        answered,
    )


# The encoder `json.dumps(sort_keys=True, default=str, ensure_ascii=False)` builds on
# every call, built once (it keeps no state between calls).
_canonical = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False).encode


def prefix_digests(messages: Sequence[BaseMessage]) -> list[str]:
    """`digests[n]` names `messages[:n]` by content (`digests[0]` is the empty prefix)."""
    return ["", *chain_digests(hashlib.blake2b(digest_size=16), messages)]


def chain_digests(
    state: hashlib.blake2b, messages: Sequence[BaseMessage], *, by_object: bool = True
) -> list[str]:
    """The digests of the prefixes that end at each of `messages`, extending `state`.

    `state` holds everything before them (updated in place), so a history that grows
    extends its digests instead of hashing itself again. `by_object=False` neither
    reads nor fills the memo by message object (for a caller that keeps the digests).
    """
    update, copy = state.update, state.copy  # (bound once: this runs per message)
    digest = message_digest if by_object else _digest
    digests = []
    for message in messages:
        update(digest(message))
        digests.append(copy().hexdigest())
    return digests


def message_digest(message: BaseMessage) -> bytes:
    """The digest of one message's content, as `prefix_digests` chains them."""
    # The same objects come back on every call: their digest is remembered, not redone.
    digest: bytes | None = SEEN_MESSAGES.get(message, _DIGEST)
    if digest is None:
        digest = _digest(message)
        SEEN_MESSAGES.put(message, _DIGEST, digest)
    return digest


def _digest(message: BaseMessage) -> bytes:
    return hashlib.blake2b(_fingerprint(message), digest_size=16).digest()


_DIGEST = "prefix digest"
