"""History compaction: summarise old turns into a recap, keep recent turns verbatim.

`HistoryCompactor` is the contract of seed 002 ("压缩对话历史") plus what long-running
agents need: the recent tail is cut only between whole units (a tool call never loses its
results), a leading system prompt stays first, the summary is extended incrementally
(`RunningSummary`) instead of re-reading old turns, compaction overshoots down to a lower
target (hysteresis) so the prompt prefix stays byte-stable between compactions, and a
failing or empty summary never costs history: the deterministic `ExtractiveSummarizer`
steps in, and when nothing can be summarised the history comes back unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit._checks import check_count, from_known_fields
from langchain_contextkit.errors import ConfigError, ContextWindowExceeded
from langchain_contextkit.messages import (
    find_message_problems,
    message_costs,
    split_system,
    tail_start,
    unit_starts,
)
from langchain_contextkit.prompts import PromptRegistry
from langchain_contextkit.summarizers import (
    ASummarize,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarize,
    compose_extension,
    render_transcript,
    summarizer_from_llm,
)
from langchain_contextkit.tokens import (
    TokenCounter,
    count_message_tokens,
    count_tokens,
    truncate_to_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel

__all__ = [
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

ViewSummarize = Callable[[list[BaseMessage], str], str]
"""`summarize_view(view, instruction) -> summary`: summarise a view in place (see
`HistoryCompactor.compact_view`)."""

AViewSummarize = Callable[[list[BaseMessage], str], Awaitable[str]]
"""Async `ViewSummarize`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionConfig:
    """The serialisable knobs of `HistoryCompactor` (see `HistoryCompactor.from_config`).

    Example:
        ```python
        from langchain_contextkit.compaction import CompactionConfig

        cfg = CompactionConfig.from_dict({"keep_recent": 6})
        assert (cfg.keep_recent, cfg.trigger_tokens) == (6, 2000)
        assert cfg.to_dict()["max_summary_tokens"] == 1000
        ```
    """

    keep_recent: int = 4
    """Recent turns kept verbatim (at least)."""

    trigger_tokens: int = 2000
    """Compact only when the history takes more tokens than this."""

    max_summary_tokens: int = 1000
    """Hard cap of the recap."""

    target_tokens: int | None = None
    """Compact down to this many tokens (default: half the trigger)."""

    def __post_init__(self) -> None:
        """Validate the knobs."""
        check_count("keep_recent", self.keep_recent, minimum=1)
        check_count("trigger_tokens", self.trigger_tokens, minimum=0)
        check_count("max_summary_tokens", self.max_summary_tokens, minimum=1)
        if self.target_tokens is not None:
            check_count("target_tokens", self.target_tokens, minimum=0)
            if self.target_tokens > self.trigger_tokens:
                msg = (
                    f"target_tokens ({self.target_tokens}) must not exceed trigger_tokens "
                    f"({self.trigger_tokens})."
                )
                raise ConfigError(msg)

    def to_dict(self) -> dict[str, Any]:
        """The knobs as a plain dict (JSON- and YAML-friendly)."""
        return dataclasses.asdict(self)

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
    """

    text: str
    covered: int
    last_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain dict for graph state and checkpointers."""
        return {"text": self.text, "covered": self.covered, "last_id": self.last_id}

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
        return cls(text, covered, last_id)

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
    """

    messages: list[BaseMessage]
    summary: RunningSummary | None
    compacted: bool
    summarizer: SummarizerKind | None
    tokens_before: int
    tokens_after: int
    aged_out: int = 0
    error: str | None = None


@dataclass(slots=True)
class _Plan:
    """Everything decided before the summariser runs."""

    system: list[BaseMessage]
    pending: list[BaseMessage]  # messages after the system prefix not yet summarised
    covered: int
    previous: str | None
    current: RunningSummary | None  # the summary in force before this call
    cut: int  # pending[:cut] ages out
    text: str
    instruction: str
    tokens_before: int
    overhead: int
    view: list[BaseMessage]  # the view before this compaction, as the model saw it
    view_instruction: str


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
      comes back unchanged. An error text is never committed as a summary.

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
        trigger_tokens: int = 2000,
        max_summary_tokens: int = 1000,
        summary_prompt: str | None = None,
        prompts: PromptRegistry | None = None,
        token_counter: TokenCounter = count_tokens,
        target_tokens: int | None = None,
        require_human_first: bool = False,
        fallback: bool = True,
    ) -> None:
        """Configure the compactor.

        Args:
            llm: The chat model that writes recaps; None uses the extractive summariser.
            keep_recent: Recent turns kept verbatim, at least (>= 1).
            trigger_tokens: Compact only above this many tokens (>= 0).
            max_summary_tokens: Hard cap of the recap (>= 1).
            summary_prompt: Replaces the default summary instruction (may contain
                ``{max_tokens}``).
            prompts: Recap heading, instructions and language (default English).
            token_counter: Counts the tokens of one string.
            target_tokens: Compact down to this (default `trigger_tokens // 2`).
            require_human_first: The first non-system message must be human (Anthropic,
                Gemini): the recap then goes in a human message when needed.
            fallback: Use the extractive summariser when the LLM or callback fails.

        Raises:
            ConfigError: On an out-of-range knob.
        """
        self.config = CompactionConfig(
            keep_recent=keep_recent,
            trigger_tokens=trigger_tokens,
            max_summary_tokens=max_summary_tokens,
            target_tokens=target_tokens,
        )
        registry = prompts or PromptRegistry()
        if summary_prompt is not None:
            registry = dataclasses.replace(registry, summary_prompt=summary_prompt)
        self.prompts = registry
        self.llm = llm
        self.token_counter = token_counter
        self.require_human_first = require_human_first
        self.fallback = fallback
        self.extractive = ExtractiveSummarizer(max_tokens=max_summary_tokens, counter=token_counter)
        self._llm_summarizer: LLMSummarizer | None = (
            None if llm is None else summarizer_from_llm(llm, registry)
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
            from langchain_contextkit.compaction import CompactionConfig, HistoryCompactor

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
        """Compaction fires above this many tokens."""
        return self.config.trigger_tokens

    @property
    def max_summary_tokens(self) -> int:
        """Hard cap of the recap."""
        return self.config.max_summary_tokens

    @property
    def target_tokens(self) -> int:
        """What a compaction aims for (hysteresis)."""
        target = self.config.target_tokens
        return self.config.trigger_tokens // 2 if target is None else target

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
    ) -> CompactionResult:
        """Compute the view a model should see, extending `summary` when the trigger fires.

        Args:
            history: The full conversation (never modified).
            summary: The running summary from the previous call, if any.
            summarize: A callback used instead of the LLM.
            summarize_view: Tried first when given: `summarize_view(view, instruction)`
                gets the current view unchanged (the request the model saw last, so a
                provider's prompt cache still holds it) and an instruction to summarise
                all but its last turns; it sends both, the instruction last. This keeps
                the summary call cheap on cached providers (deepagents #5319).
            overhead_tokens: Tokens sent beside these messages (tool schemas, a system
                prompt kept elsewhere): they count towards the trigger (langchain #34664).
            ceiling_tokens: A hard limit for the view plus overhead (the window minus the
                output reserve). Going over it forces a compaction, even with few turns.

        Returns:
            The view, the new running summary and what happened.

        Raises:
            ContextWindowExceeded: When even one recent turn and the recap exceed
                `ceiling_tokens` (the history itself is untouched).
        """
        plan = self._plan(history, summary, overhead_tokens, ceiling_tokens)
        if isinstance(plan, CompactionResult):
            return self._within(plan, ceiling_tokens)
        attempts: list[tuple[SummarizerKind, Callable[[], str]]] = []
        if summarize_view is not None:
            view, instruction = plan.view, plan.view_instruction
            attempts.append(("prefix", lambda: summarize_view(view, instruction)))
        transcript = summarize or self._llm_summarizer
        if transcript is not None:
            kind: SummarizerKind = "callback" if summarize is not None else "llm"
            attempts.append((kind, lambda: transcript(plan.text, plan.instruction)))
        if self.fallback or not attempts:
            attempts.append(("extractive", lambda: self.extractive(plan.text, plan.instruction)))
        error: str | None = None
        for kind, attempt in attempts:
            try:
                text = attempt()
            except Exception as exc:  # noqa: BLE001 - a failing summariser must never cost history
                error = self._note_failure(kind, exc)
                continue
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
    ) -> CompactionResult:
        """Async `compact_view` with async callbacks (`asummarize`, `asummarize_view`)."""
        plan = self._plan(history, summary, overhead_tokens, ceiling_tokens)
        if isinstance(plan, CompactionResult):
            return self._within(plan, ceiling_tokens)
        attempts: list[tuple[SummarizerKind, Callable[[], Awaitable[str]]]] = []
        if asummarize_view is not None:
            view, instruction = plan.view, plan.view_instruction
            attempts.append(("prefix", lambda: asummarize_view(view, instruction)))
        if asummarize is not None:
            attempts.append(("callback", lambda: asummarize(plan.text, plan.instruction)))
        elif self._llm_summarizer is not None:
            llm = self._llm_summarizer
            attempts.append(("llm", lambda: llm.asummarize(plan.text, plan.instruction)))
        if self.fallback or not attempts:
            extractive = self.extractive
            attempts.append(
                ("extractive", lambda: extractive.asummarize(plan.text, plan.instruction))
            )
        error: str | None = None
        for kind, attempt in attempts:
            try:
                text = await attempt()
            except Exception as exc:  # noqa: BLE001 - a failing summariser must never cost history
                error = self._note_failure(kind, exc)
                continue
            result = self._finish(plan, text, kind, error, ceiling_tokens)
            if result is not None:
                return result
            error = self._note_failure(kind, None)
        return self._within(self._unchanged(plan, error), ceiling_tokens)

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
    ) -> _Plan | CompactionResult:
        system, rest, previous = self._split_recap(history)
        covered = 0
        if previous is None and summary is not None:
            if _summary_fits(summary, rest):
                previous, covered = summary.text, summary.covered
            else:
                logger.warning(
                    "running summary (covering %d messages) does not match this history; "
                    "ignoring it",
                    summary.covered,
                )
        pending = rest[covered:]
        view = self._view(system, previous, covered, pending)
        before = self._tokens(view, overhead)
        current = summary if previous is not None and summary is not None else None
        if previous is not None and current is None:
            current = RunningSummary(previous, covered, None)

        over_ceiling = ceiling is not None and before > ceiling
        units = len(unit_starts(pending))
        if not over_ceiling and (before <= self.trigger_tokens or units <= self.keep_recent):
            return CompactionResult(
                view,
                current,
                compacted=False,
                summarizer=None,
                tokens_before=before,
                tokens_after=before,
            )

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
            return CompactionResult(
                view,
                current,
                compacted=False,
                summarizer=None,
                tokens_before=before,
                tokens_after=before,
            )

        aged = pending[:cut]
        transcript = render_transcript(aged)
        limit = self.max_summary_tokens
        if previous is None:
            text, instruction = transcript, self.prompts.summary_instruction(max_tokens=limit)
        else:
            text = compose_extension(previous, transcript)
            instruction = self.prompts.extend_instruction(max_tokens=limit)
        view_instruction = self.prompts.view_summary_instruction(
            max_tokens=limit, keep_last=len(pending) - cut
        )
        return _Plan(
            system,
            pending,
            covered,
            previous,
            current,
            cut,
            text,
            instruction,
            before,
            overhead,
            view,
            view_instruction,
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
        if not isinstance(text, str) or not text.strip():
            return None
        recap = truncate_to_tokens(text.strip(), self.max_summary_tokens, self.token_counter)
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
        summary = RunningSummary(recap, covered, last_id if isinstance(last_id, str) else None)
        _assert_no_new_problems(plan.pending, view, require_human_first=self.require_human_first)
        return CompactionResult(
            view,
            summary,
            compacted=True,
            summarizer=kind,
            tokens_before=plan.tokens_before,
            tokens_after=after,
            aged_out=plan.cut,
            error=error,
        )

    def _shrunk(self, recap: str, excess: int) -> str | None:
        """`recap` cut by `excess` tokens and more; None when nothing meaningful is left."""
        target = self.token_counter(recap) - excess - 1
        if target < 1:
            return None
        shorter = truncate_to_tokens(recap, target, self.token_counter)
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


def _is_recap(message: BaseMessage) -> bool:
    return isinstance(message.id, str) and message.id.startswith(RECAP_ID_PREFIX)


def _summary_fits(summary: RunningSummary, rest: Sequence[BaseMessage]) -> bool:
    """Whether `summary` can describe the first `summary.covered` messages of `rest`."""
    if summary.covered > len(rest):
        return False
    if summary.covered == 0 or summary.last_id is None:
        return True
    return rest[summary.covered - 1].id == summary.last_id


def _assert_no_new_problems(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage], *, require_human_first: bool
) -> None:
    """Compaction may keep problems the input had, but must never add one."""
    known = Counter(
        p.code for p in find_message_problems(before, require_human_first=require_human_first)
    )
    found = Counter(
        p.code for p in find_message_problems(after, require_human_first=require_human_first)
    )
    new = found - known  # per problem kind, more than the input had
    if new:  # pragma: no cover - a bug in this module, not a user error
        msg = f"compaction produced an invalid message list: {new}"
        raise AssertionError(msg)
