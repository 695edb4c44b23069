"""History compaction: summarise old turns into a recap, keep recent turns verbatim.

`HistoryCompactor` is the contract of seed 002 ("压缩对话历史") plus what long-running
agents need: the recent tail is cut only between whole units (a tool call never loses its
results), a leading system prompt stays first, the summary is extended incrementally
(`RunningSummary`) instead of re-reading old turns, compaction overshoots down to a lower
target (hysteresis) so the prompt prefix stays byte-stable between compactions, and a
failing or empty summary never costs history: the deterministic `ExtractiveSummarizer`
steps in, and when nothing can be summarised the history comes back unchanged.

`HistoryCompactor` keeps its plan, epochs and recap memo in one class, hence the length.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from langchain_contextkit._validate import check_count, one_of
from langchain_contextkit.compaction._cold_start import (
    DEFAULT_COLD_START_CALLS,
    ColdStart,
    SummarizerMeter,
)
from langchain_contextkit.compaction._history_index import HistoryIndex
from langchain_contextkit.compaction._plan import Plan, Planner
from langchain_contextkit.compaction._recap_chain import as_async
from langchain_contextkit.compaction._recap_commit import RecapCommits
from langchain_contextkit.compaction._recap_memo import NewestKnown, RecapMemo
from langchain_contextkit.compaction.config import DEFAULT_TRIGGER_TOKENS, CompactionConfig
from langchain_contextkit.compaction.recap import (
    RECAP_ID_PREFIX,
    AViewSummarize,
    CompactionResult,
    RunningSummary,
    SummarizerKind,
    ViewSummarize,
)
from langchain_contextkit.compaction.recap_store import RecapStore, settings_tag
from langchain_contextkit.compaction.summarizers import (
    ASummarize,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarize,
    summarizer_from_llm,
)
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.prompts import Fidelity, PromptRegistry
from langchain_contextkit.tokens import (
    TokenCounter,
    count_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage


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


class HistoryCompactor(ColdStart, Planner, RecapCommits):
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
      `target_tokens` (default half the trigger) next to a full-size recap, so the next
      compaction is far away and the prefix stays byte-stable for prompt caching;
    - incremental: `compact_view` carries a `RunningSummary`, and a compacted list fed back
      into `compact` is recognised by its recap, so old turns are never re-read;
    - when the LLM (or the `summarize` callback) fails or returns empty text, the
      `ExtractiveSummarizer` writes the recap; when that finds nothing either, the history
      comes back unchanged. An error text is never committed as a summary;
    - no summariser request exceeds the summariser's window (its profile, or
      `summarizer_window`): a text too long for one request is summarised in chunks
      (map), then the partial summaries are merged (reduce).

    In an agent (`compact_view(..., room_tokens=...)`, as `ContextKitMiddleware`,
    `CompactionMiddleware` and the graph nodes call it) a compactor whose `trigger_tokens`
    is None (the default) is sized by the window: it compacts when the history would
    take more than `HIGH_WATER` (92%) of its room, down to about `LOW_WATER` (10%) or the
    recap's cap when that is larger, with a recap of at most `RECAP_SHARE` (20%) of the
    room (and never above `max_summary_tokens`). Its cuts are placed on a grid that
    only depends on the history (see `_recap_grid`), so a caller that keeps no
    checkpointer and re-sends the whole list gets the same cuts, and from this process's
    memo of recaps the same recap, as one whose checkpointer keeps the running summary.
    An explicit `trigger_tokens` keeps the seed's rule everywhere.

    The recap is structured (facts, decisions, action items, numbers, open questions:
    `ExtractiveSummarizer`); a model is asked for exactly those sections. A reply that
    uses them comes back canonical, a prose reply (no section heading) is kept as
    written, and an empty or placeholder reply, or one whose sections are broken, gives
    way to the extractive recap (`summarizers.structured_recap`).

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
                force may make: the summariser writes the newest epoch of the window's
                grid and everything before it is folded in by one extractive pass (no
                call). What that costs: the older part keeps the extractive recap's
                facts (the user's statements and decisions first), not the model's
                wording. Later compactions extend the recap with the summariser as usual.

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
        self._llm_summarizer: LLMSummarizer | None = (
            None if llm is None else summarizer_from_llm(llm, registry)
        )
        if summarizer_window is not None:
            check_count("summarizer_window", summarizer_window, minimum=1)
        self.summarizer_window = summarizer_window
        self._recaps = RecapMemo()
        self._newest_known = NewestKnown(self._recaps)  # where a stateless caller's recap is
        self._floors = RecapMemo()  # the floors of model recaps, by the same digests
        self._index = HistoryIndex(token_counter)
        check_count("cold_start_calls", cold_start_calls, minimum=1)
        self.cold_start_calls = cold_start_calls
        # What a shared recap depends on besides the messages and its cap (`recap_store`).
        self._recap_settings = settings_tag(fidelity, registry, _summarizer_name(llm))

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
                all but its last turns; it sends both, the instruction last, or returns
                None when that request would not fit the model. This keeps the summary
                call cheap on cached providers.
            overhead_tokens: Tokens sent beside these messages (tool schemas, a system
                prompt kept elsewhere): they count towards the trigger.
            ceiling_tokens: A hard limit for the view plus overhead (the window minus the
                output reserve). Going over it forces a compaction, even with few turns.
            room_tokens: In an agent, the tokens this history may take in the window's
                ledger (its trajectory budget, overhead excluded). A compactor whose
                `trigger_tokens` is None is then sized by it.
            summarizer_window: The window of the model that writes recaps, when neither
                `summarizer_window` at construction nor the LLM's profile states it (the
                agent's window when the agent's model summarises).
            reuse_recaps: Let a recap this compactor made earlier, for the same
                messages, stand in for a new one (a caller that re-sends the whole list
                and keeps no state). Pass False for a checkpointed thread: its `summary`
                is the authority, and a recap from this process's memory (another
                thread with the same opening turns, or a call that failed before its
                checkpoint) would make its requests depend on which process serves it.
            cap_scale: The summariser's tokens per counter token (a calibration
                factor): the instruction states the recap's cap in the summariser's
                tokens, `cap x cap_scale` rounded down. The reply is held to the cap in
                counter tokens either way.
            recaps: Recaps shared with other workers (`RecapStore`): before summarising,
                a recap stored for this history's cuts is used (with `reuse_recaps`);
                every recap made is written there.

        Returns:
            The view, the new running summary and what happened.

        Raises:
            ContextWindowExceeded: When even one recent turn and the recap exceed
                `ceiling_tokens` (the history itself is untouched).
        """

        def plan_now() -> Plan | CompactionResult:
            return self._plan(
                history, summary, overhead_tokens, ceiling_tokens, room_tokens, reuse=reuse_recaps
            )

        plan, shared = plan_now(), False
        if recaps is not None and reuse_recaps and isinstance(plan, Plan):
            keys = self._shared_keys(plan)
            if keys and self._adopt(plan, recaps.lookup(keys)):
                plan, shared = plan_now(), True
        if isinstance(plan, CompactionResult):
            return self._within(dataclasses.replace(plan, shared=shared), ceiling_tokens)
        result = self._summarised(
            plan,
            summarize=summarize,
            summarize_view=summarize_view,
            summarizer_window=summarizer_window,
            cap_scale=cap_scale,
            ceiling=ceiling_tokens,
        )
        if recaps is not None:
            recaps.save(self._shared_entries(plan))
        return self._within(dataclasses.replace(result, shared=shared), ceiling_tokens)

    def _summarised(
        self,
        plan: Plan,
        *,
        summarize: Summarize | None,
        summarize_view: ViewSummarize | None,
        summarizer_window: int | None,
        cap_scale: float,
        ceiling: int | None,
    ) -> CompactionResult:
        """`plan` carried out: each summariser in turn until one gives a usable recap."""
        plan.summarizer_window = self._summarizer_window(summarizer_window)
        plan.cap_scale = _checked_scale(cap_scale)
        meter = self._bounded(plan)
        attempts: list[tuple[SummarizerKind, Callable[[], str | None]]] = []
        if summarize_view is not None and len(plan.epochs()) == 1:
            # In place only for one epoch: a chain of several is summarised epoch by epoch,
            # so that its recap is the same whichever call (or process) makes it.
            view, instruction = plan.view, self._view_instruction(plan)
            in_place = meter.view(summarize_view)
            attempts.append(("prefix", lambda: in_place(view, instruction)))
        given = summarize or self._llm_summarizer
        if given is not None:
            kind: SummarizerKind = "callback" if summarize is not None else "llm"
            asked = kind == "llm" and self.prompts.summary_prompt is None
            transcript = meter.text(given)
            attempts.append((kind, lambda: self._chain(plan, transcript, asked=asked)))
        if self.fallback or not attempts:
            extractive = self._extractive_for(plan)
            attempts.append(("extractive", lambda: self._chain(plan, extractive, extractive=True)))
        error: str | None = None
        for kind, attempt in attempts:
            try:
                text = attempt()
            except Exception as exc:  # noqa: BLE001 - a failing summariser must never cost history
                error = self._note_failure(kind, exc)
                continue
            if text is None and kind == "prefix":
                continue  # declined: the in-place request would not fit the model
            result = self._finish(plan, text, kind, error, ceiling)
            if result is not None:
                return _metered(result, meter)
            error = self._note_failure(kind, None)
        return _metered(self._unchanged(plan, error), meter)

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
        asummarize: ASummarize | None = None,
        asummarize_view: AViewSummarize | None = None,
    ) -> CompactionResult:
        """Async `compact_view`: the same keywords, its callbacks async.

        `asummarize` and `asummarize_view` are aliases of `summarize` and
        `summarize_view` (the names `acompact` takes, after seed 002).

        Raises:
            ConfigError: When a callback is passed under both of its names.
            ContextWindowExceeded: As `compact_view`.
        """
        asummarize = one_of("summarize", summarize, "asummarize", asummarize)
        asummarize_view = one_of(
            "summarize_view", summarize_view, "asummarize_view", asummarize_view
        )

        def plan_now() -> Plan | CompactionResult:
            return self._plan(
                history, summary, overhead_tokens, ceiling_tokens, room_tokens, reuse=reuse_recaps
            )

        plan, shared = plan_now(), False
        if recaps is not None and reuse_recaps and isinstance(plan, Plan):
            keys = self._shared_keys(plan)
            if keys and self._adopt(plan, await recaps.alookup(keys)):
                plan, shared = plan_now(), True
        if isinstance(plan, CompactionResult):
            return self._within(dataclasses.replace(plan, shared=shared), ceiling_tokens)
        result = await self._asummarised(
            plan,
            asummarize=asummarize,
            asummarize_view=asummarize_view,
            summarizer_window=summarizer_window,
            cap_scale=cap_scale,
            ceiling=ceiling_tokens,
        )
        if recaps is not None:
            await recaps.asave(self._shared_entries(plan))
        return self._within(dataclasses.replace(result, shared=shared), ceiling_tokens)

    async def _asummarised(
        self,
        plan: Plan,
        *,
        asummarize: ASummarize | None,
        asummarize_view: AViewSummarize | None,
        summarizer_window: int | None,
        cap_scale: float,
        ceiling: int | None,
    ) -> CompactionResult:
        """Async `_summarised`."""
        plan.summarizer_window = self._summarizer_window(summarizer_window)
        plan.cap_scale = _checked_scale(cap_scale)
        meter = self._bounded(plan)
        attempts: list[tuple[SummarizerKind, Callable[[], Awaitable[str | None]]]] = []
        if asummarize_view is not None and len(plan.epochs()) == 1:
            # In place only for one epoch: a chain of several is summarised epoch by epoch,
            # so that its recap is the same whichever call (or process) makes it.
            view, instruction = plan.view, self._view_instruction(plan)
            in_place = meter.aview(asummarize_view)
            attempts.append(("prefix", lambda: in_place(view, instruction)))
        if asummarize is not None:
            callback = meter.atext(asummarize)
            attempts.append(("callback", lambda: self._achain(plan, callback)))
        elif self._llm_summarizer is not None:
            llm = meter.atext(self._llm_summarizer.asummarize)
            asked = self.prompts.summary_prompt is None
            attempts.append(("llm", lambda: self._achain(plan, llm, asked=asked)))
        if self.fallback or not attempts:
            extractive = as_async(self._extractive_for(plan))
            attempts.append(("extractive", lambda: self._achain(plan, extractive, extractive=True)))
        error: str | None = None
        for kind, attempt in attempts:
            try:
                text = await attempt()
            except Exception as exc:  # noqa: BLE001 - a failing summariser must never cost history
                error = self._note_failure(kind, exc)
                continue
            if text is None and kind == "prefix":
                continue  # declined: the in-place request would not fit the model
            result = self._finish(plan, text, kind, error, ceiling)
            if result is not None:
                return _metered(result, meter)
            error = self._note_failure(kind, None)
        return _metered(self._unchanged(plan, error), meter)


def _checked_scale(scale: float) -> float:
    """`cap_scale` when it is a positive finite number.

    Raises:
        ConfigError: Otherwise.
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < _MAX_SCALE:
        msg = f"cap_scale must be a positive finite number, got {scale!r}"
        raise ConfigError(msg)
    return float(scale)


_MAX_SCALE = 1e6


def _metered(result: CompactionResult, meter: SummarizerMeter) -> CompactionResult:
    """`result` with the summariser calls and characters `meter` counted."""
    return dataclasses.replace(result, summarizer_calls=meter.calls, summarizer_chars=meter.chars)


def _summarizer_name(llm: BaseChatModel | None) -> str:
    """The summariser a recap was written by, as its settings name it (`settings_tag`)."""
    if llm is None:
        return "extractive"
    model = getattr(llm, "model_name", None) or getattr(llm, "model", None)
    return f"{type(llm).__name__}:{model}" if isinstance(model, str) else type(llm).__name__
