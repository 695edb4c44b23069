"""Summarisers: turn old text into a short recap, with or without an LLM.

A summariser is any callable `summarize(text, instruction) -> str` (or its async twin).
Two ship here:

- `summarizer_from_llm(llm)` adapts any LangChain chat model: the instruction and the
  text, fenced as data, go in one human message.
- `ExtractiveSummarizer` needs no model and never fails: it keeps the sentences that
  carry numbers, dates, identifiers, decisions and conclusions, deduplicated, under a
  token cap. It is the default when no LLM is given and the fallback when the LLM fails.

Both write one format: a structured recap (facts, decisions, action items, numbers, open
questions, in that order) of ``- Role: sentence`` lines; `structured_recap` reads a
model's reply into it, keeps a prose reply as written, and refuses an empty one or one
whose sections are broken.

The recap format's writer (`ExtractiveSummarizer`) and its reader (`structured_recap`, the
re-read of an earlier recap) share one line model and one set of headings, so the format
has one definition.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, get_args

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.constants import TAG_NOSTREAM

from langchain_contextkit.compaction._recap_reduce import BULLET, ITEM_LABEL, reduce_to_tokens
from langchain_contextkit.compaction.facts import (
    RECAP_SECTIONS,
    RecapSection,
    action_details,
    has_decision,
    has_key_number,
    is_decided,
    is_markup_line,
    normalised,
    recap_section,
    salient_facts,
    split_sentences,
    strip_markup,
)
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.prompts import FIDELITIES, Fidelity, Language, PromptRegistry
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
            # A call whose arguments were not valid JSON was sent, and answered, all the same.
            parts.extend(
                f"[calls {call['name'] or 'a tool'}({call['args'] or ''}): invalid JSON arguments]"
                for call in message.invalid_tool_calls
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

_HEADING_DECORATION = " \t#*_[]【】:："
_OWN_NOTE = re.compile(r"\s*[(（](?:owner|due|负责人|截止)[:：][^()（）]*[)）]$")
"""The owner/deadline note a recap writes after an action item (read back, not kept)."""
_STATED_NOTE = re.compile(r"\b(?:owner|due|deadline)\s*[:：]|负责人[:：]|截止[:：]", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Sentence:
    position: int
    label: str | None  # where it came from; None: an item of a model's recap naming none
    text: str
    score: int
    section: RecapSection
    detail: bool = False  # words without a fact: kept at high fidelity only
    # The line's tokens and its heading's, once counted (one summariser call's lines).
    costs: list[int] = field(default_factory=list, compare=False, repr=False)
    key_number: list[bool] = field(default_factory=list, compare=False, repr=False)

    def has_key_number(self) -> bool:
        """`facts.has_key_number` of the text, worked out once."""
        if not self.key_number:
            self.key_number.append(has_key_number(self.text))
        return self.key_number[0]

    def line(self, prompts: PromptRegistry) -> str:
        head = f"- {self.label}: " if self.label else "- "
        note = ""
        if self.section == "actions" and not _STATED_NOTE.search(self.text):
            note = prompts.action_note(*action_details(self.text, speaker=self.label))
        return f"{head}{self.text}{note}"


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
    `compose_extension`) and of the new text, competing on their scores alone, are kept
    under `max_tokens`; among equal scores the oldest and the newest stay.

    The recap is structured: the kept lines, as ``- Role: sentence``, go under the
    headings of `prompts` (`PromptRegistry.recap_heading`) in a fixed order: facts,
    decisions, action items (with their owner and deadline when stated), numbers, open
    questions (`facts.recap_section` sorts them); an empty section is left out. An
    earlier recap is read back section by section, so its lines keep their section and
    their origin, and a recap re-summarised with nothing new comes back byte for byte.

    `fidelity` decides which lines may be kept: ``high`` also the speakers' wording
    that states no fact, ``medium`` every line that carries a fact, decision or
    question, ``low`` only decisions and conclusions and the lines with key numbers
    (`facts.has_key_number`). When the lines of the configured tier do not all fit the
    cap, the next lower tier is used before any line is dropped (`recap`).

    It never raises on any text and returns "" only when nothing scores.

    Example:
        ```python
        from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer

        summarize = ExtractiveSummarizer(max_tokens=80)
        transcript = (
            "User: Hi there!\n"
            "Assistant: Hello. How can I help?\n"
            "User: My invoice INV-88213 from 2024-03-05 was charged twice.\n"
            "Assistant: I see. We decided to refund the second charge of $49.\n"
            "User: Will it arrive before Friday?"
        )
        print(summarize(transcript, "Summarise."))
        # Facts:
        # - User: My invoice INV-88213 from 2024-03-05 was charged twice.
        # Decisions:
        # - Assistant: We decided to refund the second charge of $49.
        # Open questions:
        # - User: Will it arrive before Friday?
        ```
    """

    max_tokens: int = 1000
    """Cap of the summary."""

    counter: TokenCounter = count_tokens
    """Counts the tokens of one string."""

    prompts: PromptRegistry = field(default_factory=PromptRegistry)
    """The section headings (language) of the recap."""

    fidelity: Fidelity = "medium"
    """Which lines a recap may keep (``"high"``, ``"medium"`` or ``"low"``)."""

    def __post_init__(self) -> None:
        """Validate the cap and the tier."""
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            msg = f"max_tokens must be an int >= 1, got {self.max_tokens!r}."
            raise ConfigError(msg)
        check_fidelity(self.fidelity)

    def __call__(self, text: str, instruction: str = "") -> str:  # noqa: ARG002 - the callback's shape
        """Summarise `text`; `instruction` is accepted for the callback's shape and ignored."""
        return self.recap(text)[0]

    def recap(self, text: str) -> tuple[str, Fidelity]:
        r"""Summarise `text`; the recap and the fidelity tier it was written at.

        The tier is `fidelity`, or a lower one when the lines of `fidelity` did not all
        fit `max_tokens`.

        Example:
            ```python
            from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer

            text = "User: Hello there, I have a question about my plan.\nUser: Order 4471 is late."
            recap, tier = ExtractiveSummarizer(max_tokens=100).recap(text)
            print(tier, len(recap.splitlines()))
            # medium 3
            recap, tier = ExtractiveSummarizer(max_tokens=20).recap(text)
            print(tier, recap.splitlines())
            # low ['Facts:', '- User: Order 4471 is late.']
            ```
        """
        previous, body = _split_extension(text)
        old = _previous_sentences(previous, self.prompts)
        new = [
            dataclasses.replace(s, position=len(old) + s.position)
            for s in _sentences(body, self.prompts)
        ]
        return self._fitted([*old, *new])

    def _fitted(self, sentences: list[_Sentence], *, trusted: bool = False) -> tuple[str, Fidelity]:
        """The lines of the highest tier that all fit, from `fidelity` down.

        A lower tier is used before any line of it is dropped; the room it leaves is
        filled with the best of the configured tier's other lines, so stepping down never
        keeps less than the cap holds. `trusted`: the lines were written at `fidelity`
        already (a model's recap), so that tier keeps all of them.

        An earlier recap's lines and new ones compete on their scores alone. A full
        recap still takes in new lines of the same score (ties keep both ends of the
        conversation, `_ranked`), but a new tool line never pushes out a user's fact
        that an earlier recap kept: a fixed share for new lines did exactly that on noisy
        text, one compaction after another.
        """
        sentences = _merged(sentences)

        def pool_of(tier: Fidelity) -> list[_Sentence]:
            if trusted and tier == self.fidelity:
                return sentences
            return [s for s in sentences if _eligible(s, tier)]

        def whole(pool: list[_Sentence]) -> bool:
            # Choosing counts each line on its own, which overstates a joined text; when
            # all of a tier fits as a whole, all of it is kept.
            return self.counter(render_recap(pool, self.prompts)) <= self.max_tokens

        configured = pool_of(self.fidelity)
        if whole(configured):
            return render_recap(configured, self.prompts), self.fidelity
        chosen, complete = self._select(configured)
        tier: Fidelity = self.fidelity
        for lower in FIDELITIES[FIDELITIES.index(self.fidelity) + 1 :]:
            if complete:
                break
            tier = lower
            pool = pool_of(lower)
            if whole(pool):
                chosen, complete = _ranked(pool), True
            else:
                chosen, complete = self._select(pool)
            chosen, _ = self._select(configured, chosen)
        kept, text = self._within_cap(chosen)
        if trusted:
            text = self._topped_up(kept, text, configured)
        return text, tier

    def _within_cap(self, chosen: list[_Sentence]) -> tuple[list[_Sentence], str]:
        """The recap of `chosen`, its weakest lines dropped while it is over the cap.

        Lines were chosen by their counts one by one; an estimate is not additive across
        a line break, so the joined text is checked once and trimmed when it runs over.
        """
        kept = list(chosen)  # best first
        text = render_recap(kept, self.prompts)
        while kept and self.counter(text) > self.max_tokens:
            kept.pop()
            text = render_recap(kept, self.prompts)
        return kept, text

    def _topped_up(self, kept: list[_Sentence], text: str, pool: list[_Sentence]) -> str:
        """`text` with the best lines of `pool` that still fit, measured on the whole.

        Choosing counts every line break as a token; the joined text often costs less,
        and the room left takes a few more lines (a bounded number of tries). Used for a
        model's recap, which would otherwise lose lines a cut to the cap would have kept.
        """
        seen = {id(s) for s in kept}  # merged lines: one object per distinct text
        tries = 0
        for sentence in _ranked(pool):
            room = self.max_tokens - self.counter(text)
            if tries >= _TOP_UP_TRIES or room <= 0:
                break
            if id(sentence) in seen or self.counter(sentence.line(self.prompts)) > room:
                continue
            tries += 1
            trial = render_recap([*kept, sentence], self.prompts)
            if self.counter(trial) <= self.max_tokens:
                kept = [*kept, sentence]
                seen.add(id(sentence))
                text = trial
        return text

    def _select(
        self, sentences: list[_Sentence], chosen: Sequence[_Sentence] = ()
    ) -> tuple[list[_Sentence], bool]:
        """The best-scoring distinct sentences within the cap (best first), and whether all fit.

        `chosen` are kept already (they come first and count against the cap).
        """
        kept = list(chosen)
        seen = {id(s) for s in kept}  # merged lines: one object per distinct text
        opened = {s.section for s in kept}
        used = sum(self._cost(s, opened=False) for s in kept)
        complete = True
        for sentence in _ranked(sentences):
            if id(sentence) in seen:
                continue
            cost = self._cost(sentence, opened=sentence.section in opened)
            if used + cost > self.max_tokens:
                complete = False
                continue
            seen.add(id(sentence))
            opened.add(sentence.section)
            kept.append(sentence)
            used += cost
        return kept, complete

    def _cost(self, sentence: _Sentence, *, opened: bool) -> int:
        """A line's tokens with its newline, and its heading's when it opens a section.

        Counted once per line (a recap's choice tries each line at every tier).
        """
        cost = sentence.costs
        if not cost:
            cost.append(self.counter(sentence.line(self.prompts)) + 1)
            cost.append(self.counter(self.prompts.recap_heading(sentence.section)) + 1)
        return cost[0] + (0 if opened else cost[1])

    async def asummarize(self, text: str, instruction: str = "") -> str:
        """Async `__call__` (no I/O: for symmetry with `LLMSummarizer`)."""
        return self(text, instruction)


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
    return _item_score(text, label, "facts" if under else None)


def _section_items(lines: list[str], registry: PromptRegistry) -> list[_Sentence] | None:
    """The items of a reply that uses the sections; None when its structure is broken."""
    items: list[_Sentence] = []
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
        label, text = _recap_item(line)
        if not text or normalised(text) in _EMPTY_ITEMS:
            continue
        items.append(_Sentence(len(items), label, text, _item_score(text, label, section), section))
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


_TOP_UP_TRIES = 24


def _ranked(sentences: list[_Sentence]) -> list[_Sentence]:
    """Best first: by score, then (equal scores) the lines nearest either end.

    When the cap is full, what goes is the middle: the conversation's opening and where
    it is now both stay.
    """
    last = max((s.position for s in sentences), default=0)
    return sorted(sentences, key=lambda s: (-s.score, min(s.position, last - s.position)))


def _merged(sentences: list[_Sentence]) -> list[_Sentence]:
    """Near-duplicates as one line: the first, in its place, with the best score of all.

    The first keeps its place, so a line an earlier recap kept stays where it was when
    the same words come again.
    """
    first: dict[str, _Sentence] = {}
    for sentence in sentences:
        key = _normalised(sentence.text)
        if not key:
            continue  # punctuation only: states nothing
        kept = first.get(key)
        if kept is None:
            first[key] = sentence
        elif sentence.score > kept.score:
            first[key] = dataclasses.replace(kept, score=sentence.score)
    return list(first.values())


def check_fidelity(fidelity: object) -> None:
    """Refuse anything but a fidelity tier (``"high"``, ``"medium"``, ``"low"``).

    Raises:
        ConfigError: Naming the tiers and the value.
    """
    if not isinstance(fidelity, str) or fidelity not in FIDELITIES:
        msg = f"fidelity must be one of {', '.join(map(repr, FIDELITIES))}, got {fidelity!r}."
        raise ConfigError(msg)


def _eligible(sentence: _Sentence, tier: Fidelity) -> bool:
    """Whether a line may be kept at `tier` (see `ExtractiveSummarizer.fidelity`)."""
    if tier == "high":
        return sentence.score > 0 or sentence.detail
    if sentence.score <= 0:
        return False
    if tier == "medium":
        return True
    return sentence.section == "decisions" or sentence.has_key_number()


def render_recap(lines: Sequence[_Sentence], prompts: PromptRegistry) -> str:
    """Lines as a structured recap: the sections in their fixed order, lines in theirs."""
    out: list[str] = []
    for section in RECAP_SECTIONS:
        items = sorted((s for s in lines if s.section == section), key=lambda s: s.position)
        if items:
            out.append(prompts.recap_heading(section))
            out.extend(s.line(prompts) for s in items)
    return "\n".join(out)


def _split_extension(text: str) -> tuple[list[str], str]:
    """Split text from `compose_extension` into previous-summary lines and the new part."""
    head = f"{PREVIOUS_SUMMARY_LABEL}:\n"
    marker = f"\n\n{NEW_MESSAGES_LABEL}:\n"
    if not text.startswith(head) or marker not in text:
        return [], text
    previous, _, body = text[len(head) :].partition(marker)
    return [line.strip() for line in previous.splitlines() if line.strip()], body


@functools.cache
def _heading_keys(language: Language, overrides: tuple[str, ...]) -> dict[str, RecapSection]:
    """Every spelling of a section heading that reads back as that section.

    The registry's own headings (`overrides`, one per section), and the default ones of
    every language (a recap written in one language still reads back in another).
    """
    keys = {
        _heading_key(text): section for text, section in zip(overrides, RECAP_SECTIONS, strict=True)
    }
    for lang in (language, *get_args(Language)):
        registry = PromptRegistry(language=lang)
        for section in RECAP_SECTIONS:
            keys.setdefault(_heading_key(registry.recap_heading(section)), section)
    return keys


def _heading_key(line: str) -> str:
    return line.strip().strip(_HEADING_DECORATION).strip().casefold()


def recap_heading_of(line: str, prompts: PromptRegistry) -> RecapSection | None:
    """The section whose heading `line` is (markdown ``#``/``**`` and colons aside)."""
    if len(line) > _MAX_HEADING:
        return None
    overrides = tuple(prompts.recap_heading(section) for section in RECAP_SECTIONS)
    return _heading_keys(prompts.language, overrides).get(_heading_key(line))


_MAX_HEADING = 40


def _recap_item(line: str) -> tuple[str | None, str]:
    """An item line's origin (None when it names none) and its text, note removed."""
    body = BULLET.sub("", line.strip(), count=1)
    match = ITEM_LABEL.match(body)
    label, text = (match.group(1), body[match.end() :]) if match else (None, body)
    return label, _OWN_NOTE.sub("", text).strip()


def _previous_sentences(lines: list[str], prompts: PromptRegistry) -> list[_Sentence]:
    """Lines of an earlier summary as sentences, scored like new ones.

    A structured recap's lines keep the section they were under; the lines of a flat
    one (or of prose) are split into sentences and sorted into sections as new ones are
    (a paragraph, or a reply written on one line, is not one item too long to keep).
    """
    out: list[_Sentence] = []
    section: RecapSection | None = None
    for line in lines:
        heading = recap_heading_of(line, prompts)
        if heading is not None:
            section = heading
            continue
        items = [_recap_item(line)] if section else _inline_items(line, prompts)
        for label, text in items:
            if not text:
                continue
            where = section or recap_section(text, speaker=label)
            out.append(_Sentence(len(out), label, text, _item_score(text, label, section), where))
    return out


def _inline_items(line: str, prompts: PromptRegistry) -> list[tuple[str | None, str]]:
    """A flat or prose line's sentences as items, each with the origin it names.

    A reply written on one line (``Facts: - User: ... - User: ...``) keeps each item's
    origin; a heading at the start of a sentence is left out.
    """
    label, text = _recap_item(line)
    out: list[tuple[str | None, str]] = []
    for sentence in split_sentences(text):
        head, _, rest = sentence.partition(" ")
        if rest and recap_heading_of(head, prompts) is not None:
            sentence = rest  # noqa: PLW2901 - the sentence without its heading
        own, body = _recap_item(sentence)
        out.append((own or label, body))
    return out


def _item_score(text: str, label: str | None, section: RecapSection | None) -> int:
    """The score of a recap's item, a model's reply or an earlier recap read back.

    Already chosen once: any such line is kept over nothing (at least 1). An item naming
    no origin under a section heading is the user's (what a small cap's instruction asks
    for); a line of a flat or prose recap is a note.
    """
    return max(1, _score(text, label or ("User" if section else "Note")))


def _sentences(text: str, prompts: PromptRegistry) -> list[_Sentence]:
    """Split a transcript into scored sentences, each labelled with its speaker.

    Merged summaries (a map-reduce's partial recaps) are read like an earlier recap:
    a ``- Role:`` line under a section heading keeps that section.
    """
    out: list[_Sentence] = []
    label = "Note"
    section: RecapSection | None = None
    for line in text.splitlines():
        heading = None if line.startswith(_CONTINUED) else recap_heading_of(line, prompts)
        if heading is not None:
            section, label = heading, "Note"
            continue
        match = _SPEAKER.match(line)
        if match:
            label, body = match.group(1), line[match.end() :]
            if not line.startswith("- "):
                section = None  # a transcript's message, not a recap's item
        elif line.startswith(_CONTINUED) or label != "Note":
            body = line  # a further line of the same message: the same speaker
        else:  # plain text, not a transcript
            match = _ROLE_PREFIX.match(line)
            label = match.group(1) if match else "Note"
            body = line[match.end() :] if match else line
        if is_markup_line(body):
            continue  # a roff request or comment: layout, never a fact
        if section is not None:
            body = _OWN_NOTE.sub("", body)
        for sentence in split_sentences(body):
            score = _score(sentence, label)
            detail = score == 0 and not label.startswith("Tool") and _has_words(sentence)
            # A line no tier keeps needs no section (sorting one costs a few regexes).
            kept = score > 0 or detail
            where = section or (recap_section(sentence, speaker=label) if kept else "facts")
            out.append(_Sentence(len(out), label, sentence, score, where, detail))
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
            return score + _STATED_WEIGHT
        return 1 if _has_words(clean) else 0
    if label == "Assistant" and is_decided(clean):
        # A decision or conclusion the conversation reached ranks with the user's facts:
        # in a full recap, one does not shut out the other (equal scores keep both ends).
        return score + _STATED_WEIGHT
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

_STATED_WEIGHT = 5
"""What a user's statement, or a decision the conversation reached, weighs on top."""


def _has_words(sentence: str) -> bool:
    """More than a greeting or filler: four different words, or four CJK characters."""
    cjk = {ch for ch in sentence if unicodedata.east_asian_width(ch) in "WF"}
    return len(cjk) >= 4 or len(set(sentence.casefold().split())) >= 4  # noqa: PLR2004


def _normalised(text: str) -> str:
    """Case- and punctuation-blind key for near-duplicate detection."""
    body = text.split(": ", 1)[1] if text.startswith("- ") and ": " in text else text
    return normalised(body)
