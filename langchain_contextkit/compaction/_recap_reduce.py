"""Reduce a recap to a token cap by score, never by cutting off its end.

A model often writes past the "at most N tokens" it was asked for, and the newest lines
of its reply (the facts stated since the last recap) are the ones a cut at the cap would
lose, one compaction after another. Here a recap over its cap loses its weakest units
instead: each line of a structured recap, each sentence of prose, scored by the caller
(`summarizers` scores the user's facts, decisions, numbers and ids first). What is kept
stays in its original order, under its heading, with its ``- Role:`` prefix; a heading
whose items all went goes with them. A sentence too long for the cap on its own is split
into word runs that compete like sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_contextkit.compaction.facts import split_sentences

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_contextkit.tokens.count import TokenCounter

    UnitScore = Callable[[str, "str | None", bool, int], int]
    """`score(text, label, under_heading, line)`: how much one unit is worth keeping
    (`line`: the index of its line among the text's non-empty lines)."""

__all__ = ["BULLET", "ITEM_LABEL", "reduce_to_tokens"]

BULLET = re.compile(r"^(?:[-*•·]|\d{1,2}[.)])\s+")
"""A list item's bullet (``-``, ``*``, ``1.``)."""

ITEM_LABEL = re.compile(r"^(User|Assistant|System|Note|Tool(?: \([^)]*\))?|Step \d+):\s+")
"""The origin a recap item names (``- User: ...``); an item without one has none."""

_PIECE_SHARE = 4
"""A sentence longer than the cap is split into runs of at most a quarter of it."""


@dataclass(frozen=True, slots=True)
class _Unit:
    line: int  # index of its line in the recap
    text: str
    score: int
    cost: int  # its tokens (the space or line break that joins it comes on top)


def reduce_to_tokens(
    text: str,
    max_tokens: int,
    counter: TokenCounter,
    *,
    score: UnitScore,
    is_heading: Callable[[str], bool],
) -> str:
    """`text` within `max_tokens`: its best units kept in order, the weakest dropped.

    Args:
        text: A recap (structured lines or prose).
        max_tokens: The cap (the text comes back unchanged when it fits).
        counter: Counts the tokens of one string.
        score: Scores one unit (a sentence of a line) given the line's origin label,
            whether it stands under a heading, and the line's index among the non-empty
            lines; higher is kept first.
        is_heading: Whether a line is a section heading (kept only with an item of its).

    Returns:
        The reduced text ("" when not even one unit fits). Among equal scores the units
        nearest either end stay (the opening and the newest lines), as in the extractive
        selection.
    """
    text = text.strip()
    if counter(text) <= max_tokens:
        return text
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    heading_of: list[int | None] = []  # each line's heading (its own index for a heading)
    prefixes: dict[int, str] = {}
    units: list[_Unit] = []
    current: int | None = None
    for index, line in enumerate(lines):
        if is_heading(line):
            current = index
            heading_of.append(index)
            continue
        heading_of.append(current)
        bullet = BULLET.match(line)
        rest = line[bullet.end() :] if bullet else line
        label = ITEM_LABEL.match(rest)
        body = rest[label.end() :] if label else rest
        prefixes[index] = line[: len(line) - len(body)]
        origin = label.group(1) if label else None
        under = current is not None
        units.extend(
            _Unit(index, piece, score(piece, origin or _named(piece), under, index), counter(piece))
            for piece in _pieces(body, max_tokens, counter)
        )
    last = len(units) - 1
    ranked = sorted(range(len(units)), key=lambda k: (-units[k].score, min(k, last - k)))
    kept: list[int] = []  # best first
    started: set[int] = set()
    used = 0
    for k in ranked:
        unit = units[k]
        cost = unit.cost + (1 if kept else 0)
        if unit.line not in started:
            cost += counter(prefixes[unit.line]) if prefixes[unit.line] else 0
            heading = heading_of[unit.line]
            if heading is not None and not any(heading_of[s] == heading for s in started):
                cost += counter(lines[heading]) + 1
        if used + cost > max_tokens:
            continue
        kept.append(k)
        started.add(unit.line)
        used += cost
    out = _render(lines, heading_of, prefixes, units, kept)
    # Costs were counted unit by unit; the joined text is checked once and its weakest
    # units dropped while it is still over.
    while kept and counter(out) > max_tokens:
        kept.pop()
        out = _render(lines, heading_of, prefixes, units, kept)
    return out


def _named(piece: str) -> str | None:
    """The origin a sentence names inline (``- User: ...`` inside a one-line reply)."""
    match = ITEM_LABEL.match(BULLET.sub("", piece, count=1))
    return match.group(1) if match else None


def _render(
    lines: list[str],
    heading_of: list[int | None],
    prefixes: dict[int, str],
    units: list[_Unit],
    kept: list[int],
) -> str:
    """The kept units in their lines, in order; headings with a kept item of theirs."""
    by_line: dict[int, list[str]] = {}
    for k in sorted(kept):
        by_line.setdefault(units[k].line, []).append(units[k].text)
    live_headings = {heading_of[line] for line in by_line}
    out: list[str] = []
    for index, line in enumerate(lines):
        if index not in prefixes:  # a heading
            if index in live_headings:
                out.append(line)
        elif index in by_line:
            out.append(prefixes[index] + " ".join(by_line[index]))
    return "\n".join(out)


def _pieces(body: str, max_tokens: int, counter: TokenCounter) -> list[str]:
    """The sentences of `body`; one longer than the cap split into runs of its words."""
    size = max(1, max_tokens // _PIECE_SHARE)
    out: list[str] = []
    for sentence in split_sentences(body) or [body.strip()]:
        if counter(sentence) <= max_tokens:
            out.append(sentence)
            continue
        run, run_cost = "", 0
        for word in sentence.split():
            for number, part in enumerate(_word_parts(word, size, max_tokens, counter)):
                cost = counter(part) + 1
                if run and run_cost + cost > size:
                    out.append(run)
                    run, run_cost = "", 0
                # The pieces of one word (a CJK run) join without a space.
                joint = "" if not run or number else " "
                run += joint + part
                run_cost += cost
        if run:
            out.append(run)
    return [piece for piece in out if piece]


def _word_parts(word: str, size: int, limit: int, counter: TokenCounter) -> list[str]:
    """`word`, or pieces of `size` when it alone exceeds `limit` (a CJK run has no spaces)."""
    cost = counter(word)
    if cost <= limit:
        return [word]
    step = max(1, len(word) * size // (cost + 1))
    return [word[i : i + step] for i in range(0, len(word), step)]
