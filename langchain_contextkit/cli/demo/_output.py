"""What the demo prints beside its session: the ledger report, the summary, the progress line."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from langchain_contextkit.cli.demo.session import DemoSession


__all__ = [
    "WIDTH",
    "LedgerReport",
    "Progress",
    "gate_row",
    "numbers_text",
    "quiet_gate_log",
    "summary_data",
    "wants_colour",
]

WIDTH = 100
"""The demo's line width when the terminal does not say."""


@dataclass(frozen=True, slots=True)
class LedgerReport:
    """The run's ledger log read back: its dashboard, and the chart when asked for."""

    path: Path
    text: str
    figures: dict[str, Any]
    lines: int
    chart: Path | None

    @classmethod
    def of(cls, session: DemoSession, plot: str | None) -> LedgerReport:
        from langchain_contextkit.agent.ledger import read_ledger_log  # noqa: PLC0415
        from langchain_contextkit.dashboard import plot_ledger, summarize_ledgers  # noqa: PLC0415

        path = session.settings.ledger_path
        if path is None:
            msg = "the session wrote no ledger log"
            raise ValueError(msg)
        records = read_ledger_log(path)
        dashboard = summarize_ledgers(records)
        chart = None
        if plot is not None:
            title = f"contextkit demo: window ledger per model call ({len(records)} calls)"
            chart = plot_ledger(records, plot, title=title).resolve()
        text = dashboard.text(title="report (contextkit report on the ledger log)")
        return cls(path, text, dashboard.to_dict(), len(records), chart)

    def data(self) -> dict[str, Any]:
        return {
            "ledger": str(self.path),
            "lines": self.lines,
            **self.figures,
            "chart": None if self.chart is None else str(self.chart),
        }


def gate_row(gate: dict[str, Any]) -> str:
    failed = gate["failed_calls"]
    return f"checked on every call: {gate['passed']} of {gate['checked']} passed" + (
        f"; failed at call {numbers_text(failed)}" if failed else ""
    )


def gate_data(session: DemoSession) -> dict[str, Any]:
    gates = [c.ledger.gate for c in session.calls if c.ledger.gate is not None]
    return {
        "max_request_tokens": session.gate.max_request_tokens,
        "max_retrieval_share": session.gate.max_retrieval_share,
        "checked": len(gates),
        "passed": sum(1 for gate in gates if gate.get("passed") is True),
        "failed_calls": [
            c.ledger.call
            for c in session.calls
            if c.ledger.gate is not None and c.ledger.gate.get("passed") is not True
        ],
    }


def deliberate_data(session: DemoSession) -> dict[str, Any]:
    failure = session.deliberate_failure()
    return {
        "deliberate": True,
        "removed": list(failure.removed),
        "messages": failure.messages,
        "passed": failure.result.passed,
        "failures": failure.result.failure_lines(),
        "result": failure.result.to_dict(),
    }


def numbers_text(values: list[int]) -> str:
    return ", ".join(str(value) for value in values)


def summary_data(session: DemoSession, label: str, seconds: float, *, kept: bool) -> dict[str, Any]:
    calls = session.calls
    window = session.settings.window
    reserve = calls[0].ledger.output_reserve if calls else session.settings.output_reserve
    largest = max(calls, key=lambda c: c.ledger.prompt) if calls else None
    activity = session.note_activity()
    return {
        "model": label,
        "window": window,
        "output_reserve": reserve,
        "limit": window - reserve,
        "turns": session.turns,
        "calls": len(calls),
        "compactions": [c.ledger.call for c in calls if c.ledger.compacted],
        "reduced": [c.ledger.call for c in calls if c.ledger.reduced],
        "largest_prompt": {
            "tokens": largest.ledger.prompt if largest else 0,
            "call": largest.ledger.call if largest else 0,
        },
        "notes": {
            "created": activity.created,
            "updated": activity.updated,
            "read": activity.read,
            "searched": activity.searched,
            "on_disk": activity.on_disk,
            "folder": str(session.notes_dir),
        },
        "facts": [
            {"label": fact.label, "needle": fact.needle, "parts": list(fact.parts)}
            for fact in session.facts()
        ],
        "gate": gate_data(session),
        "deliberate_failure": deliberate_data(session),
        "workspace": str(session.settings.workspace),
        "workspace_kept": kept,
        "last_answer": session.last_answer(),
        "seconds": round(seconds, 2),
        "ledgers": [
            {"user_turn": c.turn, **c.ledger.to_dict(), "prompt": c.ledger.prompt, "move": c.move}
            for c in calls
        ],
    }


@contextmanager
def quiet_gate_log() -> Iterator[None]:
    """Keep the gate's log lines (``on_gate_fail="log"``) off the demo's output."""
    gate_log = logging.getLogger("langchain_contextkit.quality")
    propagate = gate_log.propagate
    quiet = logging.NullHandler()
    gate_log.addHandler(quiet)
    gate_log.propagate = False
    try:
        yield
    finally:
        gate_log.removeHandler(quiet)
        gate_log.propagate = propagate


def wants_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """A spinner on a terminal's stderr; plain lines (or nothing) elsewhere."""

    _FRAMES = "|/-\\"

    def __init__(self, stream: TextIO, *, plain_lines: bool) -> None:
        self.stream = stream
        isatty = getattr(stream, "isatty", None)
        self.live = bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
        self.plain_lines = plain_lines
        self._text = ""
        self._lock = threading.Lock()
        self._shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def status(self, text: str, detail: str = "") -> None:
        """Show `text` (and `detail`, on a terminal only) until the next status."""
        if not self.live:
            if self.plain_lines and text != self._text:
                print(f"contextkit demo: {text}", file=self.stream, flush=True)
            self._text = text
            return
        with self._lock:
            self._text = f"{text}: {detail}" if detail else text
        if self._thread is None:
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()

    def _spin(self) -> None:
        frame = 0
        while not self._stop.wait(0.1):
            with self._lock:
                width = shutil.get_terminal_size((WIDTH, 20)).columns - 1
                line = f"{self._FRAMES[frame % len(self._FRAMES)]} {self._text}"[:width]
                self.stream.write(f"\r\x1b[K{line}")
                self.stream.flush()
                self._shown = True
            frame += 1

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the spinner off the line while something else prints."""
        with self._lock:
            self._clear()
            yield

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            self._clear()
