"""The extractive recap of a long span in one pass: what a cold start folds in.

A process that meets a long history with no recap for any of it (a new worker, a
restart) would otherwise summarise it epoch by epoch, re-reading the recap at every step.
`fold_recap` reads the span once, and reads only what can matter: messages are taken in
order of the best score their sentences could reach (a tool's output never outranks
what the user stated), those of equal bounds from both ends of the span inward (equal
scores rank by that distance), and reading stops as soon as the lines already scored
fill the cap and outrank every message not read yet. On a short span, or when nothing
fills the cap, every message is read and the result is the extractive summariser's own.
"""

from __future__ import annotations

import operator
import re
from collections import defaultdict
from typing import TYPE_CHECKING

from langchain_contextkit.compaction._fact_bound import FactBound, First, first_bound, first_facts
from langchain_contextkit.compaction.extractive import (
    _MARKUP_START,
    ExtractiveSummarizer,
    _eligible,
    _merged,
    _parsed,
    _scored,
    previous_sentences,
)
from langchain_contextkit.compaction.facts import (
    _MARKUP_LINE,
    is_decided,
    is_markup_line,
    split_sentences,
)
from langchain_contextkit.compaction.recap_format import render_transcript
from langchain_contextkit.prompts import FIDELITIES

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.compaction.facts import RecapSection
    from langchain_contextkit.compaction.recap_format import RecapLine
    from langchain_contextkit.prompts import Fidelity, PromptRegistry

__all__ = ["fold_recap"]

_SLOTS = 1 << 20
"""Positions per message: a line's position is its message's slot plus its own index,
so lines keep the order of the transcript without counting the sentences before them."""

# The best score a line can reach (`extractive._score`): facts weigh at most 5 and a
# decision 2; the user's statements and the assistant's decisions add 5; a tool's line
# loses 1.
_STATED_BOUND = 12
_PLAIN_BOUND = 7
_TOOL_BOUND = 6


def _bound(message: BaseMessage) -> int:
    """The best score any sentence of `message` can reach: read the best ones first.

    The user's statements may reach the most, and an assistant's only where it states
    a decision (`_fact_bound.score_bound`). For a message read through its transcript
    (tool calls, other line breaks), or a tool's; a plain one has its own facts
    (`_message_first`).
    """
    if message.type == "tool":
        return _TOOL_BOUND  # a tool's output is long: not even searched unless needed
    if message.type == "human":
        return _STATED_BOUND
    if message.type != "ai":
        return _PLAIN_BOUND
    text = _plain(message)[1]
    if not text:
        return _PLAIN_BOUND  # a bare tool call: no words to decide anything
    if "\n" in text or "  " in text or "\t" in text:
        text = " ".join(text.split())  # as in a sentence: a decision's words one space apart
    # Markup may hide a decision's words (`score_bound` assumes it does).
    decided = _MARKUP_START.search(text) is not None or is_decided(text)
    return _STATED_BOUND if decided else _PLAIN_BOUND


def fold_recap(
    summarizer: ExtractiveSummarizer,
    messages: Sequence[BaseMessage],
    previous: str | None = None,
) -> tuple[str, Fidelity]:
    """The extractive recap of `previous` (an earlier recap) and `messages`, read once.

    Ranks as `ExtractiveSummarizer` does (score, then nearest either end, the lines of
    the lowest fidelity tier first once the configured tier does not fit), with two
    differences that only show on a span far larger than the cap: messages and
    sentences whose best possible score is below the lines already chosen (or equal
    to them and farther from both ends) are never read or scored, so room left over
    beside the chosen lines is not filled with lower-ranked ones; and a near-duplicate
    is merged only with the lines scored.

    Returns:
        The recap and the fidelity tier it was written at.
    """
    reading = _Reading(messages, summarizer.prompts)
    scored = reading.scored
    if previous:
        scored += previous_sentences(previous.splitlines(), summarizer.prompts)
    unread, unscored = reading.unread, reading.unscored
    last = len(messages) - 1
    while unread or unscored:
        level = max(unread.keys() | unscored.keys())
        # Nearest either end first: equal scores rank by it, so a level may stop part read.
        waiting = sorted(unread.pop(level, ()), key=lambda i: min(i, last - i))
        for start in range(0, max(1, len(waiting)), _CHUNK):
            reading.read(waiting[start : start + _CHUNK], level)
            reading.score(level)
            if start + _CHUNK < len(waiting):
                # The lines of this level nearer either end than every message unread
                # outrank all of those: they may fill the cap before the level is read.
                following = waiting[start + _CHUNK]
                near = min(following, last - following)
                chosen = _full_choice(summarizer, scored, level - 1, near=(near, last))
                if chosen is not None:
                    return summarizer._within_cap(chosen)[1], FIDELITIES[-1]  # noqa: SLF001 - its own rule
        rest = unread.keys() | unscored.keys()
        if rest:
            chosen = _full_choice(summarizer, scored, max(rest))
            if chosen is not None:
                return summarizer._within_cap(chosen)[1], FIDELITIES[-1]  # noqa: SLF001 - its own rule
    # Read in order of bounds: in the transcript's order again, a near-duplicate is merged
    # into its first occurrence, as the summariser merges it.
    scored.sort(key=_POSITION)
    return summarizer._fitted(scored)  # noqa: SLF001 - everything read: the summariser's own


_CHUNK = 128
"""Messages read between two checks of whether the cap is full (a check sorts the lines)."""


class _Reading:
    """What a fold has read of a span, and what waits, by the best score it could reach."""

    __slots__ = ("known", "messages", "prompts", "scored", "unread", "unscored")

    def __init__(self, messages: Sequence[BaseMessage], prompts: PromptRegistry) -> None:
        self.messages = messages
        self.prompts = prompts
        self.scored: list[RecapLine] = []
        # What each message's text is known to hold, kept while it waits for its level
        # (what the first searches found; its bound once its level first comes).
        self.known: list[FactBound | _Waiting | None] = []
        self.unread: defaultdict[int, list[int]] = defaultdict(list)  # bound -> indices
        known, unread = self.known, self.unread
        for index, message in enumerate(messages):
            waiting = None if message.type == "tool" else _message_first(message)
            known.append(waiting)
            if waiting is None:
                unread[_bound(message)].append(index)
            else:
                # The quick searches only (digits): the costly ones run when its turn comes.
                unread[min(first_bound(*waiting), _STATED_BOUND)].append(index)
        self.unscored: defaultdict[int, list[_Parsed]] = defaultdict(list)  # bound -> sentences

    def read(self, indices: Sequence[int], level: int) -> None:
        """Read `messages[indices]` (waiting at `level`) into `unscored`, by each sentence's bound.

        A message whose closer bound (its whole text searched once per family of facts,
        `known`) falls below `level` waits there instead, unread.
        """
        known, unscored = self.known, self.unscored
        for index in indices:
            facts = known[index]
            if isinstance(facts, tuple):
                facts = known[index] = _waiting_bound(facts)
            closer = None if facts is None else facts.at(level)
            if closer is not None and closer < level:
                self.unread[closer].append(index)
                continue
            known[index] = None  # read: its sentences carry their own from here on
            at = (index + 1) * _SLOTS
            message = self.messages[index]
            speaker, text = _plain(message)
            # Known plain (`_message_first`): no second look for other line breaks.
            if facts is not None and speaker is not None:
                sentences = _read_plain(speaker, text)
            else:
                sentences = _read(message, self.prompts)
            for offset, (label, section, sentence) in enumerate(sentences):
                # Only the digit searches so far: the rest wait until this level scores
                # them, and the bound that holds them is built then (most never are).
                first = first_facts(sentence, within=facts)
                unscored[min(level, first_bound(first, label))].append(
                    (at + offset, label, section, sentence, first, facts)
                )

    def score(self, level: int) -> None:
        """Score the sentences waiting at `level` whose closer bound still reaches it.

        The others wait at that bound.
        """
        for parsed in self.unscored.pop(level, ()):
            at, label, section, sentence, bound, whole = parsed
            if not isinstance(bound, FactBound):
                bound = FactBound(sentence, label, within=whole, first=bound)
            closer = bound.at(level)
            if closer < level:
                self.unscored[closer].append((at, label, section, sentence, bound, whole))
            else:
                self.scored.append(_scored(at, label, section, sentence))


def _read(message: BaseMessage, prompts: PromptRegistry) -> Iterable[_Sentence]:
    """`message`'s sentences as `extractive._parsed` reads its transcript.

    A user's or an assistant's text with no tool call is its transcript's ``Role: text``
    line and indented further lines (`render_transcript`): the same speaker throughout,
    under no section. Its sentences are read without rendering and parsing it.
    """
    label, text = _plain(message)
    if label is None or _other_breaks(text):
        return _parsed(render_transcript([message]), prompts)  # other line breaks, calls
    return _read_plain(label, text)


def _read_plain(label: str, text: str) -> Iterable[_Sentence]:
    """The sentences of a plain message's `text` (`_read`: no tool call, only newlines)."""
    if _ANY_MARKUP_LINE.search(text) is None:
        # Line breaks end sentences anyway (`facts.split_sentences`): with no line to
        # skip, the whole text splits into the same sentences in one call.
        return ((label, None, sentence) for sentence in split_sentences(text))
    lines = text.split("\n")
    lines[0] = lines[0].lstrip()  # what the speaker pattern leaves after "Role: "
    return (
        (label, None, sentence)
        for line in lines
        if not is_markup_line(line)
        for sentence in split_sentences(line)
    )


def _plain(message: BaseMessage) -> tuple[str | None, str]:
    """The speaker of a user's or assistant's message without tool calls (else None), its text."""
    fields = vars(message)  # pydantic keeps fields here; getattr of a missing one is slow
    label = _PLAIN_LABELS.get(fields["type"])
    if fields.get("tool_calls") or fields.get("invalid_tool_calls"):
        label = None
    content = fields["content"]
    return label, content if isinstance(content, str) else str(message.text)


def _closer_bound(message: BaseMessage, level: int) -> int | None:
    """At least the score of every sentence `_read` finds in `message`, as far as `level`."""
    facts = _message_facts(message)
    return None if facts is None else facts.at(level)


def _message_first(message: BaseMessage) -> _Waiting | None:
    """What the first searches find in a plain message's text, and its speaker (else None).

    As `_message_facts`, without the bound: most messages never need it.
    """
    label, text = _plain(message)
    if label is None or _other_breaks(text):
        return None
    return first_facts(text, spaced=True), label


_Waiting = tuple["First", str]
"""A plain message waiting for its level: what the first searches found, its speaker."""


def _waiting_bound(waiting: _Waiting) -> FactBound:
    """The bound of a message that waited with its first searches (`_message_first`)."""
    first, label = waiting
    return FactBound(first[0], label, spaced=True, first=first)


def _message_facts(message: BaseMessage) -> FactBound | None:
    """The families of facts of `message`'s whole text, bounding every sentence `_read` finds.

    Each family of facts is searched once in the whole text (`_fact_bound.FactBound`):
    a sentence is a piece of it between spaces or after CJK punctuation, so what a search
    finds in a sentence it finds in the whole text (whitespace collapsed, as a sentence's
    is). With markup, the digits alone (`FactBound`). Not for a message read through
    its transcript (calls, other line breaks): None. Built as the fold builds it (its
    tests read the fold's bounds through this).
    """
    waiting = _message_first(message)
    return None if waiting is None else _waiting_bound(waiting)


def _other_breaks(text: str) -> bool:
    """Whether `text.splitlines()` differs from `text.split(newline)` (a transcript reads it)."""
    return not text or text[-1] == "\n" or _OTHER_BREAK.search(text) is not None


_OTHER_BREAK = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""The line breaks of `str.splitlines` other than a newline."""


_PLAIN_LABELS = {"human": "User", "ai": "Assistant"}
_ANY_MARKUP_LINE = re.compile(_MARKUP_LINE.pattern, re.MULTILINE)
"""Finds every line `facts.is_markup_line` would skip (and perhaps a few more)."""
_Sentence = tuple[str, "RecapSection | None", str]
_Parsed = tuple[int, str, "RecapSection | None", str, "FactBound | First", "FactBound | None"]
"""A sentence read but not scored: position, speaker, section, text, what it may score
(its bound, or what the first searches found), its message's bound."""


_POSITION = operator.attrgetter("position")


def _full_choice(
    summarizer: ExtractiveSummarizer,
    scored: list[RecapLine],
    below: int,
    *,
    near: tuple[int, int] | None = None,
) -> list[RecapLine] | None:
    """The lines chosen when those scoring above `below` overflow the cap, else None.

    Only the lowest tier's lines are taken (the configured tier cannot fit when they
    alone do not): their choice is final, since every line not scored yet scores
    `below` at most. `near` (distance, last index): lines may also wait unscored at
    `below + 1`, but only in messages that far from either end of the span or farther;
    a line of that score is then taken only when it is nearer (it ranks first).
    """
    lowest = FIDELITIES[-1]
    scored.sort(key=_POSITION)  # near-duplicates merge into their first occurrence
    pool = [s for s in _merged(scored) if s.score > below and _eligible(s, lowest)]
    if near is not None:
        distance, last = near
        pool = [s for s in pool if s.score > below + 1 or _distance(s, last) < distance]
    chosen, complete = summarizer._select(pool)  # noqa: SLF001 - its own rule
    return None if complete else chosen


def _distance(line: RecapLine, last: int) -> int:
    """How many messages lie between a line's message and the nearer end of the span."""
    index = line.position // _SLOTS - 1  # an earlier recap's lines: -1, before the first
    return min(index, last - index)
