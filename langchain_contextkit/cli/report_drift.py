"""`contextkit report` against a baseline, and over a saved `evaluate` result.

`run_ledger_drift` prints a log's dashboard, then every figure's change from the
baseline log; `run_eval_report` prints a saved result's table, and its drift from a
baseline result when one is given. Either exits 1 when a figure got worse beyond the
tolerance, and `--json` prints the same as one object (``"drift"``). `--plot` draws both
runs: the two logs' window ledgers one above the other, or the two results' per-case
scores side by side.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from langchain_contextkit.cli import EXIT_FAILED, EXIT_USAGE

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_contextkit.cli.report import ReportRequest
    from langchain_contextkit.quality.eval_result import EvalResult

__all__ = ["run_eval_report", "run_ledger_drift"]


def run_ledger_drift(
    request: ReportRequest, records: list[dict[str, Any]], *, out: TextIO, err: TextIO
) -> int:
    """The dashboard of `records` and its drift from the baseline log; the exit status."""
    from langchain_contextkit.agents.ledger_log import read_ledger_log  # noqa: PLC0415
    from langchain_contextkit.cli.report import saved_result  # noqa: PLC0415
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
    from langchain_contextkit.cli.report import saved_result  # noqa: PLC0415
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
