"""Where a compaction cuts: a frozen plan computed from the history alone.

In an agent, compaction is sized by the window (high- and low-water marks of the
history's room). A cut chosen as "keep the tail that fits the low mark" would depend on
the moment the trigger fired, so a caller that keeps no checkpointer would get a
different cut, hence a different recap and a broken prompt cache, on every call. Here
each cut is placed from the previous one alone (a grid): it advances by at most the
distance between the marks, to the last unit boundary that fits, and only once later
messages can no longer move it. Whether the k-th cut is in force depends only on how
long the history is, so the cuts are one function of the message list: the same for a
stateless caller, a checkpointed one and a process that just restarted. A cut forced by
the window (the kept turns alone would overflow it) is a grid point too.

Prefix digests name "the first n messages" by content (not by id, which a caller that
round-trips through JSON loses), so a recap is found again for the same prefix.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit.compaction.recap import (
    RECAP_ID_PREFIX,
    CompactionResult,
    RunningSummary,
    ViewParts,
    is_recap,
)
from langchain_contextkit.messages.lists import split_system, tail_start, unit_starts
from langchain_contextkit.tokens._message_cache import MESSAGE_CACHE, MessageKey, message_key
from langchain_contextkit.tokens.count import (
    REPLY_PRIMING,
    TokenCounter,
    count_message_tokens,
    message_token_costs,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = [
    "HIGH_WATER",
    "LOW_WATER",
    "RECAP_SHARE",
    "Plan",
    "Rules",
    "Start",
    "WaterMarks",
    "grid_cuts",
    "plan_compaction",
    "prefix_digests",
    "read_history",
]

HIGH_WATER = 0.92
"""Compact when the history would take more than this share of its room."""

LOW_WATER = 0.10
"""... and then down to about this share (the recap's reserve included)."""

RECAP_SHARE = 0.20
"""The recap's cap, as a share of the room (never above `max_summary_tokens`).

The recap is the only memory of every turn before the cut, so in a small window it is
worth more than the oldest verbatim turns it displaces: at a tenth of a 4,000-token
window a 40-turn benchmark kept half of its planted facts, at a fifth 98-100%
(`bench/bench_facts.py`).
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
    totals: Sequence[int],
    starts: Sequence[int],
    *,
    base: int,
    step: int,
    min_units: int,
    settled: bool = True,
) -> Iterator[int]:
    """Every grid point after `base` that later messages can no longer move, in order.

    Each point depends on the one before it alone: the last unit start within `step`
    tokens of it (a unit larger than the step still moves it by that unit). The points
    stop before the last `min_units` units, and before a point whose step reaches past
    the end of the history (a unit start yet to come could still fit it) unless not
    `settled` (a point that depends on where the history ends).
    """
    at = [totals[u] for u in starts]
    keep_from = starts[-min_units] if 0 < min_units <= len(starts) else 0
    cut = base
    while True:
        first = bisect_right(starts, cut)
        if first >= len(starts):
            return
        fitting = bisect_right(at, totals[cut] + step, lo=first) - 1
        if settled and fitting >= first and totals[cut] + step >= totals[-1]:
            return
        following = starts[max(fitting, first)]
        if following > keep_from:
            return
        yield following
        cut = following


def grid_cuts(
    totals: Sequence[int],
    starts: Sequence[int],
    *,
    base: int,
    fixed: int,
    marks: WaterMarks,
    min_units: int,
    limit: int | None = None,
    settled: bool = True,
) -> list[int]:
    """The grid's cuts in force after `base`: each while the view from the one before is over.

    Over means above the high mark, or above `limit` (the window's hard ceiling for this
    call); `fixed` is what does not move with the cut (system prefix, priming, recap).
    """

    def over(cut: int) -> bool:
        view = fixed + totals[-1] - totals[cut]
        return view > marks.high or (limit is not None and view > limit)

    cuts: list[int] = []
    if not over(base):
        return cuts
    step = max(1, marks.high - marks.low)
    points = grid_points(totals, starts, base=base, step=step, min_units=min_units, settled=settled)
    for cut in points:
        cuts.append(cut)
        if not over(cut):
            break
    return cuts


def _fingerprint(message: BaseMessage) -> bytes:
    """What a provider is sent of a message, canonically; ids left out on purpose."""
    fields = vars(message)
    content = fields["content"]
    called = b""
    if isinstance(message, AIMessage):
        calls: list[Any] = [*fields["tool_calls"], *fields["invalid_tool_calls"]]
        if calls:
            listed = [[c["name"], c["args"], c.get("id")] for c in calls]
            called = _canonical(listed).encode("utf-8", "surrogatepass")
    call_id = fields["tool_call_id"] if isinstance(message, ToolMessage) else None
    answered = call_id.encode("utf-8", "surrogatepass") if call_id else b""
    kind = fields["type"].encode("utf-8", "surrogatepass")
    if isinstance(content, str):
        body, blocks = content.encode("utf-8", "surrogatepass"), b""
    else:
        body, blocks = b"", _canonical(content).encode("utf-8", "surrogatepass")
    # Each field length-prefixed, so no two messages share a fingerprint.
    parts = (kind, body, blocks, called, answered)
    return b"".join(b"%d:%s" % (len(part), part) for part in parts)


_canonical = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False).encode


class PrefixDigests:
    """`digests[n]` names `messages[:n]` by content (`digests[0]` is the empty prefix).

    Each message's own digest is kept in the one message cache, keyed by its content; a
    prefix's digest is the hash of its messages' digests in order, computed only for the
    few prefixes a call asks for (the grid's cuts, the covered part).
    """

    __slots__ = ("_known", "_own", "_states")

    def __init__(
        self, messages: Sequence[BaseMessage], keys: Sequence[MessageKey] | None = None
    ) -> None:
        """Read (or compute and cache) each message's own digest."""
        keys = list(map(message_key, messages)) if keys is None else keys
        get = MESSAGE_CACHE.get
        own: list[bytes | None] = [get(key, _DIGEST) for key in keys]
        fresh = []
        for i, known in enumerate(own):
            if known is None:
                message = messages[i]
                own[i] = hashlib.blake2b(_fingerprint(message), digest_size=16).digest()
                if _keyed_exactly(message):
                    fresh.append((keys[i], _DIGEST, own[i]))
        if fresh:
            MESSAGE_CACHE.put_many(fresh)
        self._own = cast("list[bytes]", own)
        self._known: dict[int, str] = {0: ""}
        self._states = [(0, hashlib.blake2b(digest_size=16))]  # (n, state after n), sorted

    def __len__(self) -> int:
        """One more than the messages: the empty prefix is the first."""
        return len(self._own) + 1

    def __getitem__(self, n: int) -> str:
        """The digest of the first `n` messages (a negative `n` counts from the end)."""
        if n < 0:
            n += len(self)
        if not 0 <= n < len(self):
            raise IndexError(n)
        known = self._known.get(n)
        if known is None:
            # Go on from the nearest prefix already hashed below `n`.
            at = bisect_right(self._states, n, key=lambda item: item[0]) - 1
            start, state = self._states[at]
            state = state.copy()
            state.update(b"".join(self._own[start:n]))
            self._states.insert(at + 1, (n, state))
            known = self._known[n] = state.hexdigest()
        return known


def prefix_digests(messages: Sequence[BaseMessage]) -> list[str]:
    """Every prefix's digest (`PrefixDigests`) as a list."""
    digests = PrefixDigests(messages)
    return [digests[n] for n in range(len(digests))]


_DIGEST = "digest"
"""What a message's digest is kept as in the message cache."""


def _keyed_exactly(message: BaseMessage) -> bool:
    """Whether the message's content key tells apart every fingerprint it could have.

    The key writes arguments given as a string (or None) as the string itself (what a
    provider is sent), where the fingerprint tells ``""`` from ``None`` and ``"{}"`` from
    ``{}``: those messages' digests are computed afresh, never cached.
    """
    fields = vars(message)
    calls = [*(fields.get("tool_calls") or ()), *(fields.get("invalid_tool_calls") or ())]
    return all(isinstance(call.get("args"), dict) for call in calls)


@dataclass(frozen=True, slots=True)
class Rules:
    """What a plan depends on besides the history: the compactor's settings."""

    counter: TokenCounter
    heading: str
    keep_recent: int
    max_summary_tokens: int
    trigger_tokens: int
    target_tokens: int
    require_human_first: bool

    def recap(self, text: str, covered: int, *, as_human: bool) -> BaseMessage:
        """The recap message of `text`, covering `covered` messages."""
        content, recap_id = f"{self.heading} {text}", f"{RECAP_ID_PREFIX}{covered}"
        return (
            HumanMessage(content, id=recap_id) if as_human else SystemMessage(content, id=recap_id)
        )

    def parts(
        self,
        system: Sequence[BaseMessage],
        text: str | None,
        covered: int,
        tail: Sequence[BaseMessage],
        kept_tokens: int | None = None,
    ) -> ViewParts:
        """A view's parts: the system prefix, the recap of `text` (if any), the tail."""
        as_human = self.require_human_first and not (tail and isinstance(tail[0], HumanMessage))
        recap = None if text is None else self.recap(text, covered, as_human=as_human)
        return ViewParts(tuple(system), recap, tuple(tail), kept_tokens)

    def tokens(self, parts: ViewParts, overhead: int) -> int:
        """The view's tokens plus `overhead`, the kept tail priced from its costs when known."""
        if parts.kept_tokens is None:
            messages = parts.messages
            return count_message_tokens(messages, self.counter) + overhead if messages else overhead
        head = [*parts.system, *(() if parts.recap is None else (parts.recap,))]
        if not head and not parts.kept:
            return overhead
        counted = count_message_tokens(head, self.counter, reply_priming=False)
        return counted + parts.kept_tokens + REPLY_PRIMING + overhead

    def heading_tokens(self) -> int:
        """Tokens of the recap's heading as a message of its own (a share of the recap's room)."""
        return count_message_tokens(
            [SystemMessage(self.heading)], self.counter, reply_priming=False
        )


@dataclass(frozen=True, slots=True)
class History:
    """What a call reads of its history, once: the parts and per-message figures."""

    system: tuple[BaseMessage, ...]
    rest: tuple[BaseMessage, ...]
    found: str | None
    """The text of a recap inside the list (a compacted list fed back), if any."""
    costs: tuple[int, ...]
    totals: tuple[int, ...]
    starts: tuple[int, ...]
    digests: PrefixDigests | None
    """Prefix digests of `rest`; None when a recap inside the list stands for its start."""


def read_history(history: Sequence[BaseMessage], rules: Rules, *, digests: bool) -> History:
    """Split `history` into its parts and price it (digests only when asked for)."""
    system, rest = split_system(history)
    found: str | None = None
    kept = []
    for message in system:
        if is_recap(message):
            found = message.text.removeprefix(f"{rules.heading} ")
        else:
            kept.append(message)
    if rest and is_recap(rest[0]):
        found, rest = rest[0].text.removeprefix(f"{rules.heading} "), rest[1:]
    keys = list(map(message_key, rest))
    costs = message_token_costs(rest, rules.counter, keys=keys)
    return History(
        tuple(kept),
        tuple(rest),
        found,
        tuple(costs),
        (0, *accumulate(costs)),
        tuple(unit_starts(rest)),
        PrefixDigests(rest, keys) if digests and found is None else None,
    )


@dataclass(frozen=True, slots=True)
class Start:
    """The recap in force when a call begins, and what it covers."""

    text: str | None = None
    covered: int = 0
    floor: str | None = None
    summary: RunningSummary | None = None
    """The caller's running summary, when it is the one in force."""


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything decided before a summariser runs (never changed once made)."""

    system: tuple[BaseMessage, ...]
    pending: tuple[BaseMessage, ...]
    """The messages after the system prefix that the recap in force does not cover."""
    start: Start
    view: ViewParts
    """The view before this compaction, as the model saw it."""
    tokens_before: int
    overhead: int
    cap: int
    cuts: tuple[int, ...]
    """Where each epoch ends in `pending` (the last is the cut); at least one."""
    digests: tuple[str | None, ...]
    """The prefix digest of each cut (None: not known)."""
    costs: tuple[int, ...] | None = None
    """`pending`'s costs, when the history was priced (sized plans)."""
    folded: int = 0
    """A bounded cold start: `pending[:folded]` is read once, extractively."""

    @property
    def cut(self) -> int:
        """How many of `pending` age out."""
        return self.cuts[-1]

    @property
    def digest(self) -> str | None:
        """The digest of everything the new recap covers."""
        return self.digests[-1]

    @property
    def covered(self) -> int:
        """Messages the recap in force covers."""
        return self.start.covered

    @property
    def current(self) -> RunningSummary | None:
        """The running summary in force before this call."""
        start = self.start
        if start.text is None:
            return None
        return start.summary or RunningSummary(start.text, start.covered, None, None, start.floor)

    def epochs(self) -> list[tuple[int, int, str | None]]:
        """`(start, end, digest)` of each epoch; the folded ones (a cold start) as one."""
        epochs = list(zip((0, *self.cuts[:-1]), self.cuts, self.digests, strict=True))
        if self.folded:
            inside = [epoch for epoch in epochs if epoch[1] <= self.folded]
            epochs = [(0, inside[-1][1], inside[-1][2]), *epochs[len(inside) :]]
        return epochs


def summary_in_force(read: History, summary: RunningSummary | None, *, sized: bool) -> Start:
    """The recap in force: the one inside the list, else the caller's summary when it fits.

    A recap inside the list of a standalone call carries the caller's summary on.
    """
    if read.found is not None:
        if sized or summary is None:
            return Start(read.found)
        return Start(read.found, 0, summary.floor, summary)
    if summary is None:
        return Start()
    rest, covered, digests = read.rest, summary.covered, read.digests
    if covered > len(rest):
        fits = False
    elif summary.digest is not None and digests is not None:
        fits = digests[covered] == summary.digest
    else:
        fits = covered == 0 or summary.last_id is None or rest[covered - 1].id == summary.last_id
    if fits:
        return Start(summary.text, covered, summary.floor, summary)
    import logging  # noqa: PLC0415 - only on this rare path

    logging.getLogger(__name__).warning(
        "running summary (covering %d messages) does not match this history; ignoring it",
        covered,
    )
    return Start()


def plan_compaction(  # noqa: C901 - the seed's rule and the grid's, side by side
    read: History,
    start: Start,
    rules: Rules,
    *,
    overhead: int,
    ceiling: int | None,
    marks: WaterMarks | None,
) -> Plan | CompactionResult:
    """The plan of one call: what ages out under which cap, or the view as it is.

    `marks` sizes a compaction by the window (grid cuts); None keeps the seed's rule
    (above `trigger_tokens`, keep what fits `target_tokens`).
    """
    base, rest, costs = start.covered, read.rest, read.costs
    pending = rest[base:]
    kept_tokens = read.totals[-1] - read.totals[base]
    parts = rules.parts(read.system, start.text, base, pending, kept_tokens)
    before = rules.tokens(parts, overhead)
    if start.text is not None and start.summary is None and read.digests is not None:
        last = rest[base - 1].id if base else None
        summary = RunningSummary(
            start.text,
            base,
            last if isinstance(last, str) else None,
            read.digests[base],
            start.floor,
        )
        start = Start(start.text, base, start.floor, summary)
    system_tokens = count_message_tokens(read.system, rules.counter) if read.system else 0
    if marks is None:
        units = len(unit_starts(pending))
        over = ceiling is not None and before > ceiling
        if not over and (before <= rules.trigger_tokens or units <= rules.keep_recent):
            return _as_is(parts, start, before)
        fixed = system_tokens + overhead + (0 if read.system else REPLY_PRIMING)
        fixed += rules.max_summary_tokens + rules.heading_tokens()
        target = rules.target_tokens if ceiling is None else min(rules.target_tokens, ceiling)
        own = costs[base:]
        cut = tail_start(pending, target - fixed, costs=own, min_units=rules.keep_recent)
        if ceiling is not None and fixed + sum(own[cut:]) > ceiling:
            cut = tail_start(pending, ceiling - fixed, costs=own, min_units=1)
        if cut == 0:
            return _as_is(parts, start, before)
        cap, cuts = rules.max_summary_tokens, [base + cut]
        digests: list[str | None] = [None]
    else:
        fixed = (system_tokens if read.system else REPLY_PRIMING) + marks.recap
        fixed += rules.heading_tokens()
        limit = None if ceiling is None else ceiling - overhead
        totals, starts = read.totals, read.starts

        def walk(start: int, min_units: int, *, settled: bool = True) -> list[int]:
            return grid_cuts(
                totals,
                starts,
                base=start,
                fixed=fixed,
                marks=marks,
                min_units=min_units,
                limit=limit,
                settled=settled,
            )

        cuts = walk(base, rules.keep_recent)
        if limit is not None:
            # The window wins over keep_recent, still on the grid (a restart cuts the same).
            for settled in (True, False):
                end = cuts[-1] if cuts else base
                if fixed + totals[-1] - totals[end] > limit:
                    # Not settled: a point that depends on the history's end, which a
                    # restart cannot replay (the agent's turn should shrink first).
                    cuts += walk(end, 1, settled=settled)
        if not cuts:
            return _as_is(parts, start, before)
        cap = marks.recap
        known = read.digests
        digests = [None if known is None else known[c] for c in cuts]
    return Plan(
        read.system,
        pending,
        start,
        parts,
        before,
        overhead,
        cap,
        tuple(c - base for c in cuts),
        tuple(digests),
        costs[base:],
    )


def _as_is(parts: ViewParts, start: Start, tokens: int) -> CompactionResult:
    """The view unchanged: no summary was made in this call."""
    current = None
    if start.text is not None:
        current = start.summary or RunningSummary(
            start.text, start.covered, None, None, start.floor
        )
    return CompactionResult(
        parts.messages,
        current,
        compacted=False,
        summarizer=None,
        tokens_before=tokens,
        tokens_after=tokens,
        parts=parts,
    )
