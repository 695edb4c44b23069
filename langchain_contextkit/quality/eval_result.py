"""`EvalResult` and `CaseResult`: what `evaluate` measured, as a table, JSON and a drift.

`to_json` saves it (``"kind": "contextkit.evaluate"``, which `contextkit report` reads),
`EvalResult.from_json` reads it back and `compare` gives the `Drift` from a baseline.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.quality.drift import (
    CaseDelta,
    Drift,
    FigureSpec,
    check_tolerance,
    compare_figures,
)
from langchain_contextkit.quality.gate import GateResult

if TYPE_CHECKING:
    import os

__all__ = ["EVAL_FIGURES", "EVAL_KIND", "CaseResult", "EvalResult"]

EVAL_KIND = "contextkit.evaluate"
"""The ``kind`` of a saved result's JSON, which tells it from a ledger log."""

EVAL_FIGURES = (
    FigureSpec("mean_score", "mean score", "higher", "fraction"),
    FigureSpec("over_budget_share", "over budget", "lower", "fraction"),
    FigureSpec("gate_failure_share", "gate failures", "lower", "fraction"),
    FigureSpec("mean_tokens", "mean request tokens", "lower", "amount"),
    FigureSpec("cache_read_share", "cache-read share", "higher", "fraction"),
    FigureSpec("mean_latency_ms", "mean latency", "lower", "latency"),
    FigureSpec("p95_latency_ms", "p95 latency", "lower", "latency"),
)
"""The figures of a result, as drift compares them."""

_ANSWER_CHARS = 30


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseResult:
    """One evaluated case."""

    case_id: str
    """The case's name, or its position (``"1"``, ``"2"``, ...): how drift pairs cases."""
    question: str
    reference: Any
    answer: str
    score: float
    key: str
    """The judge's feedback key."""
    comment: str | None = None
    tokens: int
    """The request's tokens (an agent's largest request of the case)."""
    limit: int | None
    """The most the request may take (window minus output reserve, or the build's
    budget); None when the target states none."""
    over_budget: bool
    calls: int = 1
    """Model calls the case took (an agent's tool loop makes several)."""
    gate: GateResult | None = None
    latency_ms: float
    """Wall time of the case: building the request and the model's answer (not judging)."""
    model_ms: float | None = None
    """Of it, the model calls' time."""
    reported: int | None = None
    """Input tokens the provider reported over the case's calls (None: none reported)."""
    cache_read: int | None = None
    """Of `reported`, the tokens read from the prompt cache."""

    @property
    def cache_read_share(self) -> float | None:
        """`cache_read` over `reported` (None without reported usage)."""
        if not self.reported:
            return None
        return (self.cache_read or 0) / self.reported

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (the reference as given when JSON can hold it, else its text)."""
        return {
            "case_id": self.case_id,
            "question": self.question,
            "reference": _jsonable(self.reference),
            "answer": self.answer,
            "score": self.score,
            "key": self.key,
            "comment": self.comment,
            "tokens": self.tokens,
            "limit": self.limit,
            "over_budget": self.over_budget,
            "calls": self.calls,
            "gate": None if self.gate is None else self.gate.to_dict(),
            "latency_ms": self.latency_ms,
            "model_ms": self.model_ms,
            "reported": self.reported,
            "cache_read": self.cache_read,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        """Read back what `to_dict` wrote."""
        gate = data.get("gate")
        return cls(
            case_id=str(data["case_id"]),
            question=str(data["question"]),
            reference=data.get("reference"),
            answer=str(data["answer"]),
            score=float(data["score"]),
            key=str(data["key"]),
            comment=data.get("comment"),
            tokens=int(data["tokens"]),
            limit=data.get("limit"),
            over_budget=bool(data["over_budget"]),
            calls=int(data.get("calls", 1)),
            gate=GateResult.from_dict(gate) if isinstance(gate, dict) else None,
            latency_ms=float(data["latency_ms"]),
            model_ms=data.get("model_ms"),
            reported=data.get("reported"),
            cache_read=data.get("cache_read"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalResult:
    """What `evaluate` measured: one `CaseResult` per case, and the figures over them.

    `str(result)` is a table (with the drift below it when a baseline was given);
    `to_json` / `from_json` save and load it; `compare` and `assert_no_regression`
    measure it against a baseline result.
    """

    target: str
    """What was evaluated (the target's class)."""
    judge: str
    cases: tuple[CaseResult, ...]
    baseline: EvalResult | None = field(default=None, compare=False, repr=False)
    """The result `evaluate(baseline=...)` compared with (not saved by `to_json`)."""

    # -- figures ----------------------------------------------------------------------

    @property
    def mean_score(self) -> float:
        """Mean of the judge's scores."""
        return _mean([c.score for c in self.cases])

    @property
    def over_budget_share(self) -> float:
        """Share of the cases whose request was over its budget."""
        return _mean([float(c.over_budget) for c in self.cases])

    @property
    def gate_failure_share(self) -> float | None:
        """Share of the gated cases whose gate failed (None when no case was gated)."""
        gated = [c.gate for c in self.cases if c.gate is not None]
        return _mean([float(not g.passed) for g in gated]) if gated else None

    @property
    def mean_tokens(self) -> float:
        """Mean tokens of the requests."""
        return _mean([float(c.tokens) for c in self.cases])

    @property
    def cache_read_share(self) -> float | None:
        """Cache-read tokens over reported input, over the cases that report usage."""
        reported = [c for c in self.cases if c.reported]
        total = sum(c.reported or 0 for c in reported)
        return sum(c.cache_read or 0 for c in reported) / total if total else None

    @property
    def mean_latency_ms(self) -> float:
        """Mean wall time of a case."""
        return _mean([c.latency_ms for c in self.cases])

    @property
    def p95_latency_ms(self) -> float:
        """95th percentile (nearest rank) of the cases' wall time."""
        ordered = sorted(c.latency_ms for c in self.cases)
        return ordered[math.ceil(0.95 * len(ordered)) - 1] if ordered else 0.0

    def figures(self) -> dict[str, float | None]:
        """Every figure of `EVAL_FIGURES` by key."""
        return {spec.key: getattr(self, spec.key) for spec in EVAL_FIGURES}

    # -- drift ------------------------------------------------------------------------

    def compare(
        self,
        baseline: EvalResult | None = None,
        *,
        tolerance: float = 0.0,
        latency_tolerance: float | None = None,
    ) -> Drift:
        """This result against `baseline` (default: the one `evaluate` was given).

        Cases pair by `case_id`; a case's score counts as worse when it dropped by more
        than `tolerance`. See `langchain_contextkit.quality.drift` for how each figure
        reads the tolerances.

        Raises:
            ConfigError: When there is no baseline, or a tolerance is negative.
        """
        base = baseline if baseline is not None else self.baseline
        if base is None:
            msg = "no baseline: pass one, or evaluate(..., baseline=...)"
            raise ConfigError(msg)
        check_tolerance("tolerance", tolerance)
        figures = compare_figures(
            self.figures(),
            base.figures(),
            EVAL_FIGURES,
            tolerance=tolerance,
            latency_tolerance=latency_tolerance,
        )
        mine = {c.case_id: c for c in self.cases}
        theirs = {c.case_id: c for c in base.cases}
        order = [*theirs, *(key for key in mine if key not in theirs)]
        cases = tuple(_case_delta(key, theirs.get(key), mine.get(key), tolerance) for key in order)
        return Drift(
            figures=figures,
            cases=cases,
            tolerance=tolerance,
            latency_tolerance=latency_tolerance,
        )

    def assert_no_regression(
        self,
        baseline: EvalResult | None = None,
        *,
        tolerance: float = 0.0,
        latency_tolerance: float | None = None,
    ) -> None:
        """Fail a test when a figure got worse than the baseline's beyond `tolerance`.

        Raises:
            AssertionError: Naming every figure that got worse and the cases that dropped.
            ConfigError: When there is no baseline.
        """
        self.compare(
            baseline, tolerance=tolerance, latency_tolerance=latency_tolerance
        ).assert_no_regression()

    # -- JSON -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data: the cases and the figures (the figures are for reading)."""
        return {
            "kind": EVAL_KIND,
            "version": 1,
            "target": self.target,
            "judge": self.judge,
            "figures": self.figures(),
            "cases": [c.to_dict() for c in self.cases],
        }

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """The result as JSON text, also written to `path` when one is given."""
        text = json.dumps(self.to_dict(), ensure_ascii=False, indent=2, default=str)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        """Read back what `to_dict` wrote (the figures are recomputed from the cases).

        Raises:
            ConfigError: When `data` is not a saved result.
        """
        if not isinstance(data, dict) or data.get("kind") != EVAL_KIND:
            msg = f'not a saved evaluate result (no "kind": "{EVAL_KIND}")'
            raise ConfigError(msg)
        try:
            cases = tuple(CaseResult.from_dict(case) for case in data["cases"])
            return cls(target=str(data["target"]), judge=str(data["judge"]), cases=cases)
        except (KeyError, TypeError, ValueError) as error:
            msg = f"a saved evaluate result with a broken case: {error!r}"
            raise ConfigError(msg) from error

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> EvalResult:
        """Read a result from JSON text, or from the file `source` names.

        Raises:
            ConfigError: When it is not a saved result.
        """
        text = str(source)
        if not text.lstrip().startswith("{"):
            text = Path(source).read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            msg = f"not a saved evaluate result: {error.msg}"
            raise ConfigError(msg) from error
        return cls.from_dict(data)

    # -- text -------------------------------------------------------------------------

    def text(self) -> str:
        """The table: one line per case, then the figures."""
        width = max(len("case"), *(len(c.case_id) for c in self.cases))
        head = (
            f"  {'case':<{width}} {'score':>6} {'tokens':>7} {'limit':>7} {'over':>4} {'gate':>4}"
            f" {'ms':>8} {'cache':>6}  answer"
        )
        lines = [
            f"evaluate {self.target} over {len(self.cases)} case(s), judge {self.judge}",
            head,
            "  " + "-" * (len(head) - 2),
        ]
        lines += [f"  {_case_line(c, width)}" for c in self.cases]
        lines += _summary(self)
        return "\n".join(lines)

    def __str__(self) -> str:
        """The table, and the drift from the baseline when `evaluate` was given one."""
        if self.baseline is None:
            return self.text()
        return self.text() + "\n\n" + self.compare().text()


def _case_delta(
    key: str, before: CaseResult | None, after: CaseResult | None, tolerance: float
) -> CaseDelta:
    worse = before is not None and after is not None and before.score - after.score > tolerance
    return CaseDelta(
        case_id=key,
        baseline_score=None if before is None else before.score,
        current_score=None if after is None else after.score,
        baseline_tokens=None if before is None else before.tokens,
        current_tokens=None if after is None else after.tokens,
        worse=worse,
    )


def _case_line(case: CaseResult, width: int) -> str:
    answer = " ".join(case.answer.split())
    if len(answer) > _ANSWER_CHARS:
        answer = answer[: _ANSWER_CHARS - 3] + "..."
    gate = "-" if case.gate is None else ("pass" if case.gate.passed else "FAIL")
    limit = "-" if case.limit is None else f"{case.limit:,}"
    share = case.cache_read_share
    cache = "-" if share is None else f"{share:.0%}"
    return (
        f"{case.case_id:<{width}} {case.score:6.3f} {case.tokens:7,} {limit:>7} "
        f"{'yes' if case.over_budget else 'no':>4} {gate:>4} {case.latency_ms:8.1f} "
        f"{cache:>6}  {answer}"
    )


def _summary(result: EvalResult) -> list[str]:
    gate = result.gate_failure_share
    cache = result.cache_read_share
    scores = (
        f"  mean score {result.mean_score:.3f}; over budget {result.over_budget_share:.1%}; "
        f"gate failures {'n/a' if gate is None else f'{gate:.1%}'}"
    )
    costs = (
        f"  mean request {result.mean_tokens:,.0f} tokens; cache-read share "
        f"{'n/a' if cache is None else f'{cache:.1%}'}; latency mean "
        f"{result.mean_latency_ms:,.1f} ms, p95 {result.p95_latency_ms:,.1f} ms"
    )
    return [scores, costs]


def _jsonable(value: object) -> Any:  # noqa: ANN401 - whatever JSON holds
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
