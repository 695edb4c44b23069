"""The extractive recap of a long span in one pass: what a cold start folds in.

A process that meets a long history with no recap for any of it (a new worker, a
restart) would otherwise summarise it epoch by epoch, re-reading the recap at every step.
`fold_recap` reads the span once, and reads only what can matter: messages are taken in
order of the best score their sentences could reach (a tool's output never outranks
what the user stated), and reading stops as soon as the lines already scored fill the
cap and outrank every message not read yet. On a short span, or when nothing fills
the cap, every message is read and the result is the extractive summariser's own.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from langchain_contextkit.compaction.extractive import (
    ExtractiveSummarizer,
    _eligible,
    _merged,
    _parsed,
    _score_bound,
    _scored,
    previous_sentences,
)
from langchain_contextkit.compaction.recap_format import render_transcript
from langchain_contextkit.prompts import FIDELITIES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.compaction.facts import RecapSection
    from langchain_contextkit.compaction.recap_format import RecapLine
    from langchain_contextkit.prompts import Fidelity

__all__ = ["fold_recap"]

_SLOTS = 1 << 20
"""Positions per message: a line's position is its message's slot plus its own index,
so lines keep the order of the transcript without counting the sentences before them."""

_TOOL_BOUND = 6
"""The best score a tool's line can reach (`extractive._score`): facts weigh at most 5
and a decision 2, and a tool's line loses 1."""


def _bound(message: BaseMessage) -> int:
    """The best score any sentence of `message` can reach: read the best ones first.

    The quick searches of `_score_bound` over the whole text (whitespace collapsed, as
    in a sentence): what any of its sentences holds, the whole holds.
    """
    if message.type == "tool":
        return _TOOL_BOUND  # a tool's output is long: not even searched unless needed
    label = _LABELS.get(message.type, "Note")
    return _score_bound(" ".join(message.text.split()), label)


_LABELS = {"human": "User", "ai": "Assistant"}


def fold_recap(
    summarizer: ExtractiveSummarizer,
    messages: Sequence[BaseMessage],
    previous: str | None = None,
) -> tuple[str, Fidelity]:
    """The extractive recap of `previous` (an earlier recap) and `messages`, read once.

    Ranks as `ExtractiveSummarizer` does (score, then nearest either end, the lines of
    the lowest fidelity tier first once the configured tier does not fit), with two
    differences that only show on a span far larger than the cap: messages and
    sentences whose best possible score is below the lines already chosen are never
    read or scored, so room left over beside the chosen lines is not filled with
    lower-ranked ones; and a near-duplicate is merged only with the lines scored.

    Returns:
        The recap and the fidelity tier it was written at.
    """
    prompts = summarizer.prompts
    scored: list[RecapLine] = previous_sentences(previous.splitlines(), prompts) if previous else []
    unread: defaultdict[int, list[int]] = defaultdict(list)  # bound -> message indices
    for index, message in enumerate(messages):
        unread[_bound(message)].append(index)
    unscored: defaultdict[int, list[_Parsed]] = defaultdict(list)  # bound -> sentences
    while unread or unscored:
        level = max(unread.keys() | unscored.keys())
        for index in unread.pop(level, ()):
            text = render_transcript([messages[index]])
            at = (index + 1) * _SLOTS
            for offset, (label, section, sentence) in enumerate(_parsed(text, prompts)):
                bound = min(level, _score_bound(sentence, label))
                unscored[bound].append((at + offset, label, section, sentence))
        # What was just read may hold sentences of this level: score them in this round.
        for position, label, section, sentence in unscored.pop(level, ()):
            scored.append(_scored(position, label, section, sentence))
        if level in unscored or level in unread:
            continue
        rest = unread.keys() | unscored.keys()
        if rest:
            chosen = _full_choice(summarizer, scored, max(rest))
            if chosen is not None:
                return summarizer._within_cap(chosen)[1], FIDELITIES[-1]  # noqa: SLF001 - its own rule
    return summarizer._fitted(scored)  # noqa: SLF001 - everything read: the summariser's own


_Parsed = tuple[int, str, "RecapSection | None", str]
"""A sentence read but not scored: position, speaker, section, text."""


def _full_choice(
    summarizer: ExtractiveSummarizer, scored: list[RecapLine], below: int
) -> list[RecapLine] | None:
    """The lines chosen when those scoring above `below` overflow the cap, else None.

    Only the lowest tier's lines are taken (the configured tier cannot fit when they
    alone do not): their choice is final, since every line not scored yet scores
    `below` at most.
    """
    lowest = FIDELITIES[-1]
    pool = [s for s in _merged(scored) if s.score > below and _eligible(s, lowest)]
    chosen, complete = summarizer._select(pool)  # noqa: SLF001 - its own rule
    return None if complete else chosen
