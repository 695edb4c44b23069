"""`contextkit report LEDGER.jsonl`: the dashboard of a ledger log, as text or JSON, and a chart.

The log is what `ContextKitMiddleware(ledger_path=...)` or `LedgerCallbackHandler`
writes (one line per model call). A file that cannot be read or a malformed line fails
with status 1 and one line naming the line; a chart asked for without matplotlib, or a
`--thread` the log does not have, with status 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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


def run_report(request: ReportRequest, *, out: TextIO, err: TextIO) -> int:
    """Print the dashboard of `request.path` to `out`; return the exit status."""
    from langchain_contextkit.agents.ledger_log import read_ledger_log  # noqa: PLC0415 - only here
    from langchain_contextkit.errors import LedgerLogError, PlotUnavailableError  # noqa: PLC0415

    if request.plot is not None:
        from langchain_contextkit.dashboard.chart import require_matplotlib  # noqa: PLC0415

        try:
            require_matplotlib()
        except PlotUnavailableError as error:
            print(f"contextkit report: --plot: {error}", file=err)
            return EXIT_USAGE
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
    return _print_report(request, records, out=out, err=err)


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
