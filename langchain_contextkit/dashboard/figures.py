"""The dashboard's figures over a ledger log, overall and per thread, and their drift.

Input tokens are the provider's `reported` figure when a line has one, else `estimated`;
p95 is the nearest rank; the cache-hit rate is ``sum(cache_read) / sum(reported)``; the
evidence share is ``retrieval / prompt`` per call, averaged. `compare_ledgers` compares a
log's figures with a baseline log's by each figure's direction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeGuard, TypeVar

from langchain_contextkit.quality.drift import Drift, FigureSpec, compare_figures

__all__ = [
    "LEDGER_FIGURES",
    "LedgerDashboard",
    "LedgerFigures",
    "compare_ledgers",
    "nearest_rank_p95",
    "summarize_ledgers",
]

_N = TypeVar("_N", int, float)


@dataclass(frozen=True, kw_only=True, slots=True)
class LedgerFigures:
    """The dashboard's figures over a set of calls (a whole log, or one thread)."""

    thread_id: str | None
    """The thread these calls belong to (None: the whole log, or calls outside threads)."""
    calls: int
    """Model calls (lines)."""
    input_mean: float
    """Mean input tokens per call."""
    input_p95: int
    """95th percentile of the input tokens (nearest rank)."""
    input_reported: int
    """Calls whose input tokens are the provider's report; the rest are the ledger's estimate."""
    cache_hit_rate: float | None
    """Cache-read tokens over reported input tokens (None when no call reports usage)."""
    cache_calls: int
    """Calls that report usage, over which `cache_hit_rate` is taken."""
    evidence_share: float | None
    """Mean over calls of retrieval tokens / request tokens (None without a request)."""
    compactions: int
    """Calls at which the history was compacted."""
    compactions_per_100: float
    """Compactions per 100 calls."""
    reductions: int
    """Calls at which the current turn's tool loop was reduced."""
    overflow_retries: int
    """Calls the provider refused as too long and the middleware retried smaller."""
    offloaded: int
    """Tool results offloaded (shown as head + tail + pointer), over all calls."""
    gate_checked: int
    """Calls that carry a quality gate's result."""
    gate_failures: int
    """Of those, the calls whose gate did not pass."""
    cache_write_rate: float | None = None
    """Cache-write tokens over reported input tokens (None when no call reports writes;
    only providers that cache at breakpoints, Anthropic, report them)."""
    input_cost: float | None = None
    """Reported input in plain-input-token units: plain + 1.25 x written + 0.1 x read
    (Anthropic's 5-minute prices; None when no call reports usage)."""
    latency_mean_ms: float | None = None
    """Mean wall time of the model calls in ms (None when no line carries ``model_ms``)."""
    latency_p95_ms: float | None = None
    """95th percentile (nearest rank) of the model calls' wall time in ms."""
    middleware_mean_ms: float | None = None
    """Mean of the middleware's own time per call in ms (``middleware_ms``)."""
    timed_calls: int = 0
    """Calls whose line carries ``model_ms``, over which the latency figures are taken."""

    @property
    def input_source(self) -> str:
        """``"reported"``, ``"estimated"`` or ``"mixed"``: where the input figures come from."""
        if self.input_reported == self.calls:
            return "reported"
        return "estimated" if self.input_reported == 0 else "mixed"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (with `input_source`)."""
        return {**asdict(self), "input_source": self.input_source}


@dataclass(frozen=True, slots=True)
class LedgerDashboard:
    """The figures of a whole ledger log and of each of its threads.

    Example:
        ```python
        from langchain_contextkit.dashboard import summarize_ledgers


        def line(call, prompt, retrieval, reported=None, cache_read=None, **flags):
            return {
                "call": call,
                "window": 1000,
                "output_reserve": 100,
                "free": 900 - prompt,
                "prompt": prompt,
                "retrieval": retrieval,
                "estimated": prompt,
                "reported": reported,
                "cache_read": cache_read,
                "thread_id": "t1",
                **flags,
            }


        dashboard = summarize_ledgers(
            [
                line(1, 400, 100, reported=420, cache_read=0),
                line(2, 600, 300, reported=630, cache_read=420, compacted=True),
            ]
        )
        figures = dashboard.overall
        print(figures.calls, figures.input_mean, figures.input_p95, figures.input_source)
        # 2 525.0 630 reported
        print(f"{figures.cache_hit_rate:.3f} {figures.evidence_share:.3f}")
        # 0.400 0.375
        print(figures.compactions_per_100)
        # 50.0
        ```
    """

    overall: LedgerFigures
    """Every call of the log."""
    threads: tuple[LedgerFigures, ...]
    """Per thread, in the order each first appears in the log."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: ``{"overall": {...}, "threads": [{...}, ...]}``."""
        return {
            "overall": self.overall.to_dict(),
            "threads": [figures.to_dict() for figures in self.threads],
        }

    def text(self, *, title: str = "ledger report") -> str:
        """The dashboard as lines of text: the figures, then a table per thread when several."""
        figures = self.overall
        threads = len(self.threads)
        lines = [
            f"{title}: {figures.calls} model calls, {threads} thread{'s' * (threads != 1)}",
            *(f"  {label:<18} {value}" for label, value in _rows(figures)),
        ]
        if threads > 1:
            lines += ["", *_thread_table(self.threads)]
        return "\n".join(lines)


def summarize_ledgers(records: Sequence[Mapping[str, Any]]) -> LedgerDashboard:
    """The dashboard of ledger lines (`read_ledger_log`'s, or the ledgers state keeps).

    Args:
        records: Call ledgers as dicts, in call order; a ``thread_id`` groups them.
    """
    groups: dict[str | None, list[Mapping[str, Any]]] = {}
    for record in records:
        thread = record.get("thread_id")
        groups.setdefault(None if thread is None else str(thread), []).append(record)
    threads = tuple(_figures(lines, thread) for thread, lines in groups.items())
    return LedgerDashboard(_figures(records, None), threads)


def _input_tokens(record: Mapping[str, Any]) -> tuple[int, bool]:
    """A call's input tokens, and whether they are the provider's report."""
    reported = record.get("reported")
    if _is_int(reported):
        return int(reported), True
    estimated = record.get("estimated")
    if _is_int(estimated) and estimated > 0:
        return int(estimated), False
    return _prompt(record), False


def _figures(records: Sequence[Mapping[str, Any]], thread: str | None) -> LedgerFigures:
    inputs = [_input_tokens(record) for record in records]
    values = sorted(value for value, _ in inputs)
    calls = len(records)
    reported = [r for r in records if _is_int(r.get("reported")) and r["reported"] > 0]
    cached = sum(int(r["cache_read"]) for r in reported if _is_int(r.get("cache_read")))
    shares = [_number(r.get("retrieval")) / _prompt(r) for r in records if _prompt(r) > 0]
    gates = [r.get("gate") for r in records if isinstance(r.get("gate"), Mapping)]
    compactions = sum(1 for r in records if r.get("compacted") is True)
    written = [int(r["cache_write"]) for r in reported if _is_int(r.get("cache_write"))]
    total = sum(int(r["reported"]) for r in reported)
    plain = total - cached - sum(written)
    latencies = sorted(_number(r["model_ms"]) for r in records if _is_number(r.get("model_ms")))
    own = [_number(r["middleware_ms"]) for r in records if _is_number(r.get("middleware_ms"))]
    return LedgerFigures(
        latency_mean_ms=sum(latencies) / len(latencies) if latencies else None,
        latency_p95_ms=nearest_rank_p95(latencies) if latencies else None,
        middleware_mean_ms=sum(own) / len(own) if own else None,
        timed_calls=len(latencies),
        cache_write_rate=sum(written) / total if written and total else None,
        input_cost=(
            plain + _WRITE_PRICE * sum(written) + _READ_PRICE * cached if reported else None
        ),
        thread_id=thread,
        calls=calls,
        input_mean=sum(values) / calls if calls else 0.0,
        input_p95=nearest_rank_p95(values) if calls else 0,
        input_reported=sum(1 for _, is_reported in inputs if is_reported),
        cache_hit_rate=(cached / sum(int(r["reported"]) for r in reported) if reported else None),
        cache_calls=len(reported),
        evidence_share=sum(shares) / len(shares) if shares else None,
        compactions=compactions,
        compactions_per_100=100 * compactions / calls if calls else 0.0,
        reductions=sum(1 for r in records if r.get("reduced") is True),
        overflow_retries=sum(1 for r in records if r.get("retried") is True),
        offloaded=sum(int(_number(r.get("offloaded"))) for r in records),
        gate_checked=len(gates),
        gate_failures=sum(
            1 for gate in gates if isinstance(gate, Mapping) and gate.get("passed") is False
        ),
    )


def nearest_rank_p95(ordered: Sequence[_N]) -> _N:
    """The smallest value at least 95% of `ordered` (sorted, not empty) do not exceed."""
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _prompt(record: Mapping[str, Any]) -> int:
    """The request's tokens (the ledger's), from ``prompt`` or the window's parts."""
    prompt = record.get("prompt")
    if _is_int(prompt):
        return int(prompt)
    return int(
        _number(record.get("window"))
        - _number(record.get("free"))
        - _number(record.get("output_reserve"))
    )


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


_WRITE_PRICE = 1.25
"""A token written to Anthropic's 5-minute cache, in plain input tokens."""
_READ_PRICE = 0.1
"""A token read from a prompt cache, in plain input tokens."""


def _writes(figures: LedgerFigures) -> str:
    if figures.cache_write_rate is None or figures.input_cost is None:
        return "n/a: no call reports cache writes"
    return (
        f"{figures.cache_write_rate:.1%} of reported input tokens written to the cache; "
        f"input cost {figures.input_cost:,.0f} plain-token units (write 1.25x, read 0.1x)"
    )


def _rows(figures: LedgerFigures) -> list[tuple[str, str]]:
    calls = figures.calls
    if figures.input_source == "reported":
        source = "reported by the provider"
    elif figures.input_source == "estimated":
        source = "the ledger's estimates: no call reports usage"
    else:
        estimated = calls - figures.input_reported
        source = f"reported for {figures.input_reported} calls, estimated for {estimated}"
    cache = (
        "n/a: no call reports usage"
        if figures.cache_hit_rate is None
        else f"{figures.cache_hit_rate:.1%} of reported input tokens read from the cache"
        f" ({figures.cache_calls} calls)"
    )
    evidence = (
        "n/a"
        if figures.evidence_share is None
        else f"{figures.evidence_share:.1%} of the input is retrieved context (mean per call)"
    )
    gate = (
        "n/a: no call carries a quality gate result"
        if figures.gate_checked == 0
        else f"{figures.gate_failures} of {figures.gate_checked} gated calls"
    )
    latency = (
        "n/a: no call carries model_ms"
        if figures.latency_mean_ms is None or figures.latency_p95_ms is None
        else f"model mean {figures.latency_mean_ms:,.1f} ms, p95 "
        f"{figures.latency_p95_ms:,.1f} ms; middleware "
        f"{_ms(figures.middleware_mean_ms)} a call ({figures.timed_calls} timed)"
    )
    return [
        ("calls", f"{calls:,}"),
        (
            "input tokens",
            f"mean {figures.input_mean:,.0f}, p95 {figures.input_p95:,} ({source})",
        ),
        ("latency", latency),
        ("cache-hit rate", cache),
        ("cache writes", _writes(figures)),
        ("evidence share", evidence),
        ("compactions", f"{figures.compactions} ({figures.compactions_per_100:.1f} per 100 calls)"),
        ("overflow retries", str(figures.overflow_retries)),
        ("tool loop reduced", f"{figures.reductions} call{'s' * (figures.reductions != 1)}"),
        ("offloaded results", str(figures.offloaded)),
        ("gate failures", gate),
    ]


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f} ms"


def _thread_table(threads: Sequence[LedgerFigures]) -> list[str]:
    names = ["(no thread)" if f.thread_id is None else f.thread_id for f in threads]
    width = max(len("thread"), *(len(name) for name in names))
    head = (
        f"  {'thread':<{width}}  {'calls':>6}  {'mean in':>8}  {'p95 in':>8}  {'cache hit':>9}"
        f"  {'evidence':>8}  {'mean ms':>8}  {'p95 ms':>8}  {'compact/100':>11}  {'retries':>7}"
        f"  {'gate fails':>10}"
    )
    rows = [head]
    for name, f in zip(names, threads, strict=True):
        gate = str(f.gate_failures) if f.gate_checked else "n/a"
        rows.append(
            f"  {name:<{width}}  {f.calls:>6,}  {f.input_mean:>8,.0f}  {f.input_p95:>8,}"
            f"  {_percent(f.cache_hit_rate):>9}  {_percent(f.evidence_share):>8}"
            f"  {_ms_cell(f.latency_mean_ms):>8}  {_ms_cell(f.latency_p95_ms):>8}"
            f"  {f.compactions_per_100:>11.1f}  {f.overflow_retries:>7}  {gate:>10}"
        )
    return rows


def _ms_cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


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
