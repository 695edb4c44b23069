"""Drift: a run's figures against a baseline run's, and whether any got worse.

Every figure has a direction (higher or lower is better, or neither) and a scale, which
decides how `tolerance` reads:

- a *fraction* (a mean score, a share, a rate, all in 0..1) is worse when it moved the
  wrong way by more than `tolerance` in absolute terms (0.05: five points);
- an *amount* (tokens, counts) when it moved the wrong way by more than `tolerance`
  times the baseline's value (0.05: five percent; from a baseline of 0, any increase);
- a *latency* the same way as an amount, but against `latency_tolerance`, and only when
  one is given: wall time varies from run to run by more than any figure above, so it
  is printed always and gates only when asked.

A figure either run lacks (None) is shown and never gates. Both the ledger report's
``--baseline`` and `EvalResult.compare` build a `Drift`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_contextkit.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "CaseDelta",
    "Drift",
    "FigureDelta",
    "FigureSpec",
    "check_tolerance",
    "compare_figures",
]

Better = Literal["higher", "lower"] | None
Scale = Literal["fraction", "amount", "latency"]

_EPSILON = 1e-9  # float noise: a figure recomputed from the same data is not "worse"


@dataclass(frozen=True, slots=True)
class FigureSpec:
    """One figure that drift compares: its key, its label, its direction and scale."""

    key: str
    label: str
    better: Better
    scale: Scale


@dataclass(frozen=True, slots=True)
class FigureDelta:
    """One figure in both runs, the change, and whether it counts as a regression."""

    spec: FigureSpec
    baseline: float | None
    current: float | None
    worse: bool
    """Moved the wrong way beyond the tolerance (False for an ungated figure)."""

    @property
    def delta(self) -> float | None:
        """``current - baseline`` (None when either run lacks the figure)."""
        if self.baseline is None or self.current is None:
            return None
        return self.current - self.baseline

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "figure": self.spec.key,
            "label": self.spec.label,
            "better": self.spec.better,
            "scale": self.spec.scale,
            "baseline": self.baseline,
            "current": self.current,
            "delta": self.delta,
            "worse": self.worse,
        }


@dataclass(frozen=True, slots=True)
class CaseDelta:
    """One evaluated case in both runs: its score and tokens, and the change."""

    case_id: str
    baseline_score: float | None
    current_score: float | None
    baseline_tokens: int | None
    current_tokens: int | None
    worse: bool
    """Its score dropped by more than the tolerance (False when a run lacks the case)."""

    @property
    def score_delta(self) -> float | None:
        """``current_score - baseline_score`` (None when a run lacks the case)."""
        if self.baseline_score is None or self.current_score is None:
            return None
        return self.current_score - self.baseline_score

    @property
    def tokens_delta(self) -> int | None:
        """``current_tokens - baseline_tokens`` (None when a run lacks the case)."""
        if self.baseline_tokens is None or self.current_tokens is None:
            return None
        return self.current_tokens - self.baseline_tokens

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "case": self.case_id,
            "baseline_score": self.baseline_score,
            "current_score": self.current_score,
            "score_delta": self.score_delta,
            "baseline_tokens": self.baseline_tokens,
            "current_tokens": self.current_tokens,
            "tokens_delta": self.tokens_delta,
            "worse": self.worse,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Drift:
    """A run against its baseline: every figure's change, and per case when there are cases.

    `passed` is False when a figure got worse beyond the tolerance; the cases whose
    score dropped are listed (`worse_cases`) to say where, but only the figures gate.
    """

    figures: tuple[FigureDelta, ...]
    cases: tuple[CaseDelta, ...] = ()
    tolerance: float = 0.0
    latency_tolerance: float | None = None

    @property
    def regressions(self) -> tuple[FigureDelta, ...]:
        """The figures that got worse beyond the tolerance."""
        return tuple(f for f in self.figures if f.worse)

    @property
    def worse_cases(self) -> tuple[CaseDelta, ...]:
        """The cases whose score dropped by more than the tolerance."""
        return tuple(c for c in self.cases if c.worse)

    @property
    def passed(self) -> bool:
        """No figure got worse beyond the tolerance."""
        return not self.regressions

    def __getitem__(self, key: str) -> FigureDelta:
        """The figure named `key`.

        Raises:
            KeyError: When no figure has that key.
        """
        for figure in self.figures:
            if figure.spec.key == key:
                return figure
        raise KeyError(key)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "passed": self.passed,
            "tolerance": self.tolerance,
            "latency_tolerance": self.latency_tolerance,
            "regressions": [f.spec.key for f in self.regressions],
            "figures": [f.to_dict() for f in self.figures],
            "cases": [c.to_dict() for c in self.cases],
        }

    def assert_no_regression(self) -> None:
        """Fail a test when a figure got worse beyond the tolerance.

        Raises:
            AssertionError: Naming each figure that got worse, and the cases that dropped.
        """
        if self.passed:
            return
        lines = [f"{len(self.regressions)} figure(s) worse than the baseline:"]
        lines += [f"  {_row(f)}" for f in self.regressions]
        if self.worse_cases:
            lines.append("cases whose score dropped:")
            lines += [
                f"  {c.case_id}: {c.baseline_score:.3f} -> {c.current_score:.3f}"
                for c in self.worse_cases
            ]
        raise AssertionError("\n".join(lines))

    def text(self, *, title: str = "drift against the baseline") -> str:
        """A table: every figure's baseline, current value and change, then the worse cases."""
        verdict = "passed" if self.passed else f"WORSE ({len(self.regressions)} figure(s))"
        latency = (
            "latency not gated"
            if self.latency_tolerance is None
            else f"latency tolerance {self.latency_tolerance:g}"
        )
        lines = [f"{title}: {verdict}; tolerance {self.tolerance:g}, {latency}"]
        lines.append(f"  {'figure':<22} {'baseline':>12} {'current':>12} {'change':>12}")
        lines += [f"  {_row(figure)}" for figure in self.figures]
        changed = [c for c in self.cases if c.score_delta != 0 or c.worse]
        if changed:
            lines.append(f"  cases whose score changed ({len(changed)} of {len(self.cases)}):")
            lines += [f"    {_case_row(case)}" for case in changed]
        return "\n".join(lines)

    def __str__(self) -> str:
        """`text()` with its default title."""
        return self.text()


def compare_figures(
    current: Mapping[str, Any],
    baseline: Mapping[str, Any],
    specs: Sequence[FigureSpec],
    *,
    tolerance: float = 0.0,
    latency_tolerance: float | None = None,
) -> tuple[FigureDelta, ...]:
    """Each figure of `specs` in both runs, marked worse when it regressed beyond tolerance.

    Args:
        current: The run's figures by key (None or missing: the run lacks it).
        baseline: The baseline run's figures by key.
        specs: The figures to compare, in the order to show them.
        tolerance: For fractions, absolute; for amounts, relative to the baseline.
        latency_tolerance: Relative, for latencies; None: latencies do not gate.

    Raises:
        ConfigError: When a tolerance is negative.
    """
    check_tolerance("tolerance", tolerance)
    if latency_tolerance is not None:
        check_tolerance("latency_tolerance", latency_tolerance)
    return tuple(
        FigureDelta(
            spec,
            _number(baseline.get(spec.key)),
            _number(current.get(spec.key)),
            _worse(
                spec, baseline.get(spec.key), current.get(spec.key), tolerance, latency_tolerance
            ),
        )
        for spec in specs
    )


def check_tolerance(name: str, value: object) -> None:
    """Refuse a tolerance that is not a finite number >= 0.

    Raises:
        ConfigError: Naming `name` and the value.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        msg = f"{name} must be a number >= 0, got {value!r}"
        raise ConfigError(msg)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _worse(
    spec: FigureSpec,
    baseline: object,
    current: object,
    tolerance: float,
    latency_tolerance: float | None,
) -> bool:
    before, after = _number(baseline), _number(current)
    if spec.better is None or before is None or after is None:
        return False
    loss = before - after if spec.better == "higher" else after - before
    if spec.scale == "fraction":
        return loss > tolerance + _EPSILON
    if spec.scale == "latency":
        if latency_tolerance is None:
            return False
        tolerance = latency_tolerance
    return loss > tolerance * abs(before) + _EPSILON


def _shown(value: float | None, scale: Scale) -> str:
    if value is None:
        return "n/a"
    if scale == "fraction":
        return f"{value:.3f}"
    if scale == "latency":
        return f"{value:,.1f} ms"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _change(figure: FigureDelta) -> str:
    delta = figure.delta
    if delta is None:
        return "n/a"
    scale = figure.spec.scale
    if scale == "fraction":
        return f"{delta:+.3f}"
    before = figure.baseline or 0.0
    relative = f" ({delta / before:+.0%})" if before else ""
    unit = " ms" if scale == "latency" else ""
    return (
        f"{delta:+,.1f}{unit}{relative}"
        if not delta.is_integer()
        else f"{delta:+,.0f}{unit}{relative}"
    )


def _row(figure: FigureDelta) -> str:
    scale = figure.spec.scale
    mark = "  WORSE" if figure.worse else ""
    return (
        f"{figure.spec.label:<22} {_shown(figure.baseline, scale):>12} "
        f"{_shown(figure.current, scale):>12} {_change(figure):>12}{mark}"
    )


def _case_row(case: CaseDelta) -> str:
    def score(value: float | None) -> str:
        return "missing" if value is None else f"{value:.3f}"

    mark = "  WORSE" if case.worse else ""
    return f"{case.case_id}: {score(case.baseline_score)} -> {score(case.current_score)}{mark}"
