"""The builder's work after the fetch: MMR per source, the budget, the fixed layout.

Pure functions over `RetrievalResult`s (no I/O, no LLM), shared by `ContextBuilder` and
`BudgetedRetriever` so both keep exactly the same candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_contextkit.budget import ContextConfig, SourceDemand, allocate
from langchain_contextkit.mmr import RetrievalResult, mmr_select

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain_contextkit.prompts import PromptRegistry
    from langchain_contextkit.tokens import TokenCounter

__all__ = ["SECTION_ORDER", "Assembly", "SourceOutcome", "assemble", "section_names"]

SECTION_ORDER = ("memory", "rag", "notes", "history", "tool")
"""Fixed layout between the system prompt and the current question (seed 004's golden
positions: the system prompt first, the current question last). Other source names follow
these, in the order of `source_ratios`."""

_ITEM_PREFIX = "- "


@dataclass(slots=True)
class SourceOutcome:
    """What happened to one source's candidates in one build."""

    name: str
    fetched: int = 0
    merged: int = 0
    """Byte-identical duplicates merged before MMR."""
    dropped_by_mmr: int = 0
    """Near-duplicates dropped by MMR."""
    dropped_for_budget: int = 0
    quota: int = 0
    borrowed: int = 0
    used: int = 0
    """Tokens of the source's section as allocated (heading included)."""
    kept: list[RetrievalResult] = field(default_factory=list)
    error: str | None = None
    """`Type: message` of the exception the source raised, if it failed."""


@dataclass(slots=True)
class Assembly:
    """The kept candidates per source and the rendered block."""

    block: str
    budget: int
    outcomes: dict[str, SourceOutcome]


def section_names(config: ContextConfig) -> list[str]:
    """Every section in layout order: the fixed ones, then custom source names."""
    return [*SECTION_ORDER, *(n for n in config.source_ratios if n not in SECTION_ORDER)]


def render_section(
    name: str, items: Sequence[str], prompts: PromptRegistry, *, fenced: bool
) -> str:
    """Render one section: its heading, then one ``- item`` line per candidate."""
    body = "\n".join(_ITEM_PREFIX + item for item in items)
    heading = prompts.heading(name)
    if fenced:
        return prompts.with_data_boundary(heading, body)
    return f"{heading}\n{body}"


def render_block(
    kept: Mapping[str, Sequence[RetrievalResult]],
    config: ContextConfig,
    prompts: PromptRegistry,
    fenced: frozenset[str],
) -> str:
    """Render every non-empty section in layout order, separated by blank lines."""
    sections = [
        render_section(name, [r.content for r in kept[name]], prompts, fenced=name in fenced)
        for name in section_names(config)
        if kept.get(name)
    ]
    return "\n\n".join(sections)


def _dedup(
    candidates: Sequence[RetrievalResult], config: ContextConfig, outcome: SourceOutcome
) -> list[RetrievalResult]:
    outcome.fetched = len(candidates)
    outcome.merged = len(candidates) - len({c.content for c in candidates})
    selected = mmr_select(
        candidates, lambda_=config.mmr_lambda, dedup_threshold=config.dedup_threshold
    )
    outcome.dropped_by_mmr = len(candidates) - outcome.merged - len(selected)
    return selected


def assemble(
    fetched: Mapping[str, Sequence[RetrievalResult]],
    *,
    budget: int,
    config: ContextConfig,
    prompts: PromptRegistry,
    counter: TokenCounter,
    fenced: frozenset[str],
    errors: Mapping[str, str] | None = None,
) -> Assembly:
    """MMR each source's candidates, allocate the budget, render the block.

    The allocator prices each candidate by its rendered line and each section by its
    heading (and fence). Token counts of pieces do not add up exactly to the count of the
    whole, so the rendered block is measured at the end, and while it is over `budget` the
    lowest-scored kept candidate is dropped: the block never exceeds the budget.

    Args:
        fetched: Each source's candidates in the source's own ranking (sources that failed
            map to an empty list and have an entry in `errors`).
        budget: Tokens the block may take.
        config: Ratios, MMR knobs and borrowing.
        prompts: Headings.
        counter: Token counter.
        fenced: Sections wrapped in a data boundary.
        errors: Failures of sources, by name.

    Returns:
        The block and one outcome per source.
    """
    outcomes = {name: SourceOutcome(name, error=(errors or {}).get(name)) for name in fetched}
    selected = {name: _dedup(c, config, outcomes[name]) for name, c in fetched.items()}
    demands = [
        SourceDemand(
            name,
            [counter(_ITEM_PREFIX + c.content) + 1 for c in candidates],  # + the line break
            overhead=counter(render_section(name, [], prompts, fenced=name in fenced)) + 1,
        )
        for name, candidates in selected.items()
    ]
    allocation = allocate(budget, config.source_ratios, demands, allow_borrow=config.allow_borrow)
    kept: dict[str, list[RetrievalResult]] = {}
    for name, candidates in selected.items():
        share = allocation[name]
        outcome = outcomes[name]
        outcome.quota, outcome.borrowed, outcome.used = share.quota, share.borrowed, share.used
        kept[name] = [candidates[i] for i in share.kept]

    block = render_block(kept, config, prompts, fenced)
    while block and counter(block) > budget:
        _drop_weakest(kept)
        block = render_block(kept, config, prompts, fenced)
    if config.allow_borrow:
        block = _fill_measured_room(
            block, kept, selected, demands, budget, config, prompts, counter, fenced
        )

    for name, candidates in selected.items():
        outcomes[name].kept = kept[name]
        outcomes[name].dropped_for_budget = len(candidates) - len(kept[name])
    return Assembly(block=block, budget=budget, outcomes=outcomes)


_MAX_FAILED_FILLS = 8
"""Fill attempts that may fail before the fill pass gives up (bounds the re-renders)."""


def _fill_measured_room(  # noqa: PLR0913, PLR0917 - the assembly's whole state
    block: str,
    kept: dict[str, list[RetrievalResult]],
    selected: Mapping[str, Sequence[RetrievalResult]],
    demands: Sequence[SourceDemand],
    budget: int,
    config: ContextConfig,
    prompts: PromptRegistry,
    counter: TokenCounter,
    fenced: frozenset[str],
) -> str:
    """Add left-out candidates while the measured block still has room for them.

    The allocator prices pieces separately, which overestimates a little (a line break is
    cheaper inside a text than on its own), so the rendered block usually has a few idle
    tokens: give them to the best left-out candidates that fit, measured on the real text.
    """
    room = budget - (counter(block) if block else 0)
    failures = 0
    costs = {d.name: d for d in demands}
    for name, candidates in selected.items():
        for index, candidate in enumerate(candidates):
            if failures >= _MAX_FAILED_FILLS or room <= 0:
                return block
            price = costs[name].costs[index] + (0 if kept[name] else costs[name].overhead)
            if candidate in kept[name] or price > room + _FILL_SLACK:
                continue
            trial = {**kept, name: _in_rank_order([*kept[name], candidate], candidates)}
            trial_block = render_block(trial, config, prompts, fenced)
            measured = counter(trial_block)
            if measured <= budget:
                kept[name] = trial[name]
                block, room = trial_block, budget - measured
            else:
                failures += 1
    return block


_FILL_SLACK = 4
"""Tokens a piece's separate price may overstate its cost inside the block."""


def _in_rank_order(
    items: list[RetrievalResult], ranking: Sequence[RetrievalResult]
) -> list[RetrievalResult]:
    position = {id(r): i for i, r in enumerate(ranking)}
    return sorted(items, key=lambda r: position[id(r)])


def _drop_weakest(kept: dict[str, list[RetrievalResult]]) -> None:
    """Drop the lowest-scored kept candidate (the last one among equals)."""
    name, index = min(
        ((n, i) for n, items in kept.items() for i in range(len(items))),
        key=lambda pair: (kept[pair[0]][pair[1]].score, -pair[1]),
    )
    del kept[name][index]
