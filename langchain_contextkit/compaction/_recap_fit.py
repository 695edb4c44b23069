"""A model's recap held to its cap, never keeping less than the extractive recap would.

A summariser's reply may run far over its cap, drop half of what it was given, come back
as prose or on one line. The reply is reduced by score (`summarizers.reduce_recap`: the
user's facts, decisions, numbers and ids first), and the *floor* is added back: the
user's facts (their items with a distinctive token, below) and the decisions that the
extractive recap of the same span, at the same cap, keeps and the reply lacks. They are
scored above the reply's own lines, so they stay when the cap is tight; what the reply
says beyond them fills the room left.

When a reply lacks an item (the rule):
    The item's distinctive tokens are its salient facts (`facts.salient_facts`: numbers,
    dates, amounts, ids) and its proper names (capitalised words other than its first).
    The reply lacks the item when any of them is missing from it as a whole token (``12``
    is not in ``TKT-4812``, nor ``item-7`` in ``item-70``). An item with no distinctive
    token is lacking when its words (case and punctuation aside) do not occur in the reply.

If the reduced reply with the items added back still misses one (a reply line that
carried an item was dropped to make room), that item is added too, a bounded number of
rounds; should that not settle, the extractive recap itself is the recap, so the result
never keeps fewer of the floor's items than the extractive one.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from langchain_contextkit.compaction.facts import normalised, salient_facts
from langchain_contextkit.compaction.summarizers import (
    ExtractiveSummarizer,
    _previous_sentences,
    _section_items,
    _Sentence,
    recap_heading_of,
    reduce_recap,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.prompts import Fidelity, PromptRegistry
    from langchain_contextkit.tokens import TokenCounter

__all__ = ["distinctive_tokens", "floor_items", "held_recap", "lacks"]

_ROUNDS = 4
"""Rounds of adding back items a reduction dropped, before the extractive recap stands in."""

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


def floor_items(extractive: str, prompts: PromptRegistry) -> list[_Sentence]:
    """The extractive recap's user facts and decisions: what no recap may keep fewer of.

    A user's item is a fact when it has a distinctive token; a question or a remark
    without one is left to the summariser's judgement.
    """
    items = _previous_sentences(extractive.splitlines(), prompts)
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
    floor_tier: Fidelity | None,
    max_tokens: int,
    prompts: PromptRegistry,
    counter: TokenCounter,
    fidelity: Fidelity,
) -> tuple[str, Fidelity | None]:
    """`reply` within `max_tokens`, with the floor's items it lacks added back.

    Args:
        reply: The summariser's recap as read (canonical sections, or prose), not reduced.
        tier: Its fidelity tier (None for prose or a format of its own).
        floor: The extractive recap of the same span at the same cap ("" for none).
        floor_tier: The tier `floor` was written at.
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
    summarizer = ExtractiveSummarizer(
        max_tokens=max_tokens, counter=counter, prompts=prompts, fidelity=fidelity
    )
    for _ in range(_ROUNDS):
        used_tier: Fidelity | None = tier
        if items is not None:
            text, used_tier = _with_items(summarizer, items, added)
        else:
            text = _with_lines(reply, added, max_tokens, prompts, counter)
        missing = [s for s in needed if s not in added and lacks(s.text, text)]
        if not missing:
            return text, used_tier
        added += missing
    return floor, floor_tier


def _with_items(
    summarizer: ExtractiveSummarizer, items: Sequence[_Sentence], added: Sequence[_Sentence]
) -> tuple[str, Fidelity]:
    """A structured reply's items and the added ones, chosen by score within the cap.

    The added items rank above every item of the reply and follow its items in their
    sections.
    """
    top = max((s.score for s in items), default=0) + 1
    after = len(items)
    boosted = [
        dataclasses.replace(s, position=after + n, score=top + s.score) for n, s in enumerate(added)
    ]
    return summarizer._fitted([*items, *boosted], trusted=True)  # noqa: SLF001 - the format's own


def _with_lines(
    reply: str,
    added: Sequence[_Sentence],
    max_tokens: int,
    prompts: PromptRegistry,
    counter: TokenCounter,
) -> str:
    """Prose (or a format of the summariser's own), reduced, then the added items' lines."""
    lines = "\n".join(s.line(prompts) for s in added)
    if not lines:
        return reduce_recap(reply, max_tokens, prompts=prompts, counter=counter)
    room = max_tokens - counter(lines) - 1
    for _ in range(_ROUNDS):
        prose = reduce_recap(reply, room, prompts=prompts, counter=counter) if room > 0 else ""
        text = f"{prose}\n{lines}" if prose else lines
        over = counter(text) - max_tokens
        if over <= 0:
            return text
        room -= over
    return lines
