"""The ledger dashboard: figures over a ledger log, as text, JSON and a chart.

`summarize_ledgers` reads the lines `LedgerWriter` appends (one per model call) and
gives the figures that make context engineering measurable: calls, mean and p95 input
tokens, cache-hit rate, evidence share, compactions per 100 calls, overflow retries and
quality-gate failures, overall and per thread (`figures`). `plot_ledger` draws every
call's window as a stacked bar (`chart`, needs matplotlib: the ``plot`` extra).
``contextkit report LEDGER.jsonl`` prints both; `compare_ledgers` (`drift`) compares a
log with a baseline log (``--baseline OLD.jsonl``).
"""

from langchain_contextkit.dashboard.chart import plot_ledger
from langchain_contextkit.dashboard.figures import (
    LedgerDashboard,
    LedgerFigures,
    compare_ledgers,
    summarize_ledgers,
)

__all__ = [
    "LedgerDashboard",
    "LedgerFigures",
    "compare_ledgers",
    "plot_ledger",
    "summarize_ledgers",
]
