"""A model's recap held to its cap, keeping what the extractive recap would keep.

A summariser's reply may run far over its cap, drop half of what it was given, come back
as prose or on one line. The reply is reduced by score, never cut at its end, and the
*floor* is added back: the user's facts (their items with a distinctive token, below)
and the decisions that the extractive recap of the same span, at the same cap, keeps and
the reply lacks. Three ranks compete for the cap, each by score (`summarizers`' scoring:
the user's facts, decisions, numbers and ids first): the reply's own facts and decisions,
then the floor's items it lacks, then the rest of the reply. So a reply's filler, however
long, gives way to the user's facts; and a reply that keeps facts the extractive
selection would not (it judges better than a score) keeps them.

When a reply lacks an item (the rule):
    The item's distinctive tokens are its salient facts (`facts.salient_facts`: numbers,
    dates, amounts, ids) and its proper names (capitalised words other than its first).
    The reply lacks the item when any of them is missing from it as a whole token (``12``
    is not in ``TKT-4812``, nor ``item-7`` in ``item-70``). An item with no distinctive
    token (a decision) is lacking when its words, case and punctuation aside, do not
    occur in the reply.

A floor item that the reduced reply no longer holds (the reply's line that carried it
went to make room) is then added in its own right, a bounded number of rounds.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from langchain_contextkit.compaction._recap_reduce import reduce_to_tokens
from langchain_contextkit.compaction.extractive import ExtractiveSummarizer, previous_sentences
from langchain_contextkit.compaction.facts import has_decision, normalised, salient_facts
from langchain_contextkit.compaction.recap_format import RecapLine, recap_heading_of
from langchain_contextkit.compaction.summarizers import _section_items, unit_score

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.prompts import Fidelity, PromptRegistry
    from langchain_contextkit.tokens.count import TokenCounter

__all__ = ["distinctive_tokens", "floor_items", "held_recap", "lacks"]

_ROUNDS = 4
"""Rounds of adding back the floor's items that a reduction dropped with a reply's line."""

_NAME = re.compile(r"(?<![\w-])[A-Z][a-z]+[A-Za-z]*(?![\w-])")
_MIN_NAME = 3


def distinctive_tokens(text: str) -> list[str]:
    """What identifies an item: its salient facts and its proper names (module docs).

    Example:
        ```python
        from langchain_contextkit.compaction._recap_fit import distinctive_tokens

        print(distinctive_tokens("Fact: the code for item-7 is 493021, says Alice."))
        # ['item-7', '493021', 'Alice']
        ```
    """
    facts = salient_facts(text)
    names = [
        m.group() for m in _NAME.finditer(text) if m.start() > 0 and len(m.group()) >= _MIN_NAME
    ]
    return list(dict.fromkeys([*facts, *names]))


def lacks(item: str, text: str) -> bool:
    """Whether `text` lacks the recap item `item` (the rule in the module docs)."""
    tokens = distinctive_tokens(item)
    if not tokens:
        return normalised(item) not in normalised(text)
    return any(re.search(rf"(?<!\w){re.escape(t)}(?!\w)", text) is None for t in tokens)


def floor_items(extractive: str, prompts: PromptRegistry) -> list[RecapLine]:
    """The extractive recap's user facts and decisions: what no recap may keep fewer of.

    A user's item is a fact when it has a distinctive token; a question or a remark
    without one is left to the summariser's judgement.
    """
    items = previous_sentences(extractive.splitlines(), prompts)
    return [
        s
        for s in items
        if s.section == "decisions" or (s.label in {None, "User"} and distinctive_tokens(s.text))
    ]


def held_recap(
    reply: str,
    tier: Fidelity | None,
    *,
    floor: str,
    max_tokens: int,
    prompts: PromptRegistry,
    counter: TokenCounter,
    fidelity: Fidelity,
) -> tuple[str, Fidelity | None]:
    """`reply` within `max_tokens`, with the floor's items it lacks added back.

    Three ranks compete for the cap, each by score within it: the reply's own facts
    and decisions (units with a distinctive token, or a decision), then the floor's items
    the reply lacks, then the rest of the reply (its words without a fact).

    Args:
        reply: The summariser's recap as read (canonical sections, or prose), not reduced.
        tier: Its fidelity tier (None for prose or a format of its own).
        floor: The extractive recap of the same span at the same cap ("" for none).
        max_tokens: The recap's cap.
        prompts: Headings and language.
        counter: Counts the tokens of one string.
        fidelity: The configured tier (a structured reply steps down from it to fit).

    Returns:
        The recap and its tier.
    """
    needed = floor_items(floor, prompts) if floor else []
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    structured = any(recap_heading_of(line, prompts) is not None for line in lines)
    items = _section_items(lines, prompts) if structured else None
    added = [s for s in needed if lacks(s.text, reply)]
    if items is None and not added and counter(reply) <= max_tokens:
        return reply.strip(), tier  # prose that fits and lacks nothing: as written
    summarizer = ExtractiveSummarizer(
        max_tokens=max_tokens, counter=counter, prompts=prompts, fidelity=fidelity
    )
    text, used_tier = reply, tier
    for _ in range(_ROUNDS):
        if items is not None:
            text, used_tier = _with_items(summarizer, items, added)
        else:
            text = _with_lines(lines, added, max_tokens, prompts, counter)
        # A reply's line that carried a floor item may have made room for another: its
        # item then competes in its own right.
        missing = [s for s in needed if s not in added and lacks(s.text, text)]
        if not missing:
            break
        added += missing
    return text, used_tier


_REPLY_FACT = 2_000
_FLOOR = 1_000
"""Rank offsets: the reply's facts, then the floor's items, then the reply's other words."""


def _rank(text: str, score: int) -> int:
    """A reply unit's score, raised to the first rank when it states a fact or decision."""
    return score + _REPLY_FACT if distinctive_tokens(text) or has_decision(text) else score


def _with_items(
    summarizer: ExtractiveSummarizer, items: Sequence[RecapLine], added: Sequence[RecapLine]
) -> tuple[str, Fidelity]:
    """A structured reply's items and the added ones, chosen by rank within the cap.

    The added items follow the reply's items in their sections.
    """
    after = len(items)
    ranked = [dataclasses.replace(s, score=_rank(s.text, s.score)) for s in items]
    boosted = [
        dataclasses.replace(s, position=after + n, score=_FLOOR + s.score)
        for n, s in enumerate(added)
    ]
    return summarizer._fitted([*ranked, *boosted], trusted=True)  # noqa: SLF001 - the format's own


def _with_lines(
    lines: Sequence[str],
    added: Sequence[RecapLine],
    max_tokens: int,
    prompts: PromptRegistry,
    counter: TokenCounter,
) -> str:
    """Prose (or a format of the summariser's own) and the added items' lines after it."""
    own = len(lines)
    scores = {s.line(prompts): s.score for s in added}

    def score(text: str, label: str | None, under: bool, line: int) -> int:  # noqa: FBT001
        base = unit_score(text, label, under)
        return _FLOOR + base if line >= own else _rank(text, base)

    combined = "\n".join([*lines, *scores])
    return reduce_to_tokens(
        combined,
        max_tokens,
        counter,
        score=score,
        is_heading=lambda line: recap_heading_of(line, prompts) is not None,
    )
