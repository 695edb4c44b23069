"""The per-call ledger as a stacked bar chart over the conversation (matplotlib, optional).

One bar per model call, the window split in the request's own order (system, tools,
recap, history, retrieval, current turn), then what was left free and the output
reserve; marks above a bar say the history was compacted (C), the tool loop reduced (r),
the call retried after an overflow (!) or its quality gate failed (G). The provider's
reported input tokens, where lines have them, are drawn as dots. matplotlib is imported
only here, when a chart is drawn: ``pip install "langchain-contextkit[plot]"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_contextkit.errors import PlotUnavailableError

if TYPE_CHECKING:
    import os

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "PARTS",
    "PLOT_HINT",
    "plot_eval_scores",
    "plot_ledger",
    "plot_ledger_runs",
    "require_matplotlib",
]

PARTS = (
    ("system", "system", "#4c72b0"),
    ("tools", "tool schemas", "#8172b3"),
    ("summary", "recap", "#dd8452"),
    ("history", "history", "#55a868"),
    ("retrieval", "retrieval", "#64b5cd"),
    ("turn", "current turn", "#937860"),
    ("free", "free", "#e5e5e5"),
    ("output_reserve", "output reserve", "#c44e52"),
)
"""(ledger key, label, colour) of each stacked part, bottom to top: the layout's order."""

PLOT_HINT = (
    "the chart needs matplotlib, which is not installed: "
    'pip install "langchain-contextkit[plot]" (or pip install matplotlib)'
)
"""What to do when matplotlib is missing."""


def require_matplotlib() -> None:
    """Check that matplotlib can be imported, before any work is done for a chart.

    Raises:
        PlotUnavailableError: When it cannot (`PLOT_HINT` says how to install it).
    """
    try:
        import matplotlib.figure  # noqa: F401, PLC0415 - the optional dependency
    except ImportError as error:
        raise PlotUnavailableError(PLOT_HINT) from error


def plot_ledger(
    records: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    dpi: int = 110,
) -> Path:
    """Draw the ledger lines as a stacked bar per call and save the chart (PNG by suffix).

    Args:
        records: Call ledgers as dicts (`read_ledger_log`'s lines, or state's ledgers),
            in call order; one bar each, numbered from 1.
        path: Where to save; the format follows the suffix (``.png``, ``.svg``, ``.pdf``).
        title: The chart's title; default one naming the calls and the window.
        dpi: Resolution of a raster format.

    Returns:
        The saved file's path.

    Raises:
        PlotUnavailableError: When matplotlib is not installed.
        ValueError: When there is no record to draw.

    Example:
        ```python
        import tempfile
        from pathlib import Path

        from langchain_contextkit.dashboard import plot_ledger

        parts = dict(system=300, tools=200, summary=0, history=0, retrieval=400, turn=100)
        lines = [
            {
                "call": n,
                "window": 4000,
                "output_reserve": 500,
                "free": 2500 - 400 * n,
                **{**parts, "history": 400 * n},
                "compacted": n == 3,
            }
            for n in range(1, 4)
        ]
        with tempfile.TemporaryDirectory() as folder:
            chart = plot_ledger(lines, Path(folder, "ledger.png"))
            print(chart.read_bytes()[1:4].decode(), chart.stat().st_size > 1000)
            # PNG True
        ```
    """
    if not records:
        msg = "no call ledgers to draw"
        raise ValueError(msg)
    require_matplotlib()
    figure = _draw(records, title)
    out = Path(path)
    figure.savefig(out, dpi=dpi)
    return out


def plot_ledger_runs(
    runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    path: str | os.PathLike[str],
    *,
    dpi: int = 110,
) -> Path:
    """Draw several runs' ledger lines one above the other (a baseline and the current run).

    Args:
        runs: ``(title, records)`` per run, drawn top to bottom on one token scale.
        path: Where to save; the format follows the suffix.
        dpi: Resolution of a raster format.

    Raises:
        PlotUnavailableError: When matplotlib is not installed.
        ValueError: When a run has no record to draw.
    """
    if not runs or any(not records for _, records in runs):
        msg = "no call ledgers to draw"
        raise ValueError(msg)
    require_matplotlib()
    from matplotlib.figure import Figure  # noqa: PLC0415 - the optional dependency

    calls = max(len(records) for _, records in runs)
    width = min(24.0, max(8.0, 4 + 0.14 * calls))
    figure = Figure(figsize=(width, 4.2 * len(runs)), layout="constrained")
    panels = figure.subplots(len(runs), 1, sharey=True, squeeze=False)
    for (title, records), row in zip(runs, panels, strict=True):
        _draw_on(row[0], records, title)
    out = Path(path)
    figure.savefig(out, dpi=dpi)
    return out


def _draw(records: Sequence[Mapping[str, Any]], title: str | None) -> Figure:
    from matplotlib.figure import Figure  # noqa: PLC0415 - the optional dependency

    calls = len(records)
    figure = Figure(figsize=(min(24.0, max(8.0, 4 + 0.14 * calls)), 4.8), layout="constrained")
    _draw_on(figure.subplots(), records, title)
    return figure


def _draw_on(axes: Axes, records: Sequence[Mapping[str, Any]], title: str | None) -> None:
    calls = len(records)
    x = list(range(1, calls + 1))
    bottom = [0.0] * calls
    for key, label, colour in PARTS:
        values = [_value(record, key) for record in records]
        axes.bar(x, values, bottom=bottom, color=colour, label=label, width=0.85, linewidth=0)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    top = max(bottom) or 1.0
    reported = [
        (xi, record["reported"])
        for xi, record in zip(x, records, strict=True)
        if isinstance(record.get("reported"), int)
    ]
    if reported:
        axes.scatter(
            [xi for xi, _ in reported],
            [value for _, value in reported],
            color="black",
            s=10,
            zorder=3,
            label="reported input",
        )
    for xi, record in zip(x, records, strict=True):
        mark = _marks(record)
        if mark:
            axes.text(xi, top * 1.01, mark, ha="center", va="bottom", fontsize=8, weight="bold")
    threads = [record.get("thread_id") for record in records]
    for xi in range(1, calls):
        if threads[xi] != threads[xi - 1]:
            axes.axvline(xi + 0.5, color="black", linestyle="--", linewidth=0.8)
    axes.set_xlim(0.4, calls + 0.6)
    axes.set_ylim(0, top * 1.08)
    calls_label = "model call" if len(set(threads)) <= 1 else "model call (threads in log order)"
    axes.set_xlabel(f"{calls_label}    marks: C compacted, r reduced, ! retried, G gate failed")
    axes.set_ylabel("tokens")
    axes.set_title(title or _title(records))
    axes.legend(ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False, fontsize=9)


def _value(record: Mapping[str, Any], key: str) -> float:
    value = record.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _marks(record: Mapping[str, Any]) -> str:
    gate = record.get("gate")
    failed = isinstance(gate, Mapping) and gate.get("passed") is False
    return "".join(
        glyph
        for glyph, on in (
            ("C", record.get("compacted") is True),
            ("r", record.get("reduced") is True),
            ("!", record.get("retried") is True),
            ("G", failed),
        )
        if on
    )


def _title(records: Sequence[Mapping[str, Any]]) -> str:
    windows = sorted({int(_value(record, "window")) for record in records})
    window = f"{windows[0]:,}-token window" if len(windows) == 1 else "windows vary"
    return f"Window ledger per model call ({len(records)} calls, {window})"


def plot_eval_scores(
    runs: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    path: str | os.PathLike[str],
    *,
    dpi: int = 110,
) -> Path:
    """Draw evaluation runs' per-case scores as grouped bars (a baseline beside the run).

    Args:
        runs: ``(label, [(case id, score), ...])`` per run; cases are placed in the order
            the first run lists them, then any the later runs add.
        path: Where to save; the format follows the suffix.
        dpi: Resolution of a raster format.

    Raises:
        PlotUnavailableError: When matplotlib is not installed.
        ValueError: When there is no case to draw.
    """
    order: dict[str, None] = {}
    for _, scores in runs:
        for case, _score in scores:
            order.setdefault(case, None)
    if not order:
        msg = "no evaluated cases to draw"
        raise ValueError(msg)
    require_matplotlib()
    from matplotlib.figure import Figure  # noqa: PLC0415 - the optional dependency

    cases = list(order)
    figure = Figure(figsize=(min(24.0, max(8.0, 3 + 0.4 * len(cases))), 4.8), layout="constrained")
    axes = figure.subplots()
    step = 0.8 / len(runs)
    for k, (label, scores) in enumerate(runs):
        by_case = dict(scores)
        x = [i + (k - (len(runs) - 1) / 2) * step for i in range(len(cases))]
        axes.bar(x, [by_case.get(case, 0.0) for case in cases], width=step, label=label)
    axes.set_xticks(range(len(cases)), cases, rotation=60, ha="right", fontsize=8)
    axes.set_ylabel("score")
    axes.set_title("Per-case scores")
    axes.legend(frameon=False, fontsize=9)
    out = Path(path)
    figure.savefig(out, dpi=dpi)
    return out
