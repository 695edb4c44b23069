"""`contextkit report LEDGER.jsonl`: the dashboard of a ledger log, as text or JSON, and a chart.

The log is what `ContextKitMiddleware(ledger_path=...)` or `LedgerCallbackHandler`
writes (one line per model call); a result `EvalResult.to_json` saved is read too (its
table). With ``--baseline OLD`` (a log, or a saved result, of the same kind) the deltas of
every figure follow, and the status is 1 when one got worse beyond ``--tolerance``
(latency only beyond ``--latency-tolerance``, when given). A file that cannot be read or
a malformed line fails with status 1 and one line naming the line; a chart asked for
without matplotlib, a `--thread` the log does not have, a negative tolerance or a
baseline of the other kind, with status 2.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from langchain_contextkit.cli import EXIT_FAILED, EXIT_USAGE

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["ReportRequest", "run_report"]


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
        from langchain_contextkit.cli.report_drift import run_eval_report  # noqa: PLC0415

        return run_eval_report(request, out=out, err=err)
    return _run_ledger_report(request, out=out, err=err)


def _run_ledger_report(request: ReportRequest, *, out: TextIO, err: TextIO) -> int:
    from langchain_contextkit.agents.ledger_log import read_ledger_log  # noqa: PLC0415 - only here
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
    from langchain_contextkit.cli.report_drift import run_ledger_drift  # noqa: PLC0415

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
