import dataclasses
from collections.abc import Iterator

import pytest
from hypothesis import given, settings, strategies as st
from langchain_core.language_models import GenericFakeChatModel

from langchain_contextkit import ConfigError
from langchain_contextkit.agent.window_budget import WindowBudget, WindowBudgetConfig
from langchain_contextkit.retrieval.budget import (
    DEFAULT_SOURCE_RATIOS,
    ContextConfig,
    SourceDemand,
    allocate,
)
from langchain_contextkit.tokens.count import model_limits

# --- ContextConfig ----------------------------------------------------------------------


def test_seed_defaults() -> None:
    config = ContextConfig()
    assert config.max_tokens is None
    assert config.output_reserve_ratio == 0.2
    assert dict(config.source_ratios) == {
        "history": 0.35,
        "rag": 0.30,
        "memory": 0.20,
        "tool": 0.15,
    }
    assert config.mmr_lambda == 0.7
    assert config.dedup_threshold == 0.95
    assert config.allow_borrow is True
    assert config.min_chunk_tokens == 64


def test_config_is_frozen_and_owns_its_ratios() -> None:
    ratios = {"rag": 0.5, "memory": 0.5}
    config = ContextConfig(max_tokens=10_000, source_ratios=ratios)
    ratios["rag"] = 0.9
    assert config.source_ratios["rag"] == 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_tokens = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.source_ratios["rag"] = 0.1  # type: ignore[index]


def test_for_window_uses_half_the_window_by_default() -> None:
    assert ContextConfig.for_window(1_000_000).max_tokens == 500_000
    assert ContextConfig.for_window(None, fallback_window=8000).max_tokens == 4000
    assert ContextConfig.for_window(8000, use_ratio=0.25).max_tokens == 2000
    assert ContextConfig.for_window(8000, mmr_lambda=0.5).mmr_lambda == 0.5


def test_for_window_has_no_silent_fallback() -> None:
    with pytest.raises(ConfigError, match="fallback_window"):
        ContextConfig.for_window(None)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"source_ratios": {"rag": 0.7, "memory": 0.5}}, "sum to at most 1"),
        ({"source_ratios": {"rag": 0.0}}, "source_ratios"),
        ({"source_ratios": {"rag": 1.5}}, "source_ratios"),
        ({"source_ratios": {}}, "at least one"),
        ({"source_ratios": {"": 0.5}}, "non-empty"),
        ({"output_reserve_ratio": 1.0}, "output_reserve_ratio"),
        ({"output_reserve_ratio": -0.1}, "output_reserve_ratio"),
        ({"mmr_lambda": 1.5}, "mmr_lambda"),
        ({"dedup_threshold": 0}, "dedup_threshold"),
        ({"min_chunk_tokens": 0}, "min_chunk_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 500}, "quota"),  # 500 * 0.8 * 0.15 = 60 < 64
    ],
)
def test_bad_configs_fail_at_construction(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ContextConfig(**kwargs)  # type: ignore[arg-type]


def test_quota_check_names_the_source() -> None:
    with pytest.raises(ConfigError, match="'tool' quota is 60"):
        ContextConfig(max_tokens=500)
    assert ContextConfig(max_tokens=500, min_chunk_tokens=60).quotas()["tool"] == 60


def test_quotas_and_reserve() -> None:
    config = ContextConfig(max_tokens=10_000)
    assert config.output_reserve == 2000
    assert config.dynamic_tokens == 8000
    assert config.quotas() == {"history": 2800, "rag": 2400, "memory": 1600, "tool": 1200}
    assert sum(config.quotas(1000).values()) <= 1000


def test_dynamic_tokens_needs_max_tokens() -> None:
    with pytest.raises(ConfigError, match="max_tokens is not set"):
        _ = ContextConfig().dynamic_tokens


# --- allocate ---------------------------------------------------------------------------------


def test_round_one_keeps_each_source_in_its_quota() -> None:
    result = allocate(
        1000,
        {"rag": 0.5, "memory": 0.5},
        [SourceDemand("rag", [300, 300, 300]), SourceDemand("memory", [100])],
        allow_borrow=False,
    )
    assert result["rag"].kept == (0,)
    assert result["rag"].used == 300
    assert result["memory"].used == 100
    assert result["rag"].borrowed == 0


def test_round_two_lends_idle_quota() -> None:
    result = allocate(
        1000,
        {"rag": 0.5, "memory": 0.5},
        [SourceDemand("rag", [300, 300, 300]), SourceDemand("memory", [100])],
    )
    assert result["rag"].kept == (0, 1, 2)
    assert result["rag"].used == 900
    assert result["rag"].borrowed == 400
    assert result["memory"].used == 100


def test_skips_a_candidate_too_big_and_keeps_a_smaller_one() -> None:
    result = allocate(100, {"rag": 1.0}, [SourceDemand("rag", [60, 80, 30])])
    assert result["rag"].kept == (0, 2)


def test_lending_is_by_remaining_demand_not_input_order() -> None:
    # 400 idle tokens; "small" wants 100, "big" wants 900: big is lent 9x what small is.
    ratios = {"small": 0.3, "big": 0.3, "idle": 0.4}
    demands = [SourceDemand("small", [300] + [10] * 10), SourceDemand("big", [300] + [10] * 90)]
    result = allocate(1000, ratios, demands)
    assert result["small"].borrowed == 40
    assert result["big"].borrowed == 360
    swapped = allocate(1000, ratios, list(reversed(demands)))
    assert swapped == result


def test_overhead_is_paid_once_per_source() -> None:
    result = allocate(100, {"rag": 1.0}, [SourceDemand("rag", [30, 30, 30], overhead=10)])
    assert result["rag"].kept == (0, 1, 2)
    assert result["rag"].used == 100
    nothing = allocate(100, {"rag": 1.0}, [SourceDemand("rag", [95], overhead=10)])
    assert nothing["rag"].kept == ()
    assert nothing["rag"].used == 0


@pytest.mark.parametrize(
    ("demands", "match"),
    [
        ([SourceDemand("crm", [1])], "no ratio"),
        ([SourceDemand("rag", [1]), SourceDemand("rag", [2])], "Two sources"),
        ([SourceDemand("rag", [-1])], "negative"),
    ],
)
def test_allocate_rejects_bad_demands(demands: list[SourceDemand], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        allocate(100, {"rag": 1.0}, demands)


names = st.sampled_from(["history", "rag", "memory", "tool", "notes"])


@st.composite
def allocation_problems(draw: st.DrawFn) -> tuple[int, dict[str, float], list[SourceDemand], bool]:
    chosen = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    weights = draw(st.lists(st.integers(1, 10), min_size=len(chosen), max_size=len(chosen)))
    scale = draw(st.floats(0.1, 1.0))
    ratios = {n: scale * w / sum(weights) for n, w in zip(chosen, weights, strict=True)}
    present = draw(st.lists(st.sampled_from(chosen), unique=True))
    demands = [
        SourceDemand(
            n,
            draw(st.lists(st.integers(0, 400), max_size=12)),
            overhead=draw(st.integers(0, 20)),
        )
        for n in present
    ]
    return draw(st.integers(0, 3000)), ratios, demands, draw(st.booleans())


@given(problem=allocation_problems())
@settings(max_examples=400, deadline=None)
def test_allocation_invariants(
    problem: tuple[int, dict[str, float], list[SourceDemand], bool],
) -> None:
    budget, ratios, demands, allow_borrow = problem
    result = allocate(budget, ratios, demands, allow_borrow=allow_borrow)
    assert sum(a.used for a in result.values()) <= budget
    idle = budget - sum(a.used for a in result.values())
    for demand in demands:
        alloc = result[demand.name]
        # used is exactly what the kept candidates (and the heading, once) cost
        expected = sum(demand.costs[i] for i in alloc.kept) + (demand.overhead if alloc.kept else 0)
        assert alloc.used == expected
        assert alloc.quota == int(budget * ratios[demand.name])
        assert alloc.used <= alloc.quota + alloc.borrowed
        if not allow_borrow:
            assert alloc.borrowed == 0
        else:
            overhead = 0 if alloc.kept else demand.overhead
            for index in set(range(len(demand.costs))) - set(alloc.kept):
                assert demand.costs[index] + overhead > idle, "a candidate that fits was left out"


# --- window ledger -----------------------------------------------------------------------------


def _model(**profile: int) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([]), profile=profile)  # type: ignore[arg-type]


def test_window_budget_config_defaults() -> None:
    cfg = WindowBudgetConfig()
    assert (cfg.desired_output_tokens, cfg.max_output_fraction, cfg.rag_ratio) == (4096, 0.5, 0.35)


def test_seed_window_budget_example() -> None:
    budget = WindowBudget.for_run(
        llm=_model(max_input_tokens=200_000),
        cfg=WindowBudgetConfig(),
        system_tokens=800,
        tool_tokens=1200,
    )
    assert budget is not None
    assert budget.output_reserve == 4096
    assert budget.fixed == 2000
    assert budget.spendable == 200_000 - 4096 - 2000
    assert budget.rag_budget == int(budget.spendable * 0.35)
    assert budget.trajectory_budget(rag_in_scope=True) == budget.spendable
    assert budget.trajectory_budget(rag_in_scope=False) == budget.spendable - budget.rag_budget


def test_output_reserve_is_the_smallest_clamp() -> None:
    cfg = WindowBudgetConfig()
    assert WindowBudget.from_window(6000, cfg=cfg).output_reserve == 3000  # small-window guard
    assert WindowBudget.from_window(200_000, cfg=cfg, max_output_tokens=1024).output_reserve == 1024
    budget = WindowBudget.for_run(
        llm=_model(max_input_tokens=100_000, max_output_tokens=2000), cfg=cfg
    )
    assert budget is not None
    assert budget.output_reserve == 2000


def test_unknown_window_gives_none() -> None:
    assert WindowBudget.for_run(llm=_model(), cfg=WindowBudgetConfig()) is None
    assert WindowBudget.for_run(llm=object(), cfg=WindowBudgetConfig()) is None


def test_spendable_never_negative() -> None:
    budget = WindowBudget.from_window(
        1000, cfg=WindowBudgetConfig(), system_tokens=900, tool_tokens=900
    )
    assert budget.spendable == 0
    assert budget.rag_budget == 0
    assert budget.trajectory_budget(rag_in_scope=False) == 0


def test_rag_ratio_override() -> None:
    budget = WindowBudget.from_window(100_000, cfg=WindowBudgetConfig(), rag_ratio=0.0)
    assert budget.rag_budget == 0
    assert budget.trajectory_budget(rag_in_scope=False) == budget.spendable


@given(
    window=st.integers(1, 2_000_000),
    system=st.integers(0, 50_000),
    tools=st.integers(0, 50_000),
    desired=st.integers(0, 100_000),
    fraction=st.floats(0, 0.99),
    rag=st.floats(0, 1),
    max_output=st.none() | st.integers(1, 100_000),
)
@settings(max_examples=300, deadline=None)
def test_ledger_parts_never_exceed_the_window(  # noqa: PLR0917 - one argument per strategy
    window: int,
    system: int,
    tools: int,
    desired: int,
    fraction: float,
    rag: float,
    max_output: int | None,
) -> None:
    cfg = WindowBudgetConfig(
        desired_output_tokens=desired, max_output_fraction=fraction, rag_ratio=rag
    )
    budget = WindowBudget.from_window(
        window, cfg=cfg, max_output_tokens=max_output, system_tokens=system, tool_tokens=tools
    )
    assert budget.output_reserve <= desired
    assert budget.output_reserve <= window * fraction
    if max_output is not None:
        assert budget.output_reserve <= max_output
    trajectory = budget.trajectory_budget(rag_in_scope=False)
    assert budget.rag_budget >= 0
    assert trajectory >= 0
    if budget.window >= budget.output_reserve + budget.fixed:
        assert budget.output_reserve + budget.fixed + budget.rag_budget + trajectory <= window
    assert budget.trajectory_budget(rag_in_scope=True) <= budget.spendable


def test_model_limits_ignores_junk() -> None:
    assert model_limits(_model(max_input_tokens=1000, max_output_tokens=100)) == (1000, 100)
    assert model_limits(object()) == (None, None)


@pytest.mark.parametrize(
    "kwargs",
    [{"desired_output_tokens": -1}, {"max_output_fraction": 1.0}, {"rag_ratio": 1.5}],
)
def test_bad_window_config(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        WindowBudgetConfig(**kwargs)  # type: ignore[arg-type]


def test_default_ratios_are_read_only() -> None:
    with pytest.raises(TypeError):
        DEFAULT_SOURCE_RATIOS["rag"] = 1.0  # type: ignore[index]


def test_lazy_order_is_pulled_only_while_room_is_left() -> None:
    pulled: list[int] = []

    def order() -> Iterator[int]:
        for index in range(1000):
            pulled.append(index)
            yield index

    costs = [50] * 1000
    result = allocate(220, {"rag": 1.0}, [SourceDemand("rag", costs, order=order())])
    assert result["rag"].kept == (0, 1, 2, 3)
    assert len(pulled) == 4  # room 20 < cheapest 50: the rest of the ranking is never computed


def test_order_decides_priority_and_unranked_candidates_are_never_kept() -> None:
    # Candidate 1 is a near-duplicate MMR dropped: the order never yields it.
    result = allocate(
        1000, {"rag": 1.0}, [SourceDemand("rag", [10, 10, 10, 10], order=iter([3, 0, 2]))]
    )
    assert result["rag"].kept == (3, 0, 2)
    assert result["rag"].used == 30


def test_passed_over_candidates_are_reported_in_order() -> None:
    result = allocate(
        100, {"rag": 1.0}, [SourceDemand("rag", [60, 80, 30, 90])], allow_borrow=False
    )
    assert result["rag"].kept == (0, 2)
    # 90 is never ranked: once 10 tokens are left, not even the cheapest (30) could fit.
    assert result["rag"].passed_over == (1,)
