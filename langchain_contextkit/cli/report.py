"""`contextkit report`: a ledger log's dashboard (text, JSON, chart), or a saved `evaluate` result.

With ``--baseline`` (a log or a result of the same kind) every figure's change follows and
the status is 1 when one got worse beyond the tolerance. Bad arguments exit with 2, an
unreadable file or line with 1.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from langchain_contextkit.cli import EXIT_FAILED, EXIT_USAGE

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_contextkit.quality.eval_result import EvalResult

__all__ = ["ReportRequest", "run_eval_report", "run_ledger_drift", "run_report"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportRequest:
    """What `contextkit report` was asked for."""

    path: str
    as_json: bool = False
    plot: str | None = None
    """Save the per-call chart here (PNG, or SVG / PDF by the suffix)."""
    thread: str | None = None
    """Only this thread's calls."""
    baseline: str | None = None
    """A log (or saved evaluate result) to compare with."""
    tolerance: float = 0.0
    """How much worse a figure may get before the report fails (see `quality.drift`)."""
    latency_tolerance: float | None = None
    """The same for latencies (relative); None: latency never fails the report."""


def run_report(request: ReportRequest, *, out: TextIO, err: TextIO) -> int:
    """Print the dashboard of `request.path` to `out`; return the exit status."""
    problem = _usage_problem(request)
    if problem is not None:
        print(f"contextkit report: {problem}", file=err)
        return EXIT_USAGE
    if saved_result(request.path) is not None:
        return run_eval_report(request, out=out, err=err)
    return _run_ledger_report(request, out=out, err=err)


def _run_ledger_report(request: ReportRequest, *, out: TextIO, err: TextIO) -> int:
    from langchain_contextkit.agent.ledger import read_ledger_log  # noqa: PLC0415 - only here
    from langchain_contextkit.errors import LedgerLogError  # noqa: PLC0415

    try:
        records = read_ledger_log(request.path)
    except LedgerLogError as error:
        print(f"contextkit report: {error}", file=err)
        return EXIT_FAILED
    if request.thread is not None:
        threads = _threads(records)
        records = [r for r in records if r.get("thread_id") == request.thread]
        if not records:
            known = ", ".join(threads) or "none"
            print(
                f"contextkit report: --thread {request.thread}: not in {request.path} "
                f"(its threads: {known})",
                file=err,
            )
            return EXIT_USAGE
    if not records:
        print(f"contextkit report: {request.path}: no call ledgers in it", file=err)
        return EXIT_FAILED
    if request.baseline is None:
        return _print_report(request, records, out=out, err=err)

    return run_ledger_drift(request, records, out=out, err=err)


def saved_result(path: str) -> dict[str, Any] | None:
    """The JSON of a saved `EvalResult` at `path`, or None when it is not one."""
    from langchain_contextkit.quality.eval_result import EVAL_KIND  # noqa: PLC0415

    try:
        with Path(path).open(encoding="utf-8") as file:
            head = file.read(1)
            if head != "{" and not (head.isspace() and file.read(4096).lstrip().startswith("{")):
                return None
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # a ledger log (several lines), or unreadable: the log reader says why
    return data if isinstance(data, dict) and data.get("kind") == EVAL_KIND else None


def _usage_problem(request: ReportRequest) -> str | None:
    """What makes the request unusable before any file is read (status 2), or None."""
    if request.plot is not None:
        from langchain_contextkit.dashboard.chart import require_matplotlib  # noqa: PLC0415
        from langchain_contextkit.errors import PlotUnavailableError  # noqa: PLC0415

        try:
            require_matplotlib()
        except PlotUnavailableError as error:
            return f"--plot: {error}"
    for name, value in (
        ("--tolerance", request.tolerance),
        ("--latency-tolerance", request.latency_tolerance),
    ):
        if value is not None and not (math.isfinite(value) and value >= 0):
            return f"{name} must be a number >= 0, got {value}"
    return None


def _print_report(
    request: ReportRequest, records: list[dict[str, Any]], *, out: TextIO, err: TextIO
) -> int:
    from langchain_contextkit.dashboard.figures import summarize_ledgers  # noqa: PLC0415

    chart: str | None = None
    if request.plot is not None:
        from langchain_contextkit.dashboard.chart import plot_ledger  # noqa: PLC0415

        try:
            chart = str(plot_ledger(records, request.plot))
        except (OSError, ValueError) as error:
            print(f"contextkit report: --plot {request.plot}: {error}", file=err)
            return EXIT_FAILED
    dashboard = summarize_ledgers(records)
    if request.as_json:
        data = {"path": request.path, **dashboard.to_dict(), "chart": chart}
        print(json.dumps(data, indent=2), file=out)
        return 0
    print(dashboard.text(title=f"ledger report of {request.path}"), file=out)
    if chart is not None:
        print(f"  {'chart':<18} {chart}", file=out)
    return 0


def _threads(records: Sequence[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for record in records:
        thread = record.get("thread_id")
        if thread is not None:
            seen.setdefault(str(thread), None)
    return list(seen)


def run_ledger_drift(
    request: ReportRequest, records: list[dict[str, Any]], *, out: TextIO, err: TextIO
) -> int:
    """The dashboard of `records` and its drift from the baseline log; the exit status."""
    from langchain_contextkit.agent.ledger import read_ledger_log  # noqa: PLC0415
    from langchain_contextkit.dashboard import compare_ledgers, summarize_ledgers  # noqa: PLC0415
    from langchain_contextkit.errors import LedgerLogError  # noqa: PLC0415

    baseline_path = str(request.baseline)
    if saved_result(baseline_path) is not None:
        print(
            f"contextkit report: --baseline {baseline_path} is an evaluate result; "
            f"{request.path} is a ledger log: compare a log with a log",
            file=err,
        )
        return EXIT_USAGE
    try:
        baseline = read_ledger_log(baseline_path)
    except LedgerLogError as error:
        print(f"contextkit report: --baseline: {error}", file=err)
        return EXIT_FAILED
    if request.thread is not None:
        baseline = [r for r in baseline if r.get("thread_id") == request.thread]
    if not baseline:
        print(f"contextkit report: --baseline {baseline_path}: no call ledgers in it", file=err)
        return EXIT_FAILED
    drift = compare_ledgers(
        records,
        baseline,
        tolerance=request.tolerance,
        latency_tolerance=request.latency_tolerance,
    )
    chart = _chart(
        request,
        lambda path: _plot_ledgers(path, baseline_path, baseline, request.path, records),
        err=err,
    )
    if chart is False:
        return EXIT_FAILED
    dashboard = summarize_ledgers(records)
    if request.as_json:
        data = {
            "path": request.path,
            **dashboard.to_dict(),
            "baseline": baseline_path,
            "drift": drift.to_dict(),
            "chart": chart,
        }
        print(json.dumps(data, indent=2), file=out)
    else:
        print(dashboard.text(title=f"ledger report of {request.path}"), file=out)
        print(file=out)
        print(drift.text(title=f"drift against {baseline_path}"), file=out)
        if chart is not None:
            print(f"  {'chart':<18} {chart}", file=out)
    return 0 if drift.passed else EXIT_FAILED


def run_eval_report(request: ReportRequest, *, out: TextIO, err: TextIO) -> int:
    """A saved result's table, and its drift from a baseline result; the exit status."""
    from langchain_contextkit.errors import ConfigError  # noqa: PLC0415
    from langchain_contextkit.quality.eval_result import EvalResult  # noqa: PLC0415

    try:
        result = EvalResult.from_dict(saved_result(request.path) or {})
        baseline = None
        if request.baseline is not None:
            data = saved_result(request.baseline)
            if data is None:
                print(
                    f"contextkit report: --baseline {request.baseline} is not a saved evaluate "
                    f"result; {request.path} is one: compare a result with a result",
                    file=err,
                )
                return EXIT_USAGE
            baseline = EvalResult.from_dict(data)
    except ConfigError as error:
        print(f"contextkit report: {error}", file=err)
        return EXIT_FAILED
    drift = (
        None
        if baseline is None
        else result.compare(
            baseline, tolerance=request.tolerance, latency_tolerance=request.latency_tolerance
        )
    )
    chart = _chart(request, lambda path: _plot_scores(path, request, result, baseline), err=err)
    if chart is False:
        return EXIT_FAILED
    if request.as_json:
        data = {
            "path": request.path,
            **result.to_dict(),
            "baseline": request.baseline,
            "drift": None if drift is None else drift.to_dict(),
            "chart": chart,
        }
        print(json.dumps(data, indent=2, default=str), file=out)
    else:
        print(result.text(), file=out)
        if drift is not None:
            print(file=out)
            print(drift.text(title=f"drift against {request.baseline}"), file=out)
        if chart is not None:
            print(f"  {'chart':<18} {chart}", file=out)
    return 0 if drift is None or drift.passed else EXIT_FAILED


def _chart(
    request: ReportRequest, draw: Callable[[str], object], *, err: TextIO
) -> str | bool | None:
    """The chart's path (None when not asked for; False when it failed, said on `err`)."""
    if request.plot is None:
        return None
    try:
        return str(draw(request.plot))
    except (OSError, ValueError) as error:
        print(f"contextkit report: --plot {request.plot}: {error}", file=err)
        return False


def _plot_ledgers(
    path: str,
    baseline_path: str,
    baseline: list[dict[str, Any]],
    current_path: str,
    records: list[dict[str, Any]],
) -> object:
    from langchain_contextkit.dashboard.chart import plot_ledger_runs  # noqa: PLC0415

    runs = [
        (f"baseline: {baseline_path} ({len(baseline)} calls)", baseline),
        (f"current: {current_path} ({len(records)} calls)", records),
    ]
    return plot_ledger_runs(runs, path)


def _plot_scores(
    path: str, request: ReportRequest, result: EvalResult, baseline: EvalResult | None
) -> object:
    from langchain_contextkit.dashboard.chart import plot_eval_scores  # noqa: PLC0415

    runs = [] if baseline is None else [(f"baseline ({request.baseline})", _scores(baseline))]
    runs.append((f"current ({request.path})", _scores(result)))
    return plot_eval_scores(runs, path)


def _scores(result: EvalResult) -> list[tuple[str, float]]:
    return [(case.case_id, case.score) for case in result.cases]
