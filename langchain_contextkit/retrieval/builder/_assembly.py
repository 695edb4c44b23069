"""The builder's work after the fetch: MMR per source, the budget, the fixed layout.

Pure functions over `RetrievalResult`s: no I/O, no LLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_contextkit.retrieval.budget import (
    ContextConfig,
    SourceAllocation,
    SourceDemand,
    allocate,
)
from langchain_contextkit.retrieval.builder.report import ContextReport, SourceReport
from langchain_contextkit.retrieval.mmr import MMRRanking
from langchain_contextkit.tokens.count import count_each

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain_contextkit.prompts import PromptRegistry
    from langchain_contextkit.retrieval.builder.gather import Gathered
    from langchain_contextkit.retrieval.result import RetrievalResult
    from langchain_contextkit.tokens.count import TokenCounter

__all__ = ["SECTION_ORDER", "assemble", "section_names"]

SECTION_ORDER = ("memory", "rag", "notes", "history", "tool")
"""Fixed layout between the system prompt and the current question (the golden
positions: the system prompt first, the current question last). Other source names follow
these, in the order of `source_ratios`."""

_ITEM_PREFIX = "- "


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


def assemble(
    gathered: Gathered,
    *,
    budget: int,
    config: ContextConfig,
    prompts: PromptRegistry,
    counter: TokenCounter,
    fenced: frozenset[str],
) -> ContextReport:
    """MMR each source's candidates, allocate the budget, render the block and report.

    Each source's candidates are ranked by MMR lazily: the allocator pulls picks only
    while the source could still fit its cheapest candidate. The allocator prices each
    candidate by its rendered line and each section by its heading (and fence); token
    counts of pieces do not add up exactly to the count of the whole, so the rendered
    block is measured: while it is over `budget` the lowest-scored kept candidate is
    dropped, and while it has room the best passed-over candidate that fits is added.

    Args:
        gathered: Each source's candidates in the source's own ranking, its failure and
            its time.
        budget: Tokens the block may take.
        config: Ratios, MMR knobs and borrowing.
        prompts: Headings.
        counter: Token counter.
        fenced: Sections wrapped in a data boundary.

    Returns:
        The report, whose `text` is the block.
    """
    fetched = gathered.results
    rankings = {
        name: MMRRanking(
            candidates, lambda_=config.mmr_lambda, dedup_threshold=config.dedup_threshold
        )
        for name, candidates in fetched.items()
    }
    demands = [
        SourceDemand(
            name,
            [
                n + 1
                for n in count_each([_ITEM_PREFIX + c.content for c in ranking.candidates], counter)
            ],
            overhead=counter(render_section(name, [], prompts, fenced=name in fenced)) + 1,
            order=iter(ranking),
        )
        for name, ranking in rankings.items()
    ]
    allocation = allocate(budget, config.source_ratios, demands, allow_borrow=config.allow_borrow)
    layout = _Layout(
        rankings,
        {name: list(share.kept) for name, share in allocation.items()},
        config,
        prompts,
        fenced,
    )

    measured = layout.measure(counter)
    prices = {d.name: d for d in demands}
    if (
        config.allow_borrow
        and measured < budget
        and layout.fill(allocation, prices, budget - measured, counter, measured=measured)
    ):
        measured = layout.measure(counter)
    while measured > budget:  # the rendered block, measured whole, is what must fit
        layout.drop_weakest()
        measured = layout.measure(counter)

    lines = []
    for name, ranking in rankings.items():
        share = allocation[name]
        kept = len(layout.kept[name])
        lines.append(
            SourceReport(
                name=name,
                quota=share.quota,
                borrowed=share.borrowed,
                used=share.used,
                fetched=len(fetched[name]),
                merged=ranking.merged,
                dropped_by_mmr=ranking.dropped,
                dropped_for_budget=len(fetched[name]) - ranking.merged - ranking.dropped - kept,
                kept=kept,
                error=gathered.errors.get(name),
                seconds=round(gathered.seconds.get(name, 0.0), 6),
            )
        )
    items = tuple(
        r for name in section_names(config) if name in rankings for r in layout.kept_results(name)
    )
    return ContextReport(layout.text, budget, measured, tuple(lines), items)


_FILL_SLACK = 4
"""Tokens a piece's separate price may overstate its cost inside the block."""
_MAX_FAILED_FILLS = 8
"""Fill attempts that may fail before the fill pass gives up (bounds the re-renders)."""


class _Layout:
    """The kept candidates (indices into each ranking) and their rendered block."""

    def __init__(
        self,
        rankings: Mapping[str, MMRRanking],
        kept: dict[str, list[int]],
        config: ContextConfig,
        prompts: PromptRegistry,
        fenced: frozenset[str],
    ) -> None:
        self.rankings = rankings
        self.kept = kept  # per source, in priority order
        self.config, self.prompts, self.fenced = config, prompts, fenced
        self.text = self._render(kept)

    def kept_results(self, name: str) -> list[RetrievalResult]:
        return [self.rankings[name].candidates[i] for i in self.kept[name]]

    def _render(self, kept: Mapping[str, list[int]]) -> str:
        results = {
            name: [self.rankings[name].candidates[i] for i in indices]
            for name, indices in kept.items()
        }
        return render_block(results, self.config, self.prompts, self.fenced)

    def measure(self, counter: TokenCounter) -> int:
        return counter(self.text) if self.text else 0

    def drop_weakest(self) -> None:
        """Drop the lowest-scored kept candidate (the lowest-priority one among equals)."""
        name, position = min(
            ((n, p) for n, indices in self.kept.items() for p in range(len(indices))),
            key=lambda pair: (
                self.rankings[pair[0]].candidates[self.kept[pair[0]][pair[1]]].score,
                -pair[1],
            ),
        )
        del self.kept[name][position]
        self.text = self._render(self.kept)

    def _section_size(self, name: str, counter: TokenCounter, measured: int | None) -> int:
        """Tokens of `name`'s section as kept; a block of that one section is `measured`."""
        if not self.kept[name]:
            return 0
        text = self._section(name, self.kept[name])
        return measured if measured is not None and text == self.text else counter(text)

    def _section(self, name: str, indices: list[int]) -> str:
        items = [self.rankings[name].candidates[i].content for i in indices]
        return render_section(name, items, self.prompts, fenced=name in self.fenced)

    def fill(
        self,
        allocation: Mapping[str, SourceAllocation],
        demands: Mapping[str, SourceDemand],
        room: int,
        counter: TokenCounter,
        *,
        measured: int | None = None,
    ) -> bool:
        """Add passed-over candidates while the block seems to have room; True if any was.

        The allocator prices pieces separately, which overestimates a little (a line
        break is cheaper inside a text than alone), so the rendered block usually has a
        few idle tokens: give them to the best passed-over candidates that fit. A trial
        re-measures only the section it changes (the block can be large); the caller
        measures the whole block afterwards and trims it if the estimate was off.
        """
        failures = 0
        added = False
        for name, share in allocation.items():
            demand = demands[name]
            rank = {index: position for position, index in enumerate(share.ranked)}
            section_size = self._section_size(name, counter, measured)
            for index in share.passed_over:
                if failures >= _MAX_FAILED_FILLS or room <= 0:
                    break
                price = demand.costs[index] + (0 if self.kept[name] else demand.overhead)
                if price > room + _FILL_SLACK:
                    continue
                trial = sorted([*self.kept[name], index], key=rank.__getitem__)
                trial_size = counter(self._section(name, trial))
                # Sections are joined by a blank line; keep one token of margin for it.
                growth = trial_size - section_size + (0 if self.kept[name] else 1)
                if growth < room:
                    self.kept[name], section_size, room = trial, trial_size, room - growth
                    added = True
                else:
                    failures += 1
        if added:
            self.text = self._render(self.kept)
        return added
