"""A ledger log against a baseline log: every dashboard figure's change, and what got worse.

`compare_ledgers` summarises both logs (`summarize_ledgers`, overall) and compares each
figure of `LEDGER_FIGURES` by its direction: fewer input tokens, retries, compactions and
gate failures and a higher cache-hit rate are better; the evidence share, the cache-write
rate, offloads and the number of calls are shown but never gate (neither way is worse by
itself). Latency gates only with a `latency_tolerance` (see
`langchain_contextkit.quality.drift`). ``contextkit report LEDGER --baseline OLD`` prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_contextkit.dashboard.figures import summarize_ledgers
from langchain_contextkit.quality.drift import Drift, FigureSpec, compare_figures

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

__all__ = ["LEDGER_FIGURES", "compare_ledgers"]

LEDGER_FIGURES = (
    FigureSpec("calls", "model calls", None, "amount"),
    FigureSpec("input_mean", "mean input tokens", "lower", "amount"),
    FigureSpec("input_p95", "p95 input tokens", "lower", "amount"),
    FigureSpec("input_cost", "input cost", "lower", "amount"),
    FigureSpec("cache_hit_rate", "cache-hit rate", "higher", "fraction"),
    FigureSpec("cache_write_rate", "cache-write rate", None, "fraction"),
    FigureSpec("evidence_share", "evidence share", None, "fraction"),
    FigureSpec("compactions_per_100", "compactions / 100", "lower", "amount"),
    FigureSpec("reductions", "tool loops reduced", None, "amount"),
    FigureSpec("overflow_retries", "overflow retries", "lower", "amount"),
    FigureSpec("offloaded", "offloaded results", None, "amount"),
    FigureSpec("gate_failures", "gate failures", "lower", "amount"),
    FigureSpec("latency_mean_ms", "mean latency", "lower", "latency"),
    FigureSpec("latency_p95_ms", "p95 latency", "lower", "latency"),
    FigureSpec("middleware_mean_ms", "middleware time", "lower", "latency"),
)
"""The dashboard's figures as drift compares them, in the order they print."""


def compare_ledgers(
    records: Sequence[Mapping[str, Any]],
    baseline: Sequence[Mapping[str, Any]],
    *,
    tolerance: float = 0.0,
    latency_tolerance: float | None = None,
) -> Drift:
    """The overall figures of `records` against those of `baseline`.

    Args:
        records: The current run's ledger lines.
        baseline: The baseline run's ledger lines.
        tolerance: For rates, absolute; for tokens and counts, relative to the baseline.
        latency_tolerance: Relative, for latencies; None: latencies do not gate.

    Raises:
        ConfigError: When a tolerance is negative.
    """
    current = summarize_ledgers(records).overall.to_dict()
    before = summarize_ledgers(baseline).overall.to_dict()
    figures = compare_figures(
        current,
        before,
        LEDGER_FIGURES,
        tolerance=tolerance,
        latency_tolerance=latency_tolerance,
    )
    return Drift(figures=figures, tolerance=tolerance, latency_tolerance=latency_tolerance)
