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

import bisect
import dataclasses
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit._validate import check_count, from_known_fields
from langchain_contextkit.compaction._chunked_summary import (
    fitted_requests,
    run_async,
    run_sync,
    stated_cap,
)
from langchain_contextkit.compaction._history_index import HistoryIndex
from langchain_contextkit.compaction._recap_fit import held_recap
from langchain_contextkit.compaction._recap_grid import WaterMarks, grid_cuts
from langchain_contextkit.compaction.summarizers import (
    ASummarize,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarize,
    check_fidelity,
    reduce_recap,
    render_transcript,
    structured_recap,
    summarizer_from_llm,
)
from langchain_contextkit.errors import ConfigError, ContextWindowExceeded
from langchain_contextkit.messages import (
    CleanScan,
    find_message_problems,
    message_costs,
    split_system,
    tail_start,
    unit_starts,
)
from langchain_contextkit.prompts import Fidelity, PromptRegistry
from langchain_contextkit.tokens import (
    TokenCounter,
    count_message_tokens,
    count_tokens,
)
from langchain_contextkit.window_budget import model_limits

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

    from langchain_core.language_models import BaseChatModel

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

RECAP_ID_PREFIX = "contextkit-recap-"
"""Recap messages carry an id starting with this, so a compacted list fed back in is
recognised and its recap extended, not summarised as if it were a turn."""

_REPLY_PRIMING = 3
SummarizerKind = Literal["prefix", "callback", "llm", "extractive"]

ViewSummarize = Callable[[list[BaseMessage], str], "str | None"]
"""`summarize_view(view, instruction) -> summary`: summarise a view in place (see
`HistoryCompactor.compact_view`); None declines (the request would not fit the model)."""

AViewSummarize = Callable[[list[BaseMessage], str], Awaitable["str | None"]]
"""Async `ViewSummarize`."""


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


@dataclass(frozen=True, slots=True)
class RunningSummary:
    """A recap and how much of the conversation it covers.

    Kept in graph state between turns, so the next compaction summarises only the newly
    aged-out messages together with this text.

    Attributes:
        text: The recap, without its heading.
        covered: How many messages after the leading system messages it replaces.
        last_id: Id of the last covered message, when it had one: a history that no
            longer matches (edited, or a different thread) is detected and the summary
            ignored rather than misapplied.
        digest: A digest of the covered messages' content, when known (a window-sized
            compaction records it): checked instead of `last_id`, so a caller that
            re-sends the history with new ids still matches.
        floor: The extractive recap of the same messages, when the recap is a model's:
            what the next model recap may not keep fewer facts than. It is extended from
            itself, never from the model's recap (which may carry a verbose reply's
            copied lines); None when the recap is extractive (it is its own floor).
    """

    text: str
    covered: int
    last_id: str | None = None
    digest: str | None = None
    floor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain dict for graph state and checkpointers."""
        data: dict[str, Any] = {"text": self.text, "covered": self.covered, "last_id": self.last_id}
        if self.digest is not None:
            data["digest"] = self.digest
        if self.floor is not None:
            data["floor"] = self.floor
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunningSummary:
        """Rebuild from `to_dict` output.

        Raises:
            ConfigError: If a field is missing or has the wrong type.
        """
        text, covered, last_id = data.get("text"), data.get("covered"), data.get("last_id")
        if not isinstance(text, str) or not isinstance(covered, int) or covered < 0:
            msg = f"not a RunningSummary dict: {dict(data)!r}"
            raise ConfigError(msg)
        if last_id is not None and not isinstance(last_id, str):
            msg = f"RunningSummary last_id must be a str or None, got {last_id!r}"
            raise ConfigError(msg)
        digest = data.get("digest")
        if digest is not None and not isinstance(digest, str):
            msg = f"RunningSummary digest must be a str or None, got {digest!r}"
            raise ConfigError(msg)
        floor = data.get("floor")
        if floor is not None and not isinstance(floor, str):
            msg = f"RunningSummary floor must be a str or None, got {floor!r}"
            raise ConfigError(msg)
        return cls(text, covered, last_id, digest, floor)

    @classmethod
    def from_state(cls, stored: object) -> RunningSummary | None:
        """Rebuild what a graph keeps in state: None when nothing is stored there yet."""
        return cls.from_dict(stored) if isinstance(stored, Mapping) and stored else None


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction call did.

    Attributes:
        messages: The view the model should see: system prefix, recap, recent tail.
        summary: The running summary after this call (None when there is none yet).
        compacted: True when this call made a new summary.
        summarizer: Which summariser produced it (None when none ran or all failed).
        tokens_before: The view's tokens (plus overhead) before this call.
        tokens_after: The returned view's tokens (plus overhead).
        aged_out: Messages newly folded into the summary.
        error: Why a summariser failed, when one did (the fallback then took over).
        fidelity: The tier the new recap was written at (`CompactionConfig.fidelity`, or
            a lower one when the recap had to step down to fit); None when no new recap
            was made or its summariser's format is its own (a callback's prose).
    """

    messages: list[BaseMessage]
    summary: RunningSummary | None
    compacted: bool
    summarizer: SummarizerKind | None
    tokens_before: int
    tokens_after: int
    aged_out: int = 0
    error: str | None = None
    fidelity: Fidelity | None = None


@dataclass(slots=True)
class _Plan:
    """Everything decided before the summariser runs."""

    system: list[BaseMessage]
    pending: list[BaseMessage]  # messages after the system prefix not yet summarised
    covered: int
    previous: str | None
    current: RunningSummary | None  # the summary in force before this call
    cut: int  # pending[:cut] ages out
    tokens_before: int
    overhead: int
    view: list[BaseMessage]  # the view before this compaction, as the model saw it
    cap: int  # the recap's cap for this call
    digest: str | None = None  # names pending[:cut] with what precedes it (sized plans)
    summarizer_window: int | None = None  # the transcript summariser's window, when known
    # Sized plans: the grid's cuts inside pending[:cut] (the last is `cut`), each with the
    # digest of what it covers; a chain of recaps walks them in order.
    cuts: tuple[int, ...] = ()
    cut_digests: tuple[str | None, ...] = ()
    fidelity: Fidelity | None = None  # the tier the extractive recap was written at
    cap_scale: float = 1.0  # the summariser's tokens per counter token (the stated cap)
    floor: str | None = None  # the extractive recap of this plan, once made: a model's floor
    previous_floor: str | None = None  # the floor in force (None: `previous` is its own)

    def epochs(self) -> list[tuple[int, int, str | None]]:
        """`(start, end, digest)` of each epoch in pending: one, unless the grid has more."""
        if not self.cuts:
            return [(0, self.cut, self.digest)]
        starts = (0, *self.cuts[:-1])
        return list(zip(starts, self.cuts, self.cut_digests, strict=True))


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
        self._recaps = _RecapMemo()
        self._floors = _RecapMemo()  # the floors of model recaps, by the same digests
        self._index = HistoryIndex(token_counter)

    def known_history(self, messages: Sequence[BaseMessage]) -> tuple[int, CleanScan | None] | None:
        """Tokens of `messages` (no reply priming) and the message rules' state at their end.

        Known, without a pass over them, when they end the history this thread compacted
        last (the same objects, as that call indexed them): the cost is a difference of
        the running totals kept for it, and the state is the one its check ended in (None
        when that history broke a rule, or `messages` does not start on a unit). None
        when they are not such a suffix.
        """
        if not messages:
            return 0, None
        known = self._index.suffix(messages)
        if known is None:
            return None
        arrays, start = known
        return arrays.cost(start), arrays.clean_from(start)

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
        """What a compaction aims for (hysteresis)."""
        target = self.config.target_tokens
        return self.trigger_tokens // 2 if target is None else target

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
        return (await self.acompact_view(history, asummarize=asummarize)).messages

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

        Returns:
            The view, the new running summary and what happened.

        Raises:
            ContextWindowExceeded: When even one recent turn and the recap exceed
                `ceiling_tokens` (the history itself is untouched).
        """
        plan = self._plan(
            history, summary, overhead_tokens, ceiling_tokens, room_tokens, reuse=reuse_recaps
        )
        if isinstance(plan, CompactionResult):
            return self._within(plan, ceiling_tokens)
        plan.summarizer_window = self._summarizer_window(summarizer_window)
        plan.cap_scale = _checked_scale(cap_scale)
        attempts: list[tuple[SummarizerKind, Callable[[], str | None]]] = []
        if summarize_view is not None and len(plan.epochs()) == 1:
            # In place only for one epoch: a chain of several is summarised epoch by epoch,
            # so that its recap is the same whichever call (or process) makes it.
            view, instruction = plan.view, self._view_instruction(plan)
            attempts.append(("prefix", lambda: summarize_view(view, instruction)))
        transcript = summarize or self._llm_summarizer
        if transcript is not None:
            kind: SummarizerKind = "callback" if summarize is not None else "llm"
            asked = kind == "llm" and self.prompts.summary_prompt is None
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
            result = self._finish(plan, text, kind, error, ceiling_tokens)
            if result is not None:
                return result
            error = self._note_failure(kind, None)
        return self._within(self._unchanged(plan, error), ceiling_tokens)

    async def acompact_view(
        self,
        history: Sequence[BaseMessage],
        *,
        summary: RunningSummary | None = None,
        asummarize: ASummarize | None = None,
        asummarize_view: AViewSummarize | None = None,
        overhead_tokens: int = 0,
        ceiling_tokens: int | None = None,
        room_tokens: int | None = None,
        summarizer_window: int | None = None,
        reuse_recaps: bool = True,
        cap_scale: float = 1.0,
    ) -> CompactionResult:
        """Async `compact_view` with async callbacks (`asummarize`, `asummarize_view`)."""
        plan = self._plan(
            history, summary, overhead_tokens, ceiling_tokens, room_tokens, reuse=reuse_recaps
        )
        if isinstance(plan, CompactionResult):
            return self._within(plan, ceiling_tokens)
        plan.summarizer_window = self._summarizer_window(summarizer_window)
        plan.cap_scale = _checked_scale(cap_scale)
        attempts: list[tuple[SummarizerKind, Callable[[], Awaitable[str | None]]]] = []
        if asummarize_view is not None and len(plan.epochs()) == 1:
            # In place only for one epoch: a chain of several is summarised epoch by epoch,
            # so that its recap is the same whichever call (or process) makes it.
            view, instruction = plan.view, self._view_instruction(plan)
            attempts.append(("prefix", lambda: asummarize_view(view, instruction)))
        if asummarize is not None:
            callback = asummarize
            attempts.append(("callback", lambda: self._achain(plan, callback)))
        elif self._llm_summarizer is not None:
            llm = self._llm_summarizer
            asked = self.prompts.summary_prompt is None
            attempts.append(("llm", lambda: self._achain(plan, llm.asummarize, asked=asked)))
        if self.fallback or not attempts:
            extractive = _as_async(self._extractive_for(plan))
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
            result = self._finish(plan, text, kind, error, ceiling_tokens)
            if result is not None:
                return result
            error = self._note_failure(kind, None)
        return self._within(self._unchanged(plan, error), ceiling_tokens)

    # -- summariser requests ----------------------------------------------------------

    def _summarizer_window(self, given: int | None) -> int | None:
        """The transcript summariser's window: set here, its profile's, else the caller's."""
        if self.summarizer_window is not None:
            return self.summarizer_window
        stated = model_limits(self.llm)[0] if self.llm is not None else None
        return stated if stated is not None else given

    def _extractive_for(self, plan: _Plan) -> Summarize:
        """The extractive summariser, choosing its lines for this call's recap cap.

        Choosing for `max_summary_tokens` and then cutting to a smaller cap would keep the
        first lines, not the best ones: the latest turns' facts would be cut off. The
        tier each recap was written at is noted on `plan`.
        """
        extractive = self.extractive
        if plan.cap < extractive.max_tokens:
            extractive = dataclasses.replace(extractive, max_tokens=max(1, plan.cap))

        def summarize(text: str, instruction: str) -> str:  # noqa: ARG001 - the callback's shape
            recap, plan.fidelity = extractive.recap(text)
            return recap

        return summarize

    def _chain(
        self,
        plan: _Plan,
        summarize: Summarize,
        *,
        extractive: bool = False,
        asked: bool = False,
        remember: bool = True,
        floor: bool = False,
    ) -> str:
        """The recap after every epoch of `plan`, each extending the one before.

        `extractive`: the extractive summariser (its requests are not sized, and nothing
        salient is a valid recap). `asked`: a model was asked for the recap's sections
        (see `_structured`). `remember`: keep each intermediate recap in the memo.
        `floor`: the chain of a model recap's floor (it extends the floor in force).
        """
        previous = self._previous(plan, floor=floor)
        for start, end, digest in plan.epochs():
            requests = self._requests(plan, plan.pending[start:end], previous, sized=not extractive)
            text = run_sync(requests, summarize)
            previous = self._carried(
                self._epoch_recap(
                    text, digest, end, plan, asked=asked, extractive=extractive, remember=remember
                )
            )
        return previous or ""

    async def _achain(
        self,
        plan: _Plan,
        asummarize: ASummarize,
        *,
        extractive: bool = False,
        asked: bool = False,
    ) -> str:
        """Async `_chain`."""
        previous = self._previous(plan)
        for start, end, digest in plan.epochs():
            requests = self._requests(plan, plan.pending[start:end], previous, sized=not extractive)
            text = await run_async(requests, asummarize)
            previous = self._carried(
                self._epoch_recap(text, digest, end, plan, asked=asked, extractive=extractive)
            )
        return previous or ""

    def _previous(self, plan: _Plan, *, floor: bool = False) -> str | None:
        """The recap a chain extends: none when the one in force kept nothing.

        `floor`: the floor's chain extends the floor in force, not the model's recap.
        """
        if floor and plan.previous_floor is not None:
            return self._carried(plan.previous_floor)
        return self._carried(plan.previous)

    def _carried(self, recap: str | None) -> str | None:
        """`recap` as the next epoch extends it: None when it kept nothing.

        An empty recap read back would keep its count of messages as a fact.
        """
        return None if recap is None or self.prompts.is_empty_recap(recap) else recap

    def _epoch_recap(
        self,
        text: str,
        digest: str | None,
        end: int,
        plan: _Plan,
        *,
        asked: bool,
        extractive: bool = False,
        remember: bool = True,
    ) -> str:
        """An intermediate epoch's recap, held to the cap and remembered; the last is returned."""
        if end == plan.cut:
            return text  # `_finish` checks, holds and remembers the final recap
        if not text.strip():
            if not extractive:
                msg = "the summariser returned no text"
                raise ValueError(msg)
            # Nothing salient in this span: a small recap that says so, not a failure.
            text = self._empty_recap(plan, end)
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
        recap = self._reduced(text, plan.cap)
        if digest is not None and remember:
            self._recaps.put(digest, recap)
        return recap

    def _requests(
        self,
        plan: _Plan,
        aged: Sequence[BaseMessage],
        previous: str | None,
        *,
        sized: bool,
    ) -> Generator[list[tuple[str, str]], list[str], str]:
        """The summariser requests for one epoch: one when it fits, else map-reduce."""
        return fitted_requests(
            [render_transcript([message]) for message in aged],
            previous,
            window=plan.summarizer_window if sized else None,
            cap=plan.cap,
            prompts=self.prompts,
            counter=self.token_counter,
            fidelity=self.fidelity,
            cap_scale=plan.cap_scale,
        )

    # -- internals ------------------------------------------------------------------------

    def _tokens(self, messages: Sequence[BaseMessage], overhead: int) -> int:
        return (
            count_message_tokens(messages, self.token_counter) + overhead if messages else overhead
        )

    def _recap(self, text: str, covered: int, *, as_human: bool) -> BaseMessage:
        content = f"{self.prompts.heading('recap')} {text}"
        recap_id = f"{RECAP_ID_PREFIX}{covered}"
        return (
            HumanMessage(content, id=recap_id) if as_human else SystemMessage(content, id=recap_id)
        )

    def _recap_as_human(self, tail: Sequence[BaseMessage]) -> bool:
        return self.require_human_first and not (tail and isinstance(tail[0], HumanMessage))

    def _view(
        self, system: list[BaseMessage], text: str | None, covered: int, tail: list[BaseMessage]
    ) -> list[BaseMessage]:
        if text is None:
            return [*system, *tail]
        return [*system, self._recap(text, covered, as_human=self._recap_as_human(tail)), *tail]

    def _split_recap(
        self, history: Sequence[BaseMessage]
    ) -> tuple[list[BaseMessage], list[BaseMessage], str | None]:
        """System prefix, the rest, and the text of a recap found in `history` (if any)."""
        system, rest = split_system(history)
        previous: str | None = None
        kept_system: list[BaseMessage] = []
        for message in system:
            if _is_recap(message):
                previous = self._recap_text(message)
            else:
                kept_system.append(message)
        if rest and _is_recap(rest[0]):
            previous = self._recap_text(rest[0])
            rest = rest[1:]
        return kept_system, rest, previous

    def _recap_text(self, message: BaseMessage) -> str:
        heading = f"{self.prompts.heading('recap')} "
        text = message.text
        return text.removeprefix(heading)

    def _plan(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        overhead: int,
        ceiling: int | None,
        room: int | None = None,
        *,
        reuse: bool = True,
    ) -> _Plan | CompactionResult:
        if room is not None and self.sized_by_window:
            return self._plan_sized(history, summary, overhead, ceiling, room, reuse=reuse)
        system, rest, previous = self._split_recap(history)
        covered = 0
        if previous is None and summary is not None:
            previous, covered = self._summary_in_force(summary, rest, None)
        pending = rest[covered:]
        view = self._view(system, previous, covered, pending)
        before = self._tokens(view, overhead)
        current = summary if previous is not None and summary is not None else None
        if previous is not None and current is None:
            current = RunningSummary(previous, covered, None)

        over_ceiling = ceiling is not None and before > ceiling
        units = len(unit_starts(pending))
        if not over_ceiling and (before <= self.trigger_tokens or units <= self.keep_recent):
            return _as_is(view, current, before)

        costs = message_costs(pending, self.token_counter)
        recap_reserve = self.max_summary_tokens + count_message_tokens(
            [SystemMessage(self.prompts.heading("recap"))], self.token_counter, reply_priming=False
        )
        fixed = self._tokens(system, overhead) + (0 if system else _REPLY_PRIMING) + recap_reserve
        target = self.target_tokens if ceiling is None else min(self.target_tokens, ceiling)
        cut = tail_start(pending, target - fixed, costs=costs, min_units=self.keep_recent)
        if ceiling is not None and fixed + sum(costs[cut:]) > ceiling:
            # The kept turns alone would overflow the window: keep fewer (at least one).
            cut = tail_start(pending, ceiling - fixed, costs=costs, min_units=1)
        if cut == 0:
            return _as_is(view, current, before)

        return _Plan(
            system,
            pending,
            covered,
            previous,
            current,
            cut,
            before,
            overhead,
            view,
            cap=self.max_summary_tokens,
            previous_floor=None if current is None else current.floor,
        )

    def _view_instruction(self, plan: _Plan) -> str:
        """The in-place summary's instruction: all of the view but its kept tail."""
        return self.prompts.view_summary_instruction(
            max_tokens=stated_cap(plan.cap, plan.cap_scale),
            keep_last=len(plan.pending) - plan.cut,
            fidelity=self.fidelity,
        )

    def marks(self, room: int) -> WaterMarks:
        """The high- and low-water marks of a history room of `room` tokens (sized mode)."""
        marks = WaterMarks.for_room(room, max_summary_tokens=self.max_summary_tokens)
        target = self.config.target_tokens
        if target is not None and target < marks.high:
            marks = dataclasses.replace(marks, low=target)
        return marks

    def _summary_in_force(
        self, summary: RunningSummary, rest: Sequence[BaseMessage], digests: Sequence[str] | None
    ) -> tuple[str | None, int]:
        """The state's summary and what it covers, or nothing when it does not match."""
        if _summary_fits(summary, rest, digests):
            return summary.text, summary.covered
        logger.warning(
            "running summary (covering %d messages) does not match this history; ignoring it",
            summary.covered,
        )
        return None, 0

    def _latest_known(self, cuts: Sequence[int], digests: Sequence[str]) -> tuple[str, int] | None:
        """A recap this process already made for the latest possible cut, and that cut.

        A caller that re-sends the whole list and keeps no state gets the same text, so
        the same prefix, as the call that made it.
        """
        if not self._recaps:  # nothing made yet (a window that never compacted)
            return None
        # Every unit start is tried, newest first; the search runs in C (most are misses).
        newest_first = map(digests.__getitem__, reversed(cuts))
        digest = next(filter(self._recaps.known.__contains__, newest_first), None)
        text = None if digest is None else self._recaps.get(digest)
        if digest is None or text is None:
            return None
        return text, next(c for c in reversed(cuts) if digests[c] == digest)

    def _plan_sized(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        overhead: int,
        ceiling: int | None,
        room: int,
        *,
        reuse: bool = True,
    ) -> _Plan | CompactionResult:
        """Plan a window-sized compaction: cuts on the history's own grid (module docs)."""
        system, rest, previous = self._split_recap(history)
        marks = self.marks(room)
        # Costs, unit starts and digests of the history, extended by what is new since
        # the last call on it (`_history_index`), not recomputed from its start.
        arrays = self._index.arrays(rest)
        costs, starts = arrays.costs, arrays.starts
        # A recap inside the list (a compacted list fed back) has no content address.
        digests = arrays.digests if previous is None else None
        base = 0
        previous_floor: str | None = None
        if previous is None and summary is not None:
            previous, base = self._summary_in_force(summary, rest, digests)
            previous_floor = summary.floor if previous is not None else None
        if digests is not None and reuse:
            # A recap this process made for a later point (a caller that re-sends the whole
            # list and keeps no state): any unit start, as a call whose turn did not fit
            # may have cut off the grid (forced), and its checkpointed twin went on from there.
            known = self._latest_known(starts[bisect.bisect_right(starts, base) :], digests)
            if known is not None:
                previous, base = known
                previous_floor = self._floors.get(digests[base])
        heading = count_message_tokens(
            [SystemMessage(self.prompts.heading("recap"))], self.token_counter, reply_priming=False
        )
        fixed = self._tokens(system, 0) + (0 if system else _REPLY_PRIMING) + marks.recap + heading
        limit = None if ceiling is None else ceiling - overhead

        def cuts_from(start: int, *, forced: bool) -> list[int]:
            return grid_cuts(
                costs,
                starts,
                base=start,
                fixed=fixed,
                marks=marks,
                min_units=1 if forced else self.keep_recent,
                limit=limit,
                settled=not forced,
                totals=arrays.totals,
                unit_totals=arrays.unit_totals,
            )

        cuts = cuts_from(base, forced=False)
        end = cuts[-1] if cuts else base
        if limit is not None and fixed + arrays.cost(end) > limit:
            # The window wins over keep_recent and the grid's settling for this call.
            cuts += cuts_from(end, forced=True)
        target = cuts[-1] if cuts else base
        pending = rest[base:]
        view = self._view(system, previous, base, pending)
        # The view's head (system prefix, recap) is counted; its tail is the history's own.
        head = view[: len(view) - len(pending)]
        before = (
            count_message_tokens(head, self.token_counter, reply_priming=False)
            + arrays.cost(base)
            + (_REPLY_PRIMING if view else 0)
            + overhead
        )
        current = None
        if previous is not None:
            current = RunningSummary(
                previous,
                base,
                _last_id(rest, base),
                None if digests is None else digests[base],
                previous_floor,
            )
        if target == base:
            return _as_is(view, current, before)
        return _Plan(
            system,
            pending,
            base,
            previous,
            current,
            target - base,
            before,
            overhead,
            view,
            cap=marks.recap,
            digest=None if digests is None else digests[target],
            cuts=tuple(c - base for c in cuts),
            cut_digests=tuple(None if digests is None else digests[c] for c in cuts),
            previous_floor=previous_floor,
        )

    def _finish(
        self,
        plan: _Plan,
        text: object,
        kind: SummarizerKind,
        error: str | None,
        ceiling: int | None,
    ) -> CompactionResult | None:
        """Commit a summary; None when the summariser gave nothing usable."""
        if kind == "extractive" and (not isinstance(text, str) or not text.strip()):
            # Nothing salient in the aged span: a small recap that says so, not a failure.
            text = self._empty_recap(plan, plan.cut)
        if not isinstance(text, str) or not text.strip():
            return None
        text, fidelity = self._structured(plan, text, kind)
        if text is None:
            return None  # a placeholder or broken sections from a model: the fallback's turn
        recap = self._reduced(text, plan.cap)
        if not any(ch.isalnum() for ch in recap):
            return None  # nothing but an ellipsis or punctuation: a placeholder, not a summary
        covered = plan.covered + plan.cut
        tail = plan.pending[plan.cut :]
        view = self._view(plan.system, recap, covered, tail)
        after = self._tokens(view, plan.overhead)
        if ceiling is not None and after > ceiling:
            # The window wins over the recap's own cap: a shorter recap, not a failed call.
            shorter = self._shrunk(recap, after - ceiling)
            if shorter is not None:
                recap = shorter
                view = self._view(plan.system, recap, covered, tail)
                after = self._tokens(view, plan.overhead)
        if ceiling is not None and after > ceiling:
            msg = (
                f"after compaction the request still takes {after} tokens, more than the "
                f"ceiling of {ceiling}: the most recent turn alone does not fit"
            )
            raise ContextWindowExceeded(msg, required=after, budget=ceiling)
        last_id = plan.pending[plan.cut - 1].id
        # A model's recap carries its floor forward; an extractive recap is its own.
        floor = None if kind == "extractive" else (plan.floor or None)
        summary = RunningSummary(
            recap, covered, last_id if isinstance(last_id, str) else None, plan.digest, floor
        )
        if _new_problems(plan.pending, view, require_human_first=self.require_human_first):
            return None  # logged; the next summariser's turn, else the history unchanged
        self._remember(plan.digest, recap, floor)
        return CompactionResult(
            view,
            summary,
            compacted=True,
            summarizer=kind,
            tokens_before=plan.tokens_before,
            tokens_after=after,
            aged_out=plan.cut,
            error=error,
            fidelity=fidelity,
        )

    def _remember(self, digest: str | None, recap: str, floor: str | None) -> None:
        """Keep a committed recap (and a model recap's floor) by the digest it covers."""
        if digest is None:
            return
        self._recaps.put(digest, recap)
        if floor is not None:
            self._floors.put(digest, floor)

    def _structured(
        self, plan: _Plan, text: str, kind: SummarizerKind
    ) -> tuple[str | None, Fidelity | None]:
        """A summariser's text as the recap, and the tier used (`structured_recap`).

        Sections come back canonical and prose as written. A model asked for the sections
        (our own instruction) that replies with a placeholder or broken sections is
        refused (None). A callback, or a model following a custom `summary_prompt`, may
        write its own format: its text stands as written unless it is structured. Either
        is then held to the cap by score with the extractive recap's user items and
        decisions it lacks added back (`_recap_fit.held_recap`).
        """
        if kind == "extractive":
            return text, plan.fidelity
        fitted = structured_recap(
            text,
            max_tokens=_UNCAPPED,
            fidelity=self.fidelity,
            prompts=self.prompts,
            counter=self.token_counter,
        )
        if fitted is None:
            asked = kind == "prefix" or (kind == "llm" and self.prompts.summary_prompt is None)
            if asked:
                logger.warning("the %s summariser's reply is a placeholder or broken", kind)
                return None, None
            fitted = text.strip(), None
        return held_recap(
            fitted[0],
            fitted[1],
            floor=self._floor(plan),
            max_tokens=plan.cap,
            prompts=self.prompts,
            counter=self.token_counter,
            fidelity=self.fidelity,
        )

    def _empty_recap(self, plan: _Plan, end: int) -> str:
        """The recap of `plan`'s messages up to `end` when none was worth keeping.

        "" when even that does not fit the cap (a cap of a few tokens).
        """
        text = self.prompts.empty_recap(plan.covered + end)
        return text if self.token_counter(text) <= plan.cap else ""

    def _reduced(self, text: str, cap: int) -> str:
        """`text` within `cap`, reduced by score (`summarizers.reduce_recap`), never cut."""
        return reduce_recap(text.strip(), cap, prompts=self.prompts, counter=self.token_counter)

    def _floor(self, plan: _Plan) -> str:
        """The extractive recap of `plan` (made once): what a model's recap must not lose."""
        if plan.floor is None:
            tier = plan.fidelity  # `_extractive_for` notes its tier; this is no recap yet
            plan.floor = self._chain(
                plan, self._extractive_for(plan), extractive=True, remember=False, floor=True
            )
            plan.fidelity = tier
        return plan.floor

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

        Reached when no new summary was made. Over the window, sending would fail at the
        provider and dropping turns without a summary would lose them silently: the
        previous recap is cut to fit if that suffices, else the caller decides.
        """
        if ceiling is None or result.tokens_after <= ceiling:
            return result
        summary = result.summary
        recap_at = next((i for i, m in enumerate(result.messages) if _is_recap(m)), None)
        if summary is not None and recap_at is not None:
            shorter = self._shrunk(summary.text, result.tokens_after - ceiling)
            if shorter is not None:
                old = result.messages[recap_at]
                view = list(result.messages)
                view[recap_at] = self._recap(
                    shorter, summary.covered, as_human=isinstance(old, HumanMessage)
                )
                overhead = result.tokens_after - self._tokens(result.messages, 0)
                after = self._tokens(view, overhead)
                if after <= ceiling:
                    return dataclasses.replace(
                        result,
                        messages=view,
                        summary=dataclasses.replace(summary, text=shorter),
                        compacted=True,
                        tokens_after=after,
                    )
        reason = result.error or "no turn could age out"
        msg = (
            f"the request takes {result.tokens_after} tokens, more than the ceiling of "
            f"{ceiling}, and compaction could not shrink it ({reason})"
        )
        raise ContextWindowExceeded(msg, required=result.tokens_after, budget=ceiling)

    def _unchanged(self, plan: _Plan, error: str | None) -> CompactionResult:
        view = self._view(plan.system, plan.previous, plan.covered, plan.pending)
        logger.warning("no summary could be made; the history is kept unchanged (%s)", error)
        return CompactionResult(
            view,
            plan.current,
            compacted=False,
            summarizer=None,
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_before,
            error=error,
        )

    @staticmethod
    def _note_failure(kind: SummarizerKind, exc: Exception | None) -> str:
        if exc is None:
            message = f"the {kind} summariser returned no text"
        else:
            message = f"the {kind} summariser failed: {type(exc).__name__}: {exc}"
        logger.warning("%s", message)
        return message


_UNCAPPED = 10**9
"""A cap no reply reaches: `structured_recap` reads a reply; `held_recap` then holds it."""


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


def _as_async(summarize: Summarize) -> ASummarize:
    """A sync summariser without I/O as its async twin."""

    async def asummarize(text: str, instruction: str) -> str:
        return summarize(text, instruction)

    return asummarize


def _is_recap(message: BaseMessage) -> bool:
    return isinstance(message.id, str) and message.id.startswith(RECAP_ID_PREFIX)


def _as_is(
    view: list[BaseMessage], current: RunningSummary | None, tokens: int
) -> CompactionResult:
    """The view unchanged: no summary was made in this call."""
    return CompactionResult(
        view, current, compacted=False, summarizer=None, tokens_before=tokens, tokens_after=tokens
    )


def _summary_fits(
    summary: RunningSummary, rest: Sequence[BaseMessage], digests: Sequence[str] | None = None
) -> bool:
    """Whether `summary` can describe the first `summary.covered` messages of `rest`."""
    if summary.covered > len(rest):
        return False
    if summary.digest is not None and digests is not None:
        return digests[summary.covered] == summary.digest
    if summary.covered == 0 or summary.last_id is None:
        return True
    return rest[summary.covered - 1].id == summary.last_id


def _last_id(rest: Sequence[BaseMessage], covered: int) -> str | None:
    last = rest[covered - 1].id if covered else None
    return last if isinstance(last, str) else None


class _RecapMemo:
    """Recaps by the digest of what they cover: bounded, shared across threads."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._items: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> str | None:
        # A miss (the common case: every unit start is tried) needs no lock: a dict read
        # is atomic. A hit is moved to the end under the lock, as the most recent.
        if digest not in self._items:
            return None
        with self._lock:
            text = self._items.get(digest)
            if text is not None:
                self._items.move_to_end(digest)
            return text

    def __len__(self) -> int:
        return len(self._items)

    @property
    def known(self) -> Mapping[str, str]:
        """The recaps by digest, for membership tests (read without the lock)."""
        return self._items

    def put(self, digest: str, text: str) -> None:
        with self._lock:
            self._items[digest] = text
            self._items.move_to_end(digest)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def _new_problems(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage], *, require_human_first: bool
) -> bool:
    """Whether the view has a problem the input had not (logged; such a view is not sent).

    Compaction may keep problems the input had, but must never add one.
    """
    known = Counter(
        p.code for p in find_message_problems(before, require_human_first=require_human_first)
    )
    found = Counter(
        p.code for p in find_message_problems(after, require_human_first=require_human_first)
    )
    new = found - known  # per problem kind, more than the input had
    if new:
        logger.warning("compaction produced an invalid message list (%s): not used", dict(new))
    return bool(new)
