"""Summarisers: turn old text into a short recap, with or without an LLM.

A summariser is any callable `summarize(text, instruction) -> str` (or its async twin).
Two ship here:

- `summarizer_from_llm(llm)` adapts any LangChain chat model: the instruction and the
  text, fenced as data, go in one human message.
- `ExtractiveSummarizer` needs no model and never fails: it keeps the sentences that
  carry numbers, dates, identifiers, decisions and conclusions, deduplicated, under a
  token cap. It is the default when no LLM is given and the fallback when the LLM fails.
"""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.constants import TAG_NOSTREAM

from langchain_contextkit.compaction.facts import (
    has_decision,
    is_markup_line,
    normalised,
    salient_facts,
    split_sentences,
    strip_markup,
)
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.prompts import PromptRegistry
from langchain_contextkit.tokens import TokenCounter, count_tokens

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "SUMMARY_CONFIG",
    "ASummarize",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarize",
    "compose_extension",
    "render_transcript",
    "summarizer_from_llm",
]

Summarize = Callable[[str, str], str]
"""`summarize(text, instruction) -> summary`, synchronous."""

ASummarize = Callable[[str, str], Awaitable[str]]
"""`await summarize(text, instruction) -> summary`, asynchronous."""

_ROLE_LABELS = {"human": "User", "ai": "Assistant", "system": "System", "tool": "Tool"}

# Inside a graph, a summary call must not stream its tokens to the user as if they were
# the agent's answer; the tag tells LangGraph's stream modes to leave it out.
SUMMARY_CONFIG: RunnableConfig = {"tags": [TAG_NOSTREAM], "metadata": {"contextkit": "summary"}}

PREVIOUS_SUMMARY_LABEL = "PREVIOUS SUMMARY"
NEW_MESSAGES_LABEL = "NEW MESSAGES"


def render_transcript(messages: Sequence[BaseMessage]) -> str:
    """Render messages as plain text for a summariser: one ``Role: text`` block each.

    Tool calls are written with their names and JSON arguments, and tool results name the
    tool, so a summary can keep which tool was asked what and what it answered.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit.compaction.summarizers import render_transcript

        call = {"name": "get_order", "args": {"id": 42}, "id": "c1"}
        print(
            render_transcript(
                [
                    HumanMessage("Where is order 42?"),
                    AIMessage("", tool_calls=[call]),
                    ToolMessage("Shipped.", tool_call_id="c1", name="get_order"),
                ]
            )
        )
        # User: Where is order 42?
        # Assistant: [calls get_order({"id": 42})]
        # Tool (get_order): Shipped.
        ```
    """
    blocks: list[str] = []
    for message in messages:
        label = _ROLE_LABELS.get(message.type, message.type.capitalize())
        if isinstance(message, ToolMessage) and message.name:
            label = f"{label} ({message.name})"
        parts: list[str] = [str(message.text)] if message.text else []
        if isinstance(message, AIMessage):
            parts.extend(
                f"[calls {call['name']}({json.dumps(call['args'], ensure_ascii=False)})]"
                for call in message.tool_calls
            )
        # Every line after a block's first is indented: a line of a tool's output that
        # begins "User:" or "Note:" stays the tool's, through any number of recaps.
        body = " ".join(parts).replace("\n", "\n" + _CONTINUED)
        blocks.append(f"{label}: {body}")
    return "\n".join(blocks)


_CONTINUED = "  "
"""How `render_transcript` marks the further lines of one message."""


def compose_extension(previous: str, new_text: str) -> str:
    """The text an "extend this summary" call summarises: old summary, then new messages."""
    return f"{PREVIOUS_SUMMARY_LABEL}:\n{previous}\n\n{NEW_MESSAGES_LABEL}:\n{new_text}"


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


_ROLE_PREFIX = re.compile(r"^(User|Assistant|System|Tool(?: \([^)]*\))?|[A-Z][\w ]{0,20}):\s*")
_SPEAKER = re.compile(r"^(?:- )?(User|Assistant|System|Tool(?: \([^)]*\))?):\s*")
"""The labels `render_transcript` writes, bare or as a summary's ``- Label:`` lines (a
map-reduce merges summaries): only these start a new speaker."""


@dataclass(frozen=True, slots=True)
class _Sentence:
    position: int
    label: str
    text: str
    score: int

    @property
    def line(self) -> str:
        return f"- {self.label}: {self.text}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ExtractiveSummarizer:
    r"""A deterministic summariser without an LLM: keep the sentences that carry facts.

    A sentence scores for its salient facts (`facts.salient_facts`: numbers, dates,
    amounts and ids that carry a number weigh most; a lone digit, a name from code, and
    anything inside markup, paths, options or version strings weigh little or nothing)
    and for words of decision or conclusion (English and Chinese). The user's own
    sentences outrank everything else (they are the ground truth and cannot be fetched
    again), a tool's output ranks a little lower, and a tool's line without words or
    names (a bare ``2``) or a roff request line is never kept. Every line keeps its
    speaker: the further lines of a message (indented by `render_transcript`) are the
    speaker's own, and a recap's ``- Role:`` lines keep their role through any number of
    re-compactions. Near-duplicates (same words ignoring case and punctuation) are kept
    once, and the best-scoring sentences of the previous summary (text composed by
    `compose_extension`, at most two thirds of the cap) and of the new text are kept under
    `max_tokens`, printed in their original order as ``- Role: sentence`` lines.

    It never raises on any text and returns "" only when nothing scores.

    Example:
        ```python
        from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer

        summarize = ExtractiveSummarizer(max_tokens=60)
        transcript = (
            "User: Hi there!\n"
            "Assistant: Hello. How can I help?\n"
            "User: My invoice INV-88213 from 2024-03-05 was charged twice.\n"
            "Assistant: I see. We decided to refund the second charge of $49."
        )
        print(summarize(transcript, "Summarise."))
        # - User: My invoice INV-88213 from 2024-03-05 was charged twice.
        # - Assistant: We decided to refund the second charge of $49.
        ```
    """

    max_tokens: int = 1000
    """Cap of the summary."""

    counter: TokenCounter = count_tokens
    """Counts the tokens of one string."""

    def __post_init__(self) -> None:
        """Validate the cap."""
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            msg = f"max_tokens must be an int >= 1, got {self.max_tokens!r}."
            raise ConfigError(msg)

    def __call__(self, text: str, instruction: str = "") -> str:  # noqa: ARG002 - the callback's shape
        """Summarise `text`; `instruction` is accepted for the callback's shape and ignored."""
        previous, body = _split_extension(text)
        old = _previous_sentences(previous)
        new = [dataclasses.replace(s, position=len(old) + s.position) for s in _sentences(body)]
        # Old and new lines compete on their scores alone (a weak old line must not keep
        # out a new fact), but an earlier summary keeps at most two thirds of the cap, so
        # a full recap still takes in new facts instead of freezing at its first turns.
        return self._within_cap(self._select([*old, *new], len(old), self.max_tokens * 2 // 3))

    def _within_cap(self, lines: list[str]) -> str:
        """The lines joined, the latest dropped while the whole is over the cap.

        Lines were chosen by their counts one by one; an estimate is not additive across
        a line break, so the joined text is checked once and trimmed when it runs over.
        """
        text = "\n".join(lines)
        while lines and self.counter(text) > self.max_tokens:
            lines = lines[:-1]
            text = "\n".join(lines)
        return text

    def _select(self, sentences: list[_Sentence], n_old: int, old_room: int) -> list[str]:
        """The best-scoring distinct sentences within the cap, in their own order.

        The first `n_old` are an earlier summary's lines, which may take `old_room` at most.
        """
        chosen: list[_Sentence] = []
        seen: set[str] = set()
        used = used_old = 0
        last = len(sentences) - 1
        # Equal scores: the lines nearest either end first. When the cap is full, what
        # goes is the middle: the conversation's opening and where it is now both stay.
        order = sorted(sentences, key=lambda s: (-s.score, min(s.position, last - s.position)))
        for sentence in order:
            if sentence.score <= 0:
                break
            key = _normalised(sentence.text)
            if not key or key in seen:
                continue
            cost = self.counter(sentence.line) + 1  # + the newline
            is_old = sentence.position < n_old
            if used + cost > self.max_tokens or (is_old and used_old + cost > old_room):
                continue
            seen.add(key)
            chosen.append(sentence)
            used += cost
            used_old += cost if is_old else 0
        chosen.sort(key=lambda s: s.position)
        return [s.line for s in chosen]

    async def asummarize(self, text: str, instruction: str = "") -> str:
        """Async `__call__` (no I/O: for symmetry with `LLMSummarizer`)."""
        return self(text, instruction)


def _split_extension(text: str) -> tuple[list[str], str]:
    """Split text from `compose_extension` into previous-summary lines and the new part."""
    head = f"{PREVIOUS_SUMMARY_LABEL}:\n"
    marker = f"\n\n{NEW_MESSAGES_LABEL}:\n"
    if not text.startswith(head) or marker not in text:
        return [], text
    previous, _, body = text[len(head) :].partition(marker)
    return [line.strip() for line in previous.splitlines() if line.strip()], body


def _previous_sentences(lines: list[str]) -> list[_Sentence]:
    """Lines of an earlier summary (``- Label: text``) as sentences, scored like new ones."""
    out: list[_Sentence] = []
    for line in lines:
        body = line.removeprefix("- ")
        label, _, text = body.partition(": ")
        if not text:
            label, text = "Note", body
        # Already chosen once: keep any such line over nothing (score at least 1).
        out.append(_Sentence(len(out), label, text, max(1, _score(text, label))))
    return out


def _sentences(text: str) -> list[_Sentence]:
    """Split a transcript into scored sentences, each labelled with its speaker."""
    out: list[_Sentence] = []
    label = "Note"
    for line in text.splitlines():
        match = _SPEAKER.match(line)
        if match:
            label, body = match.group(1), line[match.end() :]
        elif line.startswith(_CONTINUED) or label != "Note":
            body = line  # a further line of the same message: the same speaker
        else:  # plain text, not a transcript
            match = _ROLE_PREFIX.match(line)
            label = match.group(1) if match else "Note"
            body = line[match.end() :] if match else line
        if is_markup_line(body):
            continue  # a roff request or comment: layout, never a fact
        for sentence in split_sentences(body):
            out.append(_Sentence(len(out), label, sentence, _score(sentence, label)))
    return out


def _score(sentence: str, label: str) -> int:
    clean = strip_markup(sentence)
    score, has_name = _fact_weight(sentence)
    if has_decision(clean):
        score += 2
    if label == "User":
        # What the user states is the conversation's ground truth and cannot be fetched
        # again: it outranks everything a tool printed, which usually can be.
        if score:
            return score + 5
        return 1 if _has_words(clean) else 0
    if not has_name and not _has_words(clean):
        return 0  # a bare number from a tool's output ("2", "\\fI3\\fR"): not a statement
    if label.startswith("Tool"):
        return max(0, score - 1)
    return score


def _fact_weight(sentence: str) -> tuple[int, bool]:
    """What the sentence's salient facts weigh, and whether one of them is a name."""
    numbers: list[str] = []
    names: list[str] = []
    for token in salient_facts(sentence):
        (numbers if token[0].isdigit() or token[0] in "$€£¥" else names).append(token)
    weight = 0
    if any(len(n) > _MINOR_NUMBER for n in numbers):
        weight += 3  # a code, amount, date or measure
    elif numbers:
        weight += 1  # a lone digit ("0", "2"): options and counts in prose, rarely a fact
    if any(any(ch.isdigit() for ch in name) for name in names):
        weight += 2  # an id that carries a number: INV-88213, item-7, db-7
    elif names:
        weight += 1  # a name in code (APT::Cache, snake_case): often just quoted source
    return weight, bool(names)


_MINOR_NUMBER = 2
"""Numbers of at most this many characters weigh little: "0", "2", "10"."""


def _has_words(sentence: str) -> bool:
    """More than a greeting or filler: four different words, or four CJK characters."""
    cjk = {ch for ch in sentence if unicodedata.east_asian_width(ch) in "WF"}
    return len(cjk) >= 4 or len(set(sentence.casefold().split())) >= 4  # noqa: PLR2004


def _normalised(text: str) -> str:
    """Case- and punctuation-blind key for near-duplicate detection."""
    body = text.split(": ", 1)[1] if text.startswith("- ") and ": " in text else text
    return normalised(body)
