"""The builder's token budget: its knobs (`ContextConfig`) and the two-round quota allocator.

Round one gives each source its ratio of the budget; round two lends idle tokens to the
sources that still have candidates, in proportion to what each still wants. A model's whole
window is split by [`WindowBudget`][langchain_contextkit.agent.window_budget.WindowBudget].
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence  # noqa: TC003 - pydantic resolves the fields
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from langchain_contextkit.errors import ConfigError, check_count, check_fraction

__all__ = [
    "DEFAULT_SOURCE_RATIOS",
    "ContextConfig",
    "SourceAllocation",
    "SourceDemand",
    "allocate",
]

DEFAULT_SOURCE_RATIOS: Mapping[str, float] = MappingProxyType(
    {"history": 0.35, "rag": 0.30, "memory": 0.20, "tool": 0.15}
)
"""The default share of the dynamic region per source."""

_RATIO_SLACK = 1e-9  # ratios such as 0.35 + 0.30 + 0.20 + 0.15 do not sum to 1.0 exactly in floats


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextConfig:
    """The context builder's budget knobs; frozen and validated at construction.

    Budgets are ratios, not absolute numbers, so moving to a model with a larger window
    is a matter of scaling, not re-tuning.

    Example:
        ```python
        from langchain_contextkit.retrieval.budget import ContextConfig

        config = ContextConfig(max_tokens=10_000)
        assert config.output_reserve == 2_000
        assert config.quotas() == {"history": 2800, "rag": 2400, "memory": 1600, "tool": 1200}
        ```
    """

    max_tokens: int | None = None
    """Whole context budget. No hard-coded default: set it from the model's real window."""

    output_reserve_ratio: float = 0.2
    """Share reserved for the output and the current question; never given to candidates."""

    source_ratios: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SOURCE_RATIOS))
    """Each source's share of the dynamic region, keyed by source name."""

    mmr_lambda: float = 0.7
    """Passed to `mmr_select` as `lambda_`."""

    dedup_threshold: float = 0.95
    """Passed to `mmr_select` as `dedup_threshold`; above 1 disables near-duplicate drops."""

    allow_borrow: bool = True
    """Whether idle quota is lent, in a second round, to sources with candidates left."""

    min_chunk_tokens: int = 64
    """The size of one candidate that every quota must be able to hold (a sanity check)."""

    data_boundary_sections: frozenset[str] | None = None
    """Sections fenced as data, not instructions (`with_data_boundary`). None: the ``rag``
    and ``tool`` sections of a block (`build_block`), nothing in the flat `build`."""

    def __post_init__(self) -> None:
        """Validate every knob; a bad configuration fails here, before any fetch."""
        if self.max_tokens is not None:
            check_count("max_tokens", self.max_tokens, minimum=1)
        check_fraction("output_reserve_ratio", self.output_reserve_ratio, high_open=True)
        check_fraction("mmr_lambda", self.mmr_lambda)
        if not isinstance(self.dedup_threshold, (int, float)) or not self.dedup_threshold > 0:
            msg = (
                "dedup_threshold must be > 0 (above 1 disables dropping), "
                f"got {self.dedup_threshold!r}."
            )
            raise ConfigError(msg)
        check_count("min_chunk_tokens", self.min_chunk_tokens, minimum=1)
        ratios = dict(self.source_ratios)
        if not ratios:
            msg = "source_ratios must name at least one source."
            raise ConfigError(msg)
        for name, ratio in ratios.items():
            if not isinstance(name, str) or not name:
                msg = f"source_ratios keys must be non-empty strings, got {name!r}."
                raise ConfigError(msg)
            check_fraction(f"source_ratios[{name!r}]", ratio, low_open=True)
        total = sum(ratios.values())
        if total > 1 + _RATIO_SLACK:
            msg = f"source_ratios must sum to at most 1, got {total:.4g} ({ratios})."
            raise ConfigError(msg)
        object.__setattr__(self, "source_ratios", MappingProxyType(ratios))
        if self.data_boundary_sections is not None:
            object.__setattr__(
                self, "data_boundary_sections", frozenset(self.data_boundary_sections)
            )
        if self.max_tokens is not None:
            self._check_quotas(self.dynamic_tokens)

    def _check_quotas(self, dynamic: int) -> None:
        for name, quota in self.quotas(dynamic).items():
            if quota < self.min_chunk_tokens:
                msg = (
                    f"The {name!r} quota is {quota} tokens ({self.source_ratios[name]:.0%} of a "
                    f"{dynamic}-token dynamic region), smaller than min_chunk_tokens="
                    f"{self.min_chunk_tokens}: it could never hold one candidate. Raise max_tokens "
                    "or the ratio, or lower min_chunk_tokens."
                )
                raise ConfigError(msg)

    @classmethod
    def for_window(
        cls,
        context_window: int | None,
        *,
        use_ratio: float = 0.5,
        fallback_window: int | None = None,
        **kwargs: Any,  # noqa: ANN401 - the other fields of ContextConfig
    ) -> ContextConfig:
        """Build a config whose `max_tokens` is `use_ratio` of a model's window.

        Args:
            context_window: The model's window in tokens; None when unknown.
            use_ratio: Share of the window given to the context (the rest is headroom).
            fallback_window: The window to assume when `context_window` is None. There is
                no default: an unknown window must be pinned explicitly, never guessed.
            **kwargs: Any other `ContextConfig` field.

        Returns:
            The config.

        Raises:
            ConfigError: If the window is unknown and no fallback is given, or a value is
                out of range.
        """
        check_fraction("use_ratio", use_ratio, low_open=True)
        window = context_window if context_window is not None else fallback_window
        if window is None:
            msg = (
                "The model's context window is unknown: pass fallback_window=... to pin a "
                "conservative value explicitly."
            )
            raise ConfigError(msg)
        check_count("context_window", window, minimum=1)
        return cls(max_tokens=int(window * use_ratio), **kwargs)

    @property
    def output_reserve(self) -> int:
        """Tokens reserved for the output and the current question (0 without max_tokens)."""
        if self.max_tokens is None:
            return 0
        return math.ceil(self.max_tokens * self.output_reserve_ratio)

    @property
    def dynamic_tokens(self) -> int:
        """Tokens the sources share: `max_tokens` minus the output reserve.

        Raises:
            ConfigError: If `max_tokens` is not set.
        """
        if self.max_tokens is None:
            msg = "max_tokens is not set: use ContextConfig.for_window(...) or pass a budget."
            raise ConfigError(msg)
        return self.max_tokens - self.output_reserve

    def quotas(self, dynamic: int | None = None) -> dict[str, int]:
        """Round one of the allocation: each source's ratio of the dynamic region.

        Args:
            dynamic: Tokens to share; `dynamic_tokens` when None.
        """
        region = self.dynamic_tokens if dynamic is None else dynamic
        return {name: int(region * ratio) for name, ratio in self.source_ratios.items()}


@dataclass(frozen=True, slots=True)
class SourceDemand:
    """What one source asks of the budget: its candidates' costs and their priority order.

    `order` may be lazy (MMR picks): the allocator pulls from it only while the source has
    room for its cheapest candidate. Candidates it never yields are never kept.
    """

    name: str
    """The source's name (its quota)."""

    costs: Sequence[int]
    """Token cost of each candidate, by candidate index."""

    overhead: int = 0
    """Paid once if any candidate is kept (the section heading)."""

    order: Iterable[int] | None = None
    """Candidate indices, best first; all of them in index order when None."""


@dataclass(frozen=True, slots=True)
class SourceAllocation:
    """How the allocator treated one source."""

    name: str
    quota: int
    """Round-one quota: the source's ratio of the budget."""

    used: int
    """Tokens spent on kept candidates and the overhead."""

    kept: tuple[int, ...]
    """Indices of kept candidates, in priority order."""

    ranked: tuple[int, ...] = ()
    """Indices of every candidate the allocator pulled from the order, in priority order."""

    @property
    def passed_over(self) -> tuple[int, ...]:
        """Ranked candidates that did not fit, in priority order."""
        kept = set(self.kept)
        return tuple(i for i in self.ranked if i not in kept)

    @property
    def borrowed(self) -> int:
        """Tokens used beyond the quota, lent by idle quotas in round two."""
        return max(0, self.used - self.quota)


class _Ledger:
    """Mutable state of one source in one allocation run."""

    def __init__(self, demand: SourceDemand, quota: int) -> None:
        self.demand = demand
        self.quota = quota
        self.used = 0
        self.costs = demand.costs
        self.order: Iterator[int] = iter(
            range(len(demand.costs)) if demand.order is None else demand.order
        )
        self.exhausted = not demand.costs
        self.cheapest = min(demand.costs, default=0)
        self.unranked_cost = sum(demand.costs)  # candidates not yet pulled from `order`
        self.rank: dict[int, int] = {}  # candidate index -> position in `order`
        self.kept: list[int] = []
        self.passed_over: list[int] = []

    def price(self, index: int) -> int:
        return self.costs[index] + (0 if self.kept else self.demand.overhead)

    def _pull(self) -> int | None:
        index = next(self.order, None)
        if index is None:
            self.exhausted, self.unranked_cost = True, 0
            return None
        self.rank[index] = len(self.rank)
        self.unranked_cost -= self.costs[index]
        return index

    def take_fitting(self, room: int) -> int:
        """Keep candidates in priority order while they fit in `room`; return tokens spent.

        Candidates passed over earlier are tried first (they rank higher), then new ones
        are pulled from the order while the room could still hold the cheapest candidate.
        """
        spent = 0
        passed_over = []
        for index in self.passed_over:
            if self.price(index) <= room - spent:
                spent += self.price(index)
                self.kept.append(index)
            else:
                passed_over.append(index)
        self.passed_over = passed_over
        while not self.exhausted and room - spent >= self.cheapest_price():
            pulled = self._pull()
            if pulled is None:
                break
            if self.price(pulled) <= room - spent:
                spent += self.price(pulled)
                self.kept.append(pulled)
            else:
                self.passed_over.append(pulled)
        self.used += spent
        return spent

    def cheapest_price(self) -> int:
        """A lower bound of what any candidate not yet ranked would cost."""
        return self.cheapest + (0 if self.kept else self.demand.overhead)

    def wanted(self) -> int:
        """Tokens this source could still use: passed-over and not-yet-ranked candidates."""
        want = sum(self.costs[i] for i in self.passed_over) + self.unranked_cost
        # Zero-cost candidates still want the heading: test for candidates, not for cost.
        remaining = bool(self.passed_over) or not self.exhausted
        return want + (self.demand.overhead if remaining and not self.kept else 0)

    def result(self) -> SourceAllocation:
        return SourceAllocation(
            self.demand.name,
            self.quota,
            self.used,
            tuple(sorted(self.kept, key=self.rank.__getitem__)),
            tuple(self.rank),  # dicts keep insertion order: the order of pulling
        )


def allocate(
    budget: int,
    ratios: Mapping[str, float],
    demands: Sequence[SourceDemand],
    *,
    allow_borrow: bool = True,
) -> dict[str, SourceAllocation]:
    """Split `budget` tokens between sources in two rounds.

    Round one gives each source `int(budget * ratio)` and keeps its candidates in priority
    order while they fit (one that does not fit is skipped; a smaller one after it may
    fit). Round two, when `allow_borrow`, pools every idle token and lends it to the
    sources that still have candidates, in proportion to what each still wants; a last
    pass gives what is still idle to any candidate that fits.

    Args:
        budget: Tokens to share.
        ratios: Share of each source, keyed by name; they sum to at most 1.
        demands: One entry per source present in this run.
        allow_borrow: Whether round two runs.

    Returns:
        One `SourceAllocation` per demand, keyed by source name. Their `used` sums to at
        most `budget`, and each source's `used` is at most its quota plus `borrowed`.

    Raises:
        ConfigError: For a negative budget, a source missing from `ratios`, a repeated
            source, or a negative cost.
    """
    check_count("budget", budget, minimum=0)
    ledgers: list[_Ledger] = []
    for demand in demands:
        if demand.name not in ratios:
            msg = f"Source {demand.name!r} has no ratio (known: {sorted(ratios)})."
            raise ConfigError(msg)
        if any(ledger.demand.name == demand.name for ledger in ledgers):
            msg = f"Two sources are named {demand.name!r}."
            raise ConfigError(msg)
        if demand.overhead < 0 or any(cost < 0 for cost in demand.costs):
            msg = f"Source {demand.name!r} has a negative cost."
            raise ConfigError(msg)
        ledgers.append(_Ledger(demand, int(budget * ratios[demand.name])))

    for ledger in ledgers:
        ledger.take_fitting(ledger.quota)

    if allow_borrow:
        _lend_idle_tokens(budget, ledgers)
    return {ledger.demand.name: ledger.result() for ledger in ledgers}


def _lend_idle_tokens(budget: int, ledgers: list[_Ledger]) -> None:
    idle = budget - sum(ledger.used for ledger in ledgers)
    wants = {id(ledger): ledger.wanted() for ledger in ledgers}
    total_want = sum(wants.values())
    if idle <= 0 or total_want == 0:
        return
    # Lend by remaining demand: each borrower's share is proportional to what it still wants.
    shares = {
        id(ledger): min(wants[id(ledger)], idle * wants[id(ledger)] // total_want)
        for ledger in ledgers
    }
    for ledger in ledgers:
        share = shares[id(ledger)]
        if share:
            idle -= ledger.take_fitting(share)
    # Shares too small for a borrower's next candidate return to the pool; any candidate
    # that fits what is left takes it, the hungriest source first.
    for ledger in sorted(ledgers, key=lambda item: item.wanted(), reverse=True):
        idle -= ledger.take_fitting(idle)
