"""History compaction: summarise old turns into a recap, keep recent turns verbatim.

`HistoryCompactor` is the contract of seed 002 ("压缩对话历史") plus what long-running
agents need: the recent tail is cut only between whole units (a tool call never loses its
results), a leading system prompt stays first, the summary is extended incrementally
(`RunningSummary`) instead of re-reading old turns, and a failing or empty summary never
costs history: the deterministic `ExtractiveSummarizer` steps in, and when nothing can be
summarised the history comes back unchanged.

One call is a generator (`HistoryCompactor._steps`): it plans (`_plan.plan_compaction`,
a pure function), yields what it needs (a recap store read, summariser requests, a
store write) and returns the result. `compact_view` and `acompact_view` are its two
drivers; the sync one starts no event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.store.memory import InMemoryStore

from langchain_contextkit.compaction._chunked_summary import fitted_requests, stated_cap
from langchain_contextkit.compaction._plan import (
    History,
    Plan,
    Rules,
    Start,
    WaterMarks,
    plan_compaction,
    read_history,
    summary_in_force,
)
from langchain_contextkit.compaction._recap_fit import held_recap
from langchain_contextkit.compaction.recap import (
    RECAP_ID_PREFIX,
    AViewSummarize,
    CompactionResult,
    RunningSummary,
    SummarizerKind,
    ViewSummarize,
)
from langchain_contextkit.compaction.recap_store import (
    RecapStore,
    SharedRecap,
    recap_key,
    settings_tag,
)
from langchain_contextkit.compaction.summarizers import (
    ASummarize,
    ExtractiveSummarizer,
    Summarize,
    check_fidelity,
    compose_extension,
    reduce_recap,
    render_transcript,
    structured_recap,
    summarizer_from_llm,
)
from langchain_contextkit.errors import (
    ConfigError,
    ContextWindowExceeded,
    check_count,
    from_known_fields,
)
from langchain_contextkit.messages.lists import find_message_problems
from langchain_contextkit.prompts import Fidelity, PromptRegistry
from langchain_contextkit.tokens.count import TokenCounter, count_tokens, model_limits

if TYPE_CHECKING:
    from collections.abc import Generator, Mapping, Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

    from langchain_contextkit.compaction._chunked_summary import Requests

__all__ = [
    "DEFAULT_TRIGGER_TOKENS",
    "RECAP_ID_PREFIX",
    "AViewSummarize",
    "CompactionConfig",
    "CompactionResult",
    "HistoryCompactor",
    "RunningSummary",
    "ViewSummarize",
]


logger = logging.getLogger(__name__)

DEFAULT_COLD_START_CALLS = 2
"""Summariser calls a compaction that finds no recap in force may make."""

_MAX_CONCURRENCY = 4
"""Summariser requests in flight at once (async): enough to overlap, few for rate limits."""

_MAX_SCALE = 1e6
_UNCAPPED = 10**9
"""A cap no reply reaches: `structured_recap` reads a reply; `held_recap` then holds it."""


# -- what a call's steps ask of its driver ----------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lookup:
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Save:
    entries: tuple[tuple[str, SharedRecap], ...]


@dataclass(frozen=True, slots=True)
class _Ask:
    """Summariser requests: `(text, instruction)` pairs, or one view to summarise in place."""

    batch: tuple[tuple[str, str], ...] = ()
    view: list[BaseMessage] | None = None
    instruction: str = ""


_Op = _Lookup | _Save | _Ask
_Fresh = list[tuple[str, str, str | None]]  # (digest, recap, floor) made by this call


class _OverBoundError(RuntimeError):
    """A cold start's summariser calls went over their bound (the attempt fails)."""


@dataclass(slots=True)
class _Meter:
    """Counts one call's summariser requests and the characters they send; bounds them."""

    limit: int | None
    calls: int = 0
    chars: int = 0

    def ask(self, op: _Ask) -> Generator[_Op, Any, Any]:
        """Yield `op` and return its answer, or the requests within the bound, then fail.

        Raises:
            _OverBoundError: When `op` holds more requests than the bound has left.
        """
        room = len(op.batch) or 1
        if self.limit is not None:
            room = min(room, self.limit - self.calls)
        if room > 0:
            batch = op.batch[:room]
            self.calls += room
            self.chars += sum(len(t) + len(i) for t, i in batch)
            if op.view is not None:
                self.chars += sum(len(m.text) for m in op.view) + len(op.instruction)
            answer = yield dataclasses.replace(op, batch=batch)
            if room == (len(op.batch) or 1):
                return answer
        msg = f"more than {self.limit} summariser calls on a cold start"
        raise _OverBoundError(msg)

    def run(self, requests: Requests) -> Generator[_Op, Any, str]:
        """Answer a request generator (`_chunked_summary`) through the driver."""
        batch = next(requests)
        while True:
            answers = yield from self.ask(_Ask(tuple(batch)))
            try:
                batch = requests.send(answers)
            except StopIteration as stop:
                return str(stop.value)


class HistoryCompactor:
    """Summarise old turns with an LLM (or extractively) and keep recent turns verbatim.

    Rules (seed 002): below `trigger_tokens`, or with at most `keep_recent` turns, the
    history comes back unchanged and no LLM call is made; the recap is capped at
    `max_summary_tokens`; a failing summariser never loses history. A *turn* here is a
    unit: one message, or an AI message together with its tool results.

    Beyond the seed:

    - the recent tail starts at a unit boundary, so no tool call is split from its results;
    - leading system messages stay first and the recap follows them (as a system message,
      or a human one when `require_human_first` and the tail does not start with one);
    - hysteresis: when the trigger fires, the tail keeps as many recent units as fit
      `target_tokens` (default half the trigger) next to a full-size recap;
    - incremental: `compact_view` carries a `RunningSummary`, and a compacted list fed back
      into `compact` is recognised by its recap, so old turns are never re-read;
    - when the LLM (or the `summarize` callback) fails or returns empty text, the
      `ExtractiveSummarizer` writes the recap; when that finds nothing either, the history
      comes back unchanged. An error text is never committed as a summary;
    - no summariser request exceeds the summariser's window (its profile, or
      `summarizer_window`): a long text is summarised in chunks, then merged.

    In an agent (`compact_view(..., room_tokens=...)`) a compactor whose `trigger_tokens`
    is None (the default) is sized by the window: it compacts when the history would
    take more than 92% of its room, down to about 10% (or the recap's cap), with a
    recap of at most 20% of the room. Its cuts lie on a grid that depends on the
    history alone (`_plan`), and every recap is kept by the digest of what it covers in
    a `RecapStore` (its own in-memory one unless given one), so a caller that keeps no
    state gets the same cuts and recaps as one whose checkpointer keeps the summary.

    The recap is structured (facts, decisions, action items, numbers, open questions);
    a model is asked for exactly those sections. A reply that uses them comes back
    canonical, a prose reply is kept as written, and an empty or placeholder reply, or
    one whose sections are broken, gives way to the extractive recap.

    Example (the seed's refund conversation):
        ```python
        from langchain_core.language_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage, HumanMessage, convert_to_openai_messages

        from langchain_contextkit import HistoryCompactor

        recap = "The user asked for a refund and was sent to Settings > Billing."
        llm = GenericFakeChatModel(messages=iter([AIMessage(recap)]))
        compactor = HistoryCompactor(llm, keep_recent=2, trigger_tokens=10)

        history = [
            HumanMessage("How do I get a refund?"),
            AIMessage("Open Settings then Billing."),
            HumanMessage("I did that but I am still stuck."),
            AIMessage("Let me escalate this for you."),
        ]

        compacted = compactor.compact(history)
        for m in convert_to_openai_messages(compacted):
            print(m["role"], "::", m["content"])
        # system :: [Recap] The user asked for a refund and was sent to Settings > Billing.
        # user :: I did that but I am still stuck.
        # assistant :: Let me escalate this for you.
        ```
    """

    def __init__(
        self,
        llm: BaseChatModel | None = None,
        *,
        keep_recent: int = 4,
        trigger_tokens: int | None = None,
        max_summary_tokens: int = 1000,
        summary_prompt: str | None = None,
        prompts: PromptRegistry | None = None,
        token_counter: TokenCounter = count_tokens,
        target_tokens: int | None = None,
        require_human_first: bool = False,
        fallback: bool = True,
        summarizer_window: int | None = None,
        fidelity: Fidelity = "medium",
        cold_start_calls: int = DEFAULT_COLD_START_CALLS,
    ) -> None:
        """Configure the compactor.

        Args:
            llm: The chat model that writes recaps; None uses the extractive summariser.
            keep_recent: Recent turns kept verbatim, at least (>= 1).
            trigger_tokens: Compact only above this many tokens (>= 0). None (the
                default): the seed's 2000 in a standalone call, sized by the window in
                an agent.
            max_summary_tokens: Hard cap of the recap (>= 1).
            summary_prompt: Replaces the default summary instruction (may contain
                ``{max_tokens}``).
            prompts: Recap heading, instructions and language (default English).
            token_counter: Counts the tokens of one string.
            target_tokens: Compact down to this (default `trigger_tokens // 2`).
            require_human_first: The first non-system message must be human (Anthropic,
                Gemini): the recap then goes in a human message when needed.
            fallback: Use the extractive summariser when the LLM or callback fails.
            summarizer_window: The summariser's window in tokens, when its profile does
                not state it: every summariser request is sized to fit it.
            fidelity: What the recap keeps (`CompactionConfig.fidelity`).
            cold_start_calls: Summariser calls (>= 1) a compaction that finds no recap in
                force may make: beyond that many epochs, everything before the newest
                one is recapped by one extractive pass (no call) and the summariser
                writes the newest epoch, extending it.

        Raises:
            ConfigError: On an out-of-range knob.
        """
        self.config = CompactionConfig(
            keep_recent=keep_recent,
            trigger_tokens=trigger_tokens,
            max_summary_tokens=max_summary_tokens,
            target_tokens=target_tokens,
            fidelity=fidelity,
        )
        registry = prompts or PromptRegistry()
        if summary_prompt is not None:
            registry = dataclasses.replace(registry, summary_prompt=summary_prompt)
        self.prompts = registry
        self.llm = llm
        self.token_counter = token_counter
        self.require_human_first = require_human_first
        self.fallback = fallback
        self.extractive = ExtractiveSummarizer(
            max_tokens=max_summary_tokens,
            counter=token_counter,
            prompts=registry,
            fidelity=fidelity,
        )
        self._llm_summarizer = None if llm is None else summarizer_from_llm(llm, registry)
        if summarizer_window is not None:
            check_count("summarizer_window", summarizer_window, minimum=1)
        self.summarizer_window = summarizer_window
        check_count("cold_start_calls", cold_start_calls, minimum=1)
        self.cold_start_calls = cold_start_calls
        self._recaps = RecapStore(store=InMemoryStore(), ttl_minutes=None)
        # What a shared recap depends on besides the messages and its cap (`recap_store`).
        self._recap_settings = settings_tag(fidelity, registry, _summarizer_name(llm))
        self._rules = Rules(
            counter=token_counter,
            heading=registry.heading("recap"),
            keep_recent=keep_recent,
            max_summary_tokens=max_summary_tokens,
            trigger_tokens=self.trigger_tokens,
            target_tokens=self.target_tokens,
            require_human_first=require_human_first,
        )

    @classmethod
    def from_config(
        cls,
        llm: BaseChatModel | None,
        config: CompactionConfig,
        *,
        prompts: PromptRegistry | None = None,
        summary_prompt: str | None = None,
        token_counter: TokenCounter = count_tokens,
        require_human_first: bool = False,
        fallback: bool = True,
    ) -> HistoryCompactor:
        """Build from a `CompactionConfig` plus the options that are not serialisable.

        Example:
            ```python
            from langchain_contextkit.compaction.compactor import CompactionConfig, HistoryCompactor

            compactor = HistoryCompactor.from_config(None, CompactionConfig(keep_recent=2))
            assert compactor.keep_recent == 2
            ```
        """
        return cls(
            llm,
            **config.to_dict(),
            prompts=prompts,
            summary_prompt=summary_prompt,
            token_counter=token_counter,
            require_human_first=require_human_first,
            fallback=fallback,
        )

    @property
    def keep_recent(self) -> int:
        """Recent turns kept verbatim, at least."""
        return self.config.keep_recent

    @property
    def trigger_tokens(self) -> int:
        """A standalone compaction fires above this many tokens (2000 unless stated)."""
        return self.config.standalone_trigger_tokens

    @property
    def max_summary_tokens(self) -> int:
        """Hard cap of the recap."""
        return self.config.max_summary_tokens

    @property
    def sized_by_window(self) -> bool:
        """True when `trigger_tokens` was left at None: an agent sizes it by its window."""
        return self.config.sized_by_window

    @property
    def fidelity(self) -> Fidelity:
        """The recap's fidelity tier (it may step down to fit a call's cap)."""
        return self.config.fidelity

    @property
    def target_tokens(self) -> int:
        """What a standalone compaction aims for (hysteresis)."""
        target = self.config.target_tokens
        return self.trigger_tokens // 2 if target is None else target

    def marks(self, room: int) -> WaterMarks:
        """The high- and low-water marks of a history room of `room` tokens (sized mode)."""
        marks = WaterMarks.for_room(room, max_summary_tokens=self.max_summary_tokens)
        target = self.config.target_tokens
        if target is not None and target < marks.high:
            marks = dataclasses.replace(marks, low=target)
        return marks

    # -- the seed's API -------------------------------------------------------------------

    def compact(
        self, history: Sequence[BaseMessage], *, summarize: Summarize | None = None
    ) -> list[BaseMessage]:
        """Return the compacted history (the original list's messages when unchanged).

        Args:
            history: The conversation, optionally starting with system messages (a list
                returned by an earlier `compact` is recognised by its recap).
            summarize: A `summarize(text, instruction) -> str` callback used instead of
                the LLM.
        """
        return self.compact_view(history, summarize=summarize).messages

    async def acompact(
        self, history: Sequence[BaseMessage], *, asummarize: ASummarize | None = None
    ) -> list[BaseMessage]:
        """Async `compact`; `asummarize` is an async callback used instead of the LLM."""
        return (await self.acompact_view(history, summarize=asummarize)).messages

    # -- the incremental API --------------------------------------------------------------

    def compact_view(
        self,
        history: Sequence[BaseMessage],
        *,
        summary: RunningSummary | None = None,
        summarize: Summarize | None = None,
        summarize_view: ViewSummarize | None = None,
        overhead_tokens: int = 0,
        ceiling_tokens: int | None = None,
        room_tokens: int | None = None,
        summarizer_window: int | None = None,
        reuse_recaps: bool = True,
        cap_scale: float = 1.0,
        recaps: RecapStore | None = None,
    ) -> CompactionResult:
        """Compute the view a model should see, extending `summary` when the trigger fires.

        Args:
            history: The full conversation (never modified).
            summary: The running summary from the previous call, if any.
            summarize: A callback used instead of the LLM.
            summarize_view: Tried first when given: `summarize_view(view, instruction)`
                gets the current view unchanged (the request the model saw last, so a
                provider's prompt cache still holds it) and an instruction to summarise
                all but its last turns; None declines (the request would not fit).
            overhead_tokens: Tokens sent beside these messages (tool schemas, a system
                prompt kept elsewhere): they count towards the trigger.
            ceiling_tokens: A hard limit for the view plus overhead (the window minus the
                output reserve). Going over it forces a compaction, even with few turns.
            room_tokens: In an agent, the tokens this history may take in the window's
                ledger. A compactor whose `trigger_tokens` is None is then sized by it.
            summarizer_window: The window of the model that writes recaps, when neither
                `summarizer_window` at construction nor the LLM's profile states it.
            reuse_recaps: Let a stored recap for this history's cuts stand in for a new
                one (a caller that keeps no state). Pass False for a checkpointed
                thread: its `summary` is the authority.
            cap_scale: The summariser's tokens per counter token: the instruction states
                the recap's cap in the summariser's tokens (`cap x cap_scale`).
            recaps: Recaps shared with other workers (`RecapStore`); by default this
                compactor's own in-memory store. Every recap made is written there.

        Returns:
            The view, the new running summary and what happened.

        Raises:
            ContextWindowExceeded: When even one recent turn and the recap exceed
                `ceiling_tokens` (the history itself is untouched).
        """
        store = self._recaps if recaps is None else recaps
        text = summarize or self._llm_summarizer
        kind: SummarizerKind | None = "callback" if summarize is not None else "llm"
        steps = self._steps(
            history,
            summary,
            overhead=overhead_tokens,
            ceiling=ceiling_tokens,
            room=room_tokens,
            window=summarizer_window,
            cap_scale=cap_scale,
            reuse=reuse_recaps,
            in_place=summarize_view is not None,
            kind=None if text is None else kind,
        )
        answer: Any = None
        failure: Exception | None = None
        while True:
            try:
                op = steps.send(answer) if failure is None else steps.throw(failure)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            answer, failure = None, None
            try:
                if isinstance(op, _Lookup):
                    answer = store.lookup(op.keys)
                elif isinstance(op, _Save):
                    store.save(op.entries)
                elif op.view is not None and summarize_view is not None:
                    answer = summarize_view(op.view, op.instruction)
                elif text is not None:
                    answer = [text(t, i) for t, i in op.batch]
            except Exception as exc:  # noqa: BLE001 - handed to the steps: the next summariser's turn
                failure = exc

    async def acompact_view(
        self,
        history: Sequence[BaseMessage],
        *,
        summary: RunningSummary | None = None,
        summarize: ASummarize | None = None,
        summarize_view: AViewSummarize | None = None,
        overhead_tokens: int = 0,
        ceiling_tokens: int | None = None,
        room_tokens: int | None = None,
        summarizer_window: int | None = None,
        reuse_recaps: bool = True,
        cap_scale: float = 1.0,
        recaps: RecapStore | None = None,
    ) -> CompactionResult:
        """Async `compact_view`: the same keywords, its callbacks async.

        Raises:
            ContextWindowExceeded: As `compact_view`.
        """
        store = self._recaps if recaps is None else recaps
        llm = self._llm_summarizer
        text = summarize or (None if llm is None else llm.asummarize)
        kind: SummarizerKind = "callback" if summarize is not None else "llm"
        steps = self._steps(
            history,
            summary,
            overhead=overhead_tokens,
            ceiling=ceiling_tokens,
            room=room_tokens,
            window=summarizer_window,
            cap_scale=cap_scale,
            reuse=reuse_recaps,
            in_place=summarize_view is not None,
            kind=None if text is None else kind,
        )
        gate = asyncio.Semaphore(_MAX_CONCURRENCY)

        async def one(request: tuple[str, str]) -> str:
            async with gate:
                assert text is not None  # noqa: S101 - only asked when there is one
                return await text(*request)

        answer: Any = None
        failure: Exception | None = None
        while True:
            try:
                op = steps.send(answer) if failure is None else steps.throw(failure)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            answer, failure = None, None
            try:
                if isinstance(op, _Lookup):
                    answer = await store.alookup(op.keys)
                elif isinstance(op, _Save):
                    await store.asave(op.entries)
                elif op.view is not None and summarize_view is not None:
                    answer = await summarize_view(op.view, op.instruction)
                else:
                    answer = list(await asyncio.gather(*map(one, op.batch)))
            except Exception as exc:  # noqa: BLE001 - handed to the steps: the next summariser's turn
                failure = exc

    # -- one call, as steps ---------------------------------------------------------------

    def _steps(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        *,
        overhead: int,
        ceiling: int | None,
        room: int | None,
        window: int | None,
        cap_scale: float,
        reuse: bool,
        in_place: bool,
        kind: SummarizerKind | None,
    ) -> Generator[_Op, Any, CompactionResult]:
        """Plan, find a stored recap, summarise, store: one call, its I/O yielded."""
        scale = _checked_scale(cap_scale)
        marks = self.marks(room) if room is not None and self.sized_by_window else None
        read = read_history(history, self._rules, digests=marks is not None)
        start = summary_in_force(read, summary, sized=marks is not None)
        plan = self._plan(read, start, overhead, ceiling, marks)
        shared = False
        if reuse and isinstance(plan, Plan) and marks is not None and read.digests is not None:
            hit = None
            for candidates in _candidates(read, plan, marks):
                above = [at for at in candidates if hit is None or at > hit[1]]
                if not above:
                    continue
                named = [(self._key(read.digests[at]), at) for at in above]
                found = yield _Lookup(tuple(key for key, _ in named))
                hit = next(((found[k], at) for k, at in named if k in found), hit)
            if hit is not None:
                start = Start(hit[0].recap, hit[1], hit[0].floor)
                plan, shared = self._plan(read, start, overhead, ceiling, marks), True
        if isinstance(plan, CompactionResult):
            return self._within(dataclasses.replace(plan, shared=shared), ceiling)
        result, fresh = yield from self._summarised(plan, ceiling, window, scale, in_place, kind)
        if fresh:
            entries = tuple((self._key(d), SharedRecap(r, f)) for d, r, f in fresh)
            yield _Save(entries)
        return self._within(dataclasses.replace(result, shared=shared), ceiling)

    def _plan(
        self,
        read: History,
        start: Start,
        overhead: int,
        ceiling: int | None,
        marks: WaterMarks | None,
    ) -> Plan | CompactionResult:
        plan = plan_compaction(
            read, start, self._rules, overhead=overhead, ceiling=ceiling, marks=marks
        )
        if isinstance(plan, CompactionResult) or start.text is not None:
            return plan
        epochs = plan.epochs()
        if len(epochs) <= self.cold_start_calls:
            return plan
        # A bounded cold start: all but the newest epoch are read once, extractively.
        return dataclasses.replace(plan, folded=epochs[-1][0])

    def _key(self, digest: str) -> str:
        return recap_key(digest, self._recap_settings)

    def _summarised(  # noqa: C901, PLR0917 - one attempt per summariser, in order
        self,
        plan: Plan,
        ceiling: int | None,
        window: int | None,
        scale: float,
        in_place: bool,  # noqa: FBT001
        kind: SummarizerKind | None,
    ) -> Generator[_Op, Any, tuple[CompactionResult, _Fresh]]:
        """`plan` carried out: each summariser in turn until one gives a usable recap."""
        window = self.summarizer_window or _profile_window(self.llm) or window
        meter = _Meter(self.cold_start_calls if plan.folded else None)
        attempts: list[SummarizerKind] = []
        if in_place and len(plan.epochs()) == 1:
            # In place only for one epoch: a chain of several is summarised epoch by epoch,
            # so that its recap is the same whichever call (or process) makes it.
            attempts.append("prefix")
        if kind is not None:
            attempts.append(kind)
        if self.fallback or not attempts:
            attempts.append("extractive")
        error: str | None = None
        for attempt in attempts:
            tier: Fidelity | None = None
            fresh: _Fresh = []
            try:
                if attempt == "prefix":
                    instruction = self.prompts.view_summary_instruction(
                        max_tokens=stated_cap(plan.cap, scale),
                        keep_last=len(plan.pending) - plan.cut,
                        fidelity=self.fidelity,
                    )
                    text = yield from meter.ask(
                        _Ask(view=plan.view.messages, instruction=instruction)
                    )
                    if text is None:
                        continue  # declined: the in-place request would not fit the model
                elif attempt == "extractive":
                    text, tier, fresh = self._extractive_chain(plan)
                else:
                    asked = attempt == "llm" and self.prompts.summary_prompt is None
                    text, fresh = yield from self._chain(plan, meter, window, scale, asked=asked)
            except Exception as exc:  # noqa: BLE001 - a failing summariser must never cost history
                error = _failure(attempt, exc)
                continue
            result = self._finish(plan, text, attempt, tier, error, ceiling)
            if result is not None:
                if result.summary is not None and plan.digest is not None:
                    fresh.append((plan.digest, result.summary.text, result.summary.floor))
                return _metered(result, meter), fresh
            error = _failure(attempt, None)
        return _metered(self._unchanged(plan, error), meter), []

    def _chain(
        self, plan: Plan, meter: _Meter, window: int | None, scale: float, *, asked: bool
    ) -> Generator[_Op, Any, tuple[str, _Fresh]]:
        """A model's recap after every epoch of `plan`, each extending the one before."""
        previous = self._carried(plan.start.text)
        fresh: _Fresh = []
        for start, end, digest in plan.epochs():
            folded = end <= plan.folded
            if folded:
                text = self._extractive_recap(plan, plan.pending[:end], previous)[0]
            else:
                requests = fitted_requests(
                    [render_transcript([message]) for message in plan.pending[start:end]],
                    previous,
                    window=window,
                    cap=plan.cap,
                    prompts=self.prompts,
                    counter=self.token_counter,
                    fidelity=self.fidelity,
                    cap_scale=scale,
                )
                text = yield from meter.run(requests)
            if end == plan.cut:
                return text, fresh  # `_finish` checks, holds and commits the final recap
            recap = self._epoch_recap(
                text, plan, end, asked=asked and not folded, extractive=folded
            )
            if digest is not None:
                fresh.append((digest, recap, None))
            previous = self._carried(recap)
        return previous or "", fresh

    def _extractive_chain(
        self, plan: Plan, *, floor: bool = False
    ) -> tuple[str, Fidelity | None, _Fresh]:
        """The extractive recap after every epoch of `plan` (no I/O).

        `floor`: the chain of a model recap's floor (it extends the floor in force).
        """
        start = plan.start
        previous = self._carried(start.floor if floor and start.floor is not None else start.text)
        fresh: _Fresh = []
        tier: Fidelity | None = None
        for begin, end, digest in plan.epochs():
            text, tier = self._extractive_recap(plan, plan.pending[begin:end], previous)
            if end == plan.cut:
                return text, tier, fresh
            recap = self._epoch_recap(text, plan, end, asked=False, extractive=True)
            if digest is not None:
                fresh.append((digest, recap, None))
            previous = self._carried(recap)
        return previous or "", tier, fresh

    def _extractive_recap(
        self, plan: Plan, aged: Sequence[BaseMessage], previous: str | None
    ) -> tuple[str, Fidelity]:
        """The extractive recap of `aged` extending `previous`, chosen for the plan's cap.

        Choosing for `max_summary_tokens` and then cutting to a smaller cap would keep the
        first lines, not the best ones.
        """
        extractive = self.extractive
        if plan.cap < extractive.max_tokens:
            extractive = dataclasses.replace(extractive, max_tokens=max(1, plan.cap))
        transcript = "\n".join(render_transcript([message]) for message in aged)
        text = transcript if previous is None else compose_extension(previous, transcript)
        return extractive.recap(text)

    def _carried(self, recap: str | None) -> str | None:
        """`recap` as the next epoch extends it: None when it kept nothing."""
        return None if recap is None or self.prompts.is_empty_recap(recap) else recap

    def _epoch_recap(
        self, text: str, plan: Plan, end: int, *, asked: bool, extractive: bool
    ) -> str:
        """An intermediate epoch's recap, held to the cap.

        Raises:
            ValueError: When a model gave no text, a placeholder or broken sections.
        """
        if not text.strip():
            text = self._empty_recap(plan, end) if extractive else ""
            if not text:
                msg = "the summariser returned no text"
                raise ValueError(msg)
        fitted = structured_recap(
            text,
            max_tokens=plan.cap,
            fidelity=self.fidelity,
            prompts=self.prompts,
            counter=self.token_counter,
        )
        if fitted is not None:
            text = fitted[0]
        elif asked:
            msg = "the summariser's reply is a placeholder or its sections are broken"
            raise ValueError(msg)
        return self._reduced(text, plan.cap)

    def _empty_recap(self, plan: Plan, end: int) -> str:
        """The recap of `plan`'s messages up to `end` when none was worth keeping ("" if over)."""
        text = self.prompts.empty_recap(plan.covered + end)
        return text if self.token_counter(text) <= plan.cap else ""

    def _reduced(self, text: str, cap: int) -> str:
        """`text` within `cap`, reduced by score, never cut."""
        return reduce_recap(text.strip(), cap, prompts=self.prompts, counter=self.token_counter)

    # -- committing a recap ---------------------------------------------------------------

    def _finish(  # noqa: PLR0917 - a summariser's outcome
        self,
        plan: Plan,
        text: object,
        kind: SummarizerKind,
        tier: Fidelity | None,
        error: str | None,
        ceiling: int | None,
    ) -> CompactionResult | None:
        """Commit a summary; None when the summariser gave nothing usable."""
        if kind == "extractive" and (not isinstance(text, str) or not text.strip()):
            # Nothing salient in the aged span: a small recap that says so, not a failure.
            text = self._empty_recap(plan, plan.cut)
        if not isinstance(text, str) or not text.strip():
            return None
        floor = None
        if kind != "extractive":
            floor = self._extractive_chain(plan, floor=True)[0]
            held = self._structured(plan, text, kind, floor)
            if held is None:
                return None  # a placeholder or broken sections from a model: the fallback's turn
            text, tier = held
        recap = self._reduced(text, plan.cap)
        if not any(ch.isalnum() for ch in recap):
            return None  # nothing but an ellipsis or punctuation: a placeholder
        covered = plan.covered + plan.cut
        tail = plan.pending[plan.cut :]
        kept = None if plan.costs is None else sum(plan.costs[plan.cut :])
        parts = self._rules.parts(plan.system, recap, covered, tail, kept)
        after = self._rules.tokens(parts, plan.overhead)
        if ceiling is not None and after > ceiling:
            # The window wins over the recap's own cap: a shorter recap, not a failed call.
            shorter = self._shrunk(recap, after - ceiling)
            if shorter is not None:
                recap = shorter
                parts = self._rules.parts(plan.system, recap, covered, tail, kept)
                after = self._rules.tokens(parts, plan.overhead)
        if ceiling is not None and after > ceiling:
            msg = (
                f"after compaction the request still takes {after} tokens, more than the "
                f"ceiling of {ceiling}: the most recent turn alone does not fit"
            )
            raise ContextWindowExceeded(msg, required=after, budget=ceiling)
        view = parts.messages
        if _new_problems(plan.pending, view, require_human_first=self.require_human_first):
            return None  # logged; the next summariser's turn, else the history unchanged
        last_id = plan.pending[plan.cut - 1].id
        summary = RunningSummary(
            recap,
            covered,
            last_id if isinstance(last_id, str) else None,
            plan.digest,
            floor or None,
        )
        return CompactionResult(
            view,
            summary,
            compacted=True,
            summarizer=kind,
            tokens_before=plan.tokens_before,
            tokens_after=after,
            aged_out=plan.cut,
            error=error,
            fidelity=tier,
            parts=parts,
        )

    def _structured(
        self, plan: Plan, text: str, kind: SummarizerKind, floor: str
    ) -> tuple[str, Fidelity | None] | None:
        """A model's or callback's text as the recap, held to the cap above its floor.

        Sections come back canonical and prose as written. A model asked for the sections
        (our own instruction) that replies with a placeholder or broken sections is
        refused (None); a callback or a custom `summary_prompt` may write its own format.
        """
        fitted = structured_recap(
            text,
            max_tokens=_UNCAPPED,
            fidelity=self.fidelity,
            prompts=self.prompts,
            counter=self.token_counter,
        )
        if fitted is None:
            if kind == "prefix" or (kind == "llm" and self.prompts.summary_prompt is None):
                logger.warning("the %s summariser's reply is a placeholder or broken", kind)
                return None
            fitted = text.strip(), None
        return held_recap(
            fitted[0],
            fitted[1],
            floor=floor,
            max_tokens=plan.cap,
            prompts=self.prompts,
            counter=self.token_counter,
            fidelity=self.fidelity,
        )

    def _shrunk(self, recap: str, excess: int) -> str | None:
        """`recap` cut by `excess` tokens and more; None when nothing meaningful is left."""
        target = self.token_counter(recap) - excess - 1
        if target < 1:
            return None
        shorter = self._reduced(recap, target)
        if not any(ch.isalnum() for ch in shorter):
            return None
        logger.warning("recap cut to %d tokens to fit the window", self.token_counter(shorter))
        return shorter

    def _within(self, result: CompactionResult, ceiling: int | None) -> CompactionResult:
        """Pass `result` on, shrink its recap to fit the ceiling, or raise.

        Over the window, sending would fail at the provider and dropping turns without a
        summary would lose them silently: the recap is cut to fit if that suffices, else
        the caller decides.

        Raises:
            ContextWindowExceeded: When even that does not fit.
        """
        if ceiling is None or result.tokens_after <= ceiling:
            return result
        summary, parts = result.summary, result.view_parts
        if summary is not None and parts.recap is not None:
            shorter = self._shrunk(summary.text, result.tokens_after - ceiling)
            if shorter is not None:
                as_human = parts.recap.type == "human"
                recap = self._rules.recap(shorter, summary.covered, as_human=as_human)
                overhead = result.tokens_after - self._rules.tokens(parts, 0)
                parts = dataclasses.replace(parts, recap=recap)
                after = self._rules.tokens(parts, overhead)
                if after <= ceiling:
                    return dataclasses.replace(
                        result,
                        messages=parts.messages,
                        summary=dataclasses.replace(summary, text=shorter),
                        compacted=True,
                        tokens_after=after,
                        parts=parts,
                    )
        reason = result.error or "no turn could age out"
        msg = (
            f"the request takes {result.tokens_after} tokens, more than the ceiling of "
            f"{ceiling}, and compaction could not shrink it ({reason})"
        )
        raise ContextWindowExceeded(msg, required=result.tokens_after, budget=ceiling)

    def _unchanged(self, plan: Plan, error: str | None) -> CompactionResult:
        logger.warning("no summary could be made; the history is kept unchanged (%s)", error)
        return CompactionResult(
            plan.view.messages,
            plan.current,
            compacted=False,
            summarizer=None,
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_before,
            error=error,
            parts=plan.view,
        )


def _candidates(read: History, plan: Plan, marks: WaterMarks) -> list[list[int]]:
    """Where a stored recap of this history may end: two lists to look up in turn.

    First the grid's cuts in force and the unit starts within a high mark of the end,
    newest first: the newest recap made for this history ends there, unless a cut forced
    by the window fell off the grid and a long tool loop has since grown the history by
    more than the high mark. Then every other unit start after the recap in force and
    after what the first found (usually none: the kept turns are within the high mark).
    """
    base, totals = plan.covered, read.totals
    near = {base + cut for cut in plan.cuts}
    near |= {at for at in read.starts if at > base and totals[-1] - totals[at] <= marks.high}
    rest = {at for at in read.starts if at > base} - near
    return [sorted(near, reverse=True), sorted(rest, reverse=True)]


def _failure(kind: SummarizerKind, exc: Exception | None) -> str:
    if exc is None:
        message = f"the {kind} summariser returned no text"
    else:
        message = f"the {kind} summariser failed: {type(exc).__name__}: {exc}"
    logger.warning("%s", message)
    return message


def _checked_scale(scale: float) -> float:
    """`cap_scale` when it is a positive finite number.

    Raises:
        ConfigError: Otherwise.
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < _MAX_SCALE:
        msg = f"cap_scale must be a positive finite number, got {scale!r}"
        raise ConfigError(msg)
    return float(scale)


def _metered(result: CompactionResult, meter: _Meter) -> CompactionResult:
    return dataclasses.replace(result, summarizer_calls=meter.calls, summarizer_chars=meter.chars)


def _profile_window(llm: BaseChatModel | None) -> int | None:
    return None if llm is None else model_limits(llm)[0]


def _summarizer_name(llm: BaseChatModel | None) -> str:
    """The summariser a recap was written by, as its settings name it (`settings_tag`)."""
    if llm is None:
        return "extractive"
    model = getattr(llm, "model_name", None) or getattr(llm, "model", None)
    return f"{type(llm).__name__}:{model}" if isinstance(model, str) else type(llm).__name__


def _new_problems(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage], *, require_human_first: bool
) -> bool:
    """Whether the view has a problem the input had not (logged; such a view is not sent)."""

    def codes(messages: Sequence[BaseMessage]) -> Counter[str]:
        found = find_message_problems(messages, require_human_first=require_human_first)
        return Counter(p.code for p in found)

    new = codes(after) - codes(before)
    if new:
        logger.warning("compaction produced an invalid message list (%s): not used", dict(new))
    return bool(new)


DEFAULT_TRIGGER_TOKENS = 2000
"""The seed's trigger for a standalone call whose `trigger_tokens` is None (the default).
In an agent, a None trigger is sized by the window's high- and low-water marks instead
(see `HistoryCompactor`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionConfig:
    """The serialisable knobs of `HistoryCompactor` (see `HistoryCompactor.from_config`).

    Example:
        ```python
        from langchain_contextkit.compaction.compactor import CompactionConfig

        cfg = CompactionConfig.from_dict({"keep_recent": 6})
        assert (cfg.keep_recent, cfg.trigger_tokens) == (6, None)
        assert cfg.standalone_trigger_tokens == 2000  # the seed's trigger
        assert cfg.to_dict()["max_summary_tokens"] == 1000
        ```
    """

    keep_recent: int = 4
    """Recent turns kept verbatim (at least)."""

    trigger_tokens: int | None = None
    """Compact only when the history takes more tokens than this. None: sized by the
    window in an agent, and the seed's `DEFAULT_TRIGGER_TOKENS` (2000) standalone."""

    max_summary_tokens: int = 1000
    """Hard cap of the recap."""

    target_tokens: int | None = None
    """Compact down to this many tokens (default: half the trigger)."""

    fidelity: Fidelity = "medium"
    """What the recap keeps: ``"high"`` details and exact wording, ``"medium"`` every key
    fact and conclusion, ``"low"`` only conclusions and key numbers. A recap that does not
    fit its cap at this tier is written at a lower one before any line is dropped."""

    def __post_init__(self) -> None:
        """Validate the knobs."""
        check_fidelity(self.fidelity)
        check_count("keep_recent", self.keep_recent, minimum=1)
        if self.trigger_tokens is not None:
            check_count("trigger_tokens", self.trigger_tokens, minimum=0)
        check_count("max_summary_tokens", self.max_summary_tokens, minimum=1)
        if self.target_tokens is not None:
            check_count("target_tokens", self.target_tokens, minimum=0)
            if self.target_tokens > self.standalone_trigger_tokens:
                msg = (
                    f"target_tokens ({self.target_tokens}) must not exceed trigger_tokens "
                    f"({self.standalone_trigger_tokens})."
                )
                raise ConfigError(msg)

    def to_dict(self) -> dict[str, Any]:
        """The knobs as a plain dict (JSON- and YAML-friendly; every value stated)."""
        return dataclasses.asdict(self)

    @property
    def sized_by_window(self) -> bool:
        """True when `trigger_tokens` is None: an agent sizes compaction by its window."""
        return self.trigger_tokens is None

    @property
    def standalone_trigger_tokens(self) -> int:
        """The trigger of a standalone call: `trigger_tokens`, or the seed's 2000 if None."""
        return DEFAULT_TRIGGER_TOKENS if self.trigger_tokens is None else self.trigger_tokens

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionConfig:
        """Build from a dict; unknown keys are an error, not silently ignored.

        Raises:
            ConfigError: On an unknown key or an invalid value.
        """
        return from_known_fields(cls, data)
