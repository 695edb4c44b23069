"""Summarisers: turn old text into a short recap, with or without an LLM.

A summariser is any callable `summarize(text, instruction) -> str` (or its async twin).
Two ship:

- `summarizer_from_llm(llm)` adapts any LangChain chat model: the instruction and the
  text, fenced as data, go in one human message.
- `ExtractiveSummarizer` (`compaction.extractive`) needs no model and never fails: it
  keeps the sentences that carry numbers, dates, identifiers, decisions and conclusions,
  deduplicated, under a token cap. It is the default when no LLM is given and the
  fallback when the LLM fails.

Both write one format (`compaction.recap_format`): a structured recap (facts, decisions,
action items, numbers, open questions, in that order) of ``- Role: sentence`` lines;
`structured_recap` here reads a model's reply into it, keeps a prose reply as written,
and refuses an empty one or one whose sections are broken. This module re-exports the
names of both, so `summarizers` stays the one place to import a summariser from.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.constants import TAG_NOSTREAM

from langchain_contextkit.compaction._recap_reduce import BULLET, reduce_to_tokens
from langchain_contextkit.compaction.extractive import (
    ExtractiveSummarizer,
    check_fidelity,
    item_score,
)
from langchain_contextkit.compaction.facts import RecapSection, normalised
from langchain_contextkit.compaction.recap_format import (
    NEW_MESSAGES_LABEL,
    PREVIOUS_SUMMARY_LABEL,
    RecapLine,
    compose_extension,
    recap_heading_of,
    recap_item,
    render_recap,
    render_transcript,
)
from langchain_contextkit.prompts import Fidelity, PromptRegistry
from langchain_contextkit.tokens.count import TokenCounter, count_tokens

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "NEW_MESSAGES_LABEL",
    "PREVIOUS_SUMMARY_LABEL",
    "SUMMARY_CONFIG",
    "ASummarize",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarize",
    "check_fidelity",
    "compose_extension",
    "reduce_recap",
    "render_transcript",
    "structured_recap",
    "summarizer_from_llm",
    "unit_score",
]

Summarize = Callable[[str, str], str]
"""`summarize(text, instruction) -> summary`, synchronous."""

ASummarize = Callable[[str, str], Awaitable[str]]
"""`await summarize(text, instruction) -> summary`, asynchronous."""

# Inside a graph, a summary call must not stream its tokens to the user as if they were
# the agent's answer; the tag tells LangGraph's stream modes to leave it out.
SUMMARY_CONFIG: RunnableConfig = {"tags": [TAG_NOSTREAM], "metadata": {"contextkit": "summary"}}


@dataclass(frozen=True, slots=True)
class LLMSummarizer:
    """A chat model as a summariser: `summarize(text, instruction)` and `asummarize(...)`.

    Build it with `summarizer_from_llm`. The text is fenced as data (see
    `PromptRegistry.with_data_boundary`), so a conversation that contains instructions
    cannot steer the summary.
    """

    llm: BaseChatModel
    prompts: PromptRegistry = field(default_factory=PromptRegistry)

    def _request(self, text: str, instruction: str) -> list[BaseMessage]:
        # One human message: every provider accepts it, including those that want a human
        # message first, and nothing about it depends on the conversation being summarised.
        return [HumanMessage(self.prompts.with_data_boundary(instruction, text))]

    def __call__(self, text: str, instruction: str) -> str:
        """Summarise `text` following `instruction`; the model's reply text, stripped."""
        return self.llm.invoke(self._request(text, instruction), config=SUMMARY_CONFIG).text.strip()

    async def asummarize(self, text: str, instruction: str) -> str:
        """Async `__call__`."""
        reply = await self.llm.ainvoke(self._request(text, instruction), config=SUMMARY_CONFIG)
        return reply.text.strip()


def summarizer_from_llm(llm: BaseChatModel, prompts: PromptRegistry | None = None) -> LLMSummarizer:
    """Adapt a chat model to the `summarize(text, instruction) -> str` callback.

    Args:
        llm: Any LangChain chat model.
        prompts: The registry whose data-boundary notice fences the text (language).

    Returns:
        A callable summariser; `await summarizer.asummarize(text, instruction)` is the
        async form.

    Example:
        ```python
        from langchain_core.language_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        from langchain_contextkit.compaction.summarizers import summarizer_from_llm

        llm = GenericFakeChatModel(messages=iter([AIMessage("  The user wants a refund.  ")]))
        summarize = summarizer_from_llm(llm)
        print(summarize("User: I want my money back.", "Summarise."))
        # The user wants a refund.
        ```
    """
    return LLMSummarizer(llm=llm, prompts=prompts or PromptRegistry())


def structured_recap(
    reply: str,
    *,
    max_tokens: int,
    fidelity: Fidelity = "medium",
    prompts: PromptRegistry | None = None,
    counter: TokenCounter = count_tokens,
) -> tuple[str, Fidelity | None] | None:
    r"""Read a model's reply as a recap; None when it is not a usable one.

    Three cases, told apart by the section headings `PromptRegistry.recap_format` asks
    for (markdown ``#``, ``**`` and colons aside, any language's defaults):

    - No recap heading at all: prose. It is kept as written (trimmed; over `max_tokens`,
      reduced sentence by sentence by score, `reduce_recap`) and its tier is None: the
      model chose its own format.
    - The structure: every line after a known heading, items as ``- Role: text`` (an
      item naming no origin is kept as ``- text`` and ranks as the user's, as a small
      cap's instruction asks: `PromptRegistry.recap_format`). It comes back canonical
      (sections in their fixed order, empty ones left out), so the same content is
      always the same bytes. Over `max_tokens`, the next lower fidelity tier is applied to its lines
      (`ExtractiveSummarizer`) before any line of that tier is dropped; the tier used is
      returned with the text.
    - Empty or a placeholder (nothing alphanumeric, "none", "n/a"), or broken structure
      (known headings plus an unknown heading line, text before the first heading, or
      headings with no item): None, and the caller falls back to the extractive recap.

    Example:
        ```python
        from langchain_contextkit.compaction.summarizers import structured_recap

        reply = "## Decisions\n- Assistant: Refund approved.\n**Facts:**\n- User: Order 7 broke."
        recap, tier = structured_recap(reply, max_tokens=100)
        print(tier, recap.splitlines())
        # medium ['Facts:', '- User: Order 7 broke.', 'Decisions:', '- Assistant: Refund approved.']
        print(structured_recap("The user wants a refund.", max_tokens=100))
        # ('The user wants a refund.', None)
        print(structured_recap("Summary:\nFacts:\n- User: Order 7 broke.", max_tokens=100))
        # None
        ```
    """
    registry = prompts or PromptRegistry()
    stripped = reply.strip()
    if not any(ch.isalnum() for ch in stripped) or normalised(stripped) in _EMPTY_ITEMS:
        return None  # empty, or a placeholder
    lines = [line.strip() for line in stripped.splitlines() if line.strip()]
    if all(recap_heading_of(line, registry) is None for line in lines):
        return reduce_recap(stripped, max_tokens, prompts=registry, counter=counter), None
    items = _section_items(lines, registry)
    if not items:
        return None
    summarizer = ExtractiveSummarizer(
        max_tokens=max_tokens, counter=counter, prompts=registry, fidelity=fidelity
    )
    text, tier = summarizer._fitted(items, trusted=True)  # noqa: SLF001 - this module's
    if not text:  # no whole line fits: its best sentences, not nothing
        whole = render_recap(items, registry)
        text = reduce_recap(whole, max_tokens, prompts=registry, counter=counter)
    return text, tier


def reduce_recap(
    text: str, max_tokens: int, *, prompts: PromptRegistry, counter: TokenCounter = count_tokens
) -> str:
    r"""A recap (structured or prose) within `max_tokens`, its weakest units dropped.

    Never cut at its end: each item (prose: each sentence) is scored as the extractive
    summariser scores a recap's items (the user's facts, decisions, numbers and ids
    first), and the best are kept in their order, under their headings.

    Example:
        ```python
        from langchain_contextkit import PromptRegistry
        from langchain_contextkit.compaction.summarizers import reduce_recap

        reply = "We chatted a while about the weather today. Order 4471 ships on 2025-03-02."
        print(reduce_recap(reply, 16, prompts=PromptRegistry()))
        # Order 4471 ships on 2025-03-02.
        ```
    """
    return reduce_to_tokens(
        text,
        max_tokens,
        counter,
        score=unit_score,
        is_heading=lambda line: recap_heading_of(line, prompts) is not None,
    )


def unit_score(text: str, label: str | None, under: bool, line: int = 0) -> int:  # noqa: FBT001 - UnitScore
    """A recap unit's score, as an item of a recap read back scores (`reduce_recap`)."""
    del line  # every line of a recap weighs the same
    return item_score(text, label, "facts" if under else None)


def _section_items(lines: list[str], registry: PromptRegistry) -> list[RecapLine] | None:
    """The items of a reply that uses the sections; None when its structure is broken."""
    items: list[RecapLine] = []
    section: RecapSection | None = None
    for line in lines:
        heading = recap_heading_of(line, registry)
        if heading is not None:
            section = heading
            continue
        if section is None:
            if line == registry.heading("recap"):
                continue  # the recap's own heading, echoed
            return None  # text before the sections
        if _looks_like_heading(line):
            return None  # a section this format does not have
        label, text = recap_item(line)
        if not text or normalised(text) in _EMPTY_ITEMS:
            continue
        items.append(RecapLine(len(items), label, text, item_score(text, label, section), section))
    return items


_EMPTY_ITEMS = frozenset({"", "none", "n a", "na", "nothing", "无", "暂无", "没有"})


def _looks_like_heading(line: str) -> bool:
    """A line that is a heading, not an item: ``# X``, ``**X**`` or a short ``X:``."""
    if BULLET.match(line):
        return False
    if line.startswith("#") or (line.startswith("**") and line.rstrip(":：").endswith("**")):
        return True
    return line.endswith((":", "：")) and len(line.split()) <= _HEADING_WORDS


_HEADING_WORDS = 4
