"""What every trajectory reducer shares: `ReducerConfig`, the summariser adapter, budget checks.

A reducer summarises with any `SummarizerLike` (an async or sync `(text, instruction)`
callback, an LLM summariser or the extractive one), within the room its budget leaves,
and raises `ContextWindowExceeded` when what must be kept already exceeds the budget.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_contextkit.compaction._chunked_summary import (
    SAFETY,
    fitted_requests,
    run_async,
    run_sync,
)
from langchain_contextkit.compaction.summarizers import (
    ASummarize,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarize,
    check_fidelity,
)
from langchain_contextkit.errors import ContextWindowExceeded, check_count, from_known_fields
from langchain_contextkit.prompts import Fidelity  # noqa: TC001 - config.py reads the hints at run time
from langchain_contextkit.retrieval._async import run_sync as run_awaitable
from langchain_contextkit.tokens.count import (
    TokenCounter,
    count_tokens,
    model_limits,
    truncate_to_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Generator, Mapping

    from langchain_contextkit.compaction._chunked_summary import Requests
    from langchain_contextkit.prompts import PromptRegistry


logger = logging.getLogger(__name__)

__all__ = ["ReducerConfig", "SummarizerLike", "SummaryCall", "arun_steps", "run_steps", "tokens_of"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReducerConfig:
    """How much recent text the reducers keep verbatim (seed 002's table).

    The trajectory's token budget is not here: it comes from the window ledger
    (`WindowBudget.trajectory_budget`), so the parts can never add up past the window.

    Example:
        ```python
        from langchain_contextkit.reducers.base import ReducerConfig

        cfg = ReducerConfig()
        assert (cfg.agent_keep_recent_steps, cfg.plan_keep_recent) == (3, 3)
        assert ReducerConfig.from_dict(cfg.to_dict()) == cfg
        ```
    """

    agent_keep_recent_steps: int = 3
    """Tool-loop units (an AI message with its tool results) kept verbatim at the end."""

    plan_keep_recent: int = 3
    """Plan step results kept verbatim at the end."""

    fidelity: Fidelity = "medium"
    """What a summary of older steps keeps: ``"high"`` details and exact wording,
    ``"medium"`` every key fact and conclusion, ``"low"`` only conclusions and key
    numbers (a summary that does not fit its room steps down a tier first)."""

    def __post_init__(self) -> None:
        """Validate the knobs."""
        check_fidelity(self.fidelity)
        for name in ("agent_keep_recent_steps", "plan_keep_recent"):
            check_count(name, getattr(self, name), minimum=0)

    def to_dict(self) -> dict[str, Any]:
        """The knobs as a plain dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReducerConfig:
        """Build from a dict; an unknown key is an error that names it.

        Raises:
            ConfigError: On an unknown key or an invalid value.
        """
        return from_known_fields(cls, data)


def tokens_of(*texts: str, counter: TokenCounter = count_tokens) -> int:
    """Estimate the total tokens of several texts.

    Example:
        ```python
        from langchain_contextkit.reducers.base import tokens_of

        assert tokens_of("hello world", "你好世界") == 7
        ```
    """
    return sum(counter(text) for text in texts)


SummarizerLike = ASummarize | Summarize | LLMSummarizer | ExtractiveSummarizer
"""An async or sync `summarize(text, instruction) -> str`, or a summariser object."""


def _extractive(
    room: int, counter: TokenCounter, registry: PromptRegistry, fidelity: Fidelity
) -> ExtractiveSummarizer:
    return ExtractiveSummarizer(
        max_tokens=max(1, room), counter=counter, prompts=registry, fidelity=fidelity
    )


@dataclass(frozen=True, slots=True)
class SummaryCall:
    """One summary a reducer needs: `summarize(text, instruction)`, or chunked requests.

    A step of a reducer's generator (see `run_steps`): the sync driver calls the sync
    side of the summariser, the async driver its async side.
    """

    summarize: SummarizerLike
    text: str
    instruction: str
    requests: Requests | None = None
    """The map-reduce requests of a text too long for an LLM summariser's window."""

    def run(self) -> str:
        """The summary, with the summariser's sync side (the objects' ``__call__``)."""
        if self.requests is not None:
            return run_sync(self.requests, cast("Summarize", self.summarize))
        result = self.summarize(self.text, self.instruction)
        if inspect.isawaitable(result):  # an async callback handed to a sync reducer
            result = run_awaitable(result)
        return result if isinstance(result, str) else ""

    async def arun(self) -> str:
        """The summary, with the summariser's async side."""
        summarize = self.summarize
        if isinstance(summarize, (LLMSummarizer, ExtractiveSummarizer)):
            if self.requests is not None:
                return await run_async(self.requests, summarize.asummarize)
            return await summarize.asummarize(self.text, self.instruction)
        result = summarize(self.text, self.instruction)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, str) else ""


_T = TypeVar("_T")


def run_steps(steps: Generator[Any, Any, _T]) -> _T:
    """Drive a generator of steps with their sync I/O (no event loop is started).

    A step is anything with ``run()`` and ``arun()``; an error a step raises is thrown
    into the generator, which decides what it survives.
    """
    try:
        step = next(steps)
        while True:
            try:
                answer = step.run()
            except Exception as error:  # noqa: BLE001, PERF203 - the generator decides
                step = steps.throw(error)
            else:
                step = steps.send(answer)
    except StopIteration as done:
        return cast("_T", done.value)


async def arun_steps(steps: Generator[Any, Any, _T]) -> _T:
    """Drive a generator of steps with their async I/O."""
    try:
        step = next(steps)
        while True:
            try:
                answer = await step.arun()
            except Exception as error:  # noqa: BLE001, PERF203 - the generator decides
                step = steps.throw(error)
            else:
                step = steps.send(answer)
    except StopIteration as done:
        return cast("_T", done.value)


def _fits(text: str, instruction: str, room: int, window: int, counter: TokenCounter) -> bool:
    """Whether one summariser request (text, instruction, the answer) fits `window`."""
    return counter(text) + counter(instruction) + room + 64 <= int(window * (1 - SAFETY))


def summary_within(
    summarize: SummarizerLike | None,
    text: str,
    instruction: str,
    room: int,
    counter: TokenCounter,
    *,
    registry: PromptRegistry,
    fidelity: Fidelity,
) -> Generator[SummaryCall, str, str]:
    """Summarise `text` into at most `room` tokens (a generator of its `SummaryCall`).

    The extractive summary steps in when the summariser fails or returns nothing; when
    that finds nothing either (no sentence carries a fact), the text itself, cut to the
    room, is the summary: lossy but real, never a placeholder and never an error.
    """
    if room < 1:
        return ""
    try:
        llm = summarize if isinstance(summarize, LLMSummarizer) else None
        window = None if llm is None else model_limits(llm.llm)[0]
        if (
            llm is not None
            and window is not None
            and not _fits(text, instruction, room, window, counter)
        ):
            # Too long for the model's own window: summarised in chunks, then merged.
            requests = fitted_requests(
                text.split("\n"),
                None,
                window=window,
                cap=room,
                prompts=llm.prompts,
                counter=counter,
                fidelity=fidelity,
            )
            summary = yield SummaryCall(llm, text, instruction, requests)
        else:
            who = summarize or _extractive(room, counter, registry, fidelity)
            summary = yield SummaryCall(who, text, instruction)
    except Exception as exc:  # noqa: BLE001 - a failing summariser must never cost data
        logger.warning(
            "summariser failed (%s: %s); using the extractive one", type(exc).__name__, exc
        )
        summary = ""
    if not summary.strip() and summarize is not None:
        summary = _extractive(room, counter, registry, fidelity)(text, instruction)
    if not summary.strip():
        summary = text
    summary = truncate_to_tokens(summary.strip(), room, counter)
    return summary if any(ch.isalnum() for ch in summary) else ""


def _exceeded(*, what: str, required: int, budget: int) -> ContextWindowExceeded:
    msg = f"{what} takes {required} tokens, more than the trajectory budget of {budget}"
    return ContextWindowExceeded(msg, required=required, budget=budget)


def _check_budget(budget: int) -> None:
    check_count("budget", budget, minimum=0)
