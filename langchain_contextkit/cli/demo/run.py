"""`contextkit demo`: an agent session on a sample project, one window ledger per call.

An on-call shift on a fictional service's docs: `create_agent` with `ContextKitMiddleware`,
`TerminalTool` and `NoteTool`, played offline by a scripted agent (or a real model with
`--model`). It prints one line per model call, then a summary, the quality gate, which
planted facts the model could still see, and the ledger log's report.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from langchain_contextkit.cli.demo._output import (
    WIDTH,
    LedgerReport,
    Progress,
    gate_row,
    numbers_text,
    quiet_gate_log,
    summary_data,
    wants_colour,
)
from langchain_contextkit.cli.demo.model import choose_model
from langchain_contextkit.errors import ContextKitError, ModelSetupError, ModelSpecError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langchain_contextkit.cli.demo.session import CallRecord, DemoSession

__all__ = ["DEFAULT_OUTPUT_RESERVE", "DEFAULT_WINDOW", "DemoOptions", "run_demo"]

DEFAULT_WINDOW = 6000
"""Small on purpose: a real agent's window fills the same way, only later."""

DEFAULT_OUTPUT_RESERVE = 1000
_MIN_WINDOW = 4000
_BAR = 40
_EXIT_USAGE = 2
_EXIT_FAILED = 1
_EXIT_INTERRUPTED = 130
_EVALUATION_NOTE = (
    " (evaluate): each planted fact asked after the whole conversation, of an agent with\n"
    "  this context policy; a scripted reader answers only from what reached its request"
)
_MARKS = ("C history compacted at this call", "r the current turn's tool loop reduced")
_PART_NAMES = {
    "system": "system prompt",
    "summary": "summary",
    "notes": "retrieved notes",
    "docs": "retrieved docs",
    "history": "recent history",
    "turn": "current turn",
}
_COLOURS = {
    "S": "34",
    "T": "36",
    "R": "35",
    "K": "32",
    "H": "33",
    "Q": "1",
    ".": "2",
    "O": "31",
    "C": "1;35",
    "r": "1;33",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class DemoOptions:
    """What `contextkit demo` was asked for."""

    model: str | None = None
    turns: int | None = None
    window: int = DEFAULT_WINDOW
    workspace: str | None = None
    keep: bool = False
    """Keep the temporary workspace; a `workspace` of the user's is always kept."""
    ledger: str | None = None
    """The ledger log's path (replaced); default ``ledger.jsonl`` in the workspace."""
    plot: str | None = None
    """Save the ledger chart here."""
    as_json: bool = False


def run_demo(
    options: DemoOptions | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the demo; return the exit status (0, 1 on failure, 2 on bad arguments).

    Every failure is one line on `err`, never a traceback.
    """
    options = options or DemoOptions()
    out = out or sys.stdout
    err = err or sys.stderr
    problem = _check(options) or _check_plot(options)
    if problem:
        _fail(err, problem)
        return _EXIT_USAGE
    try:
        chosen = choose_model(options.model, max_tokens=DEFAULT_OUTPUT_RESERVE)
    except ModelSetupError as error:
        _fail(err, str(error))
        # A missing key or package is a setup that failed; an unknown provider, a bad argument.
        return _EXIT_USAGE if isinstance(error, ModelSpecError) else _EXIT_FAILED
    progress = Progress(err, plain_lines=chosen.model is not None)
    try:
        return _Run(options, chosen.label, chosen.model, out, progress).run()
    except KeyboardInterrupt:
        progress.close()
        _fail(err, "interrupted")
        return _EXIT_INTERRUPTED
    finally:
        progress.close()


def _check(options: DemoOptions) -> str | None:
    if options.window < _MIN_WINDOW:
        return (
            f"--window {options.window} is too small for this session: use {_MIN_WINDOW:,} or "
            "more (the prompt, tool schemas and output reserve alone take about 2,000)"
        )
    if options.turns is not None and options.turns < 1:
        return f"--turns must be at least 1, got {options.turns}"
    if options.workspace is not None:
        path = Path(options.workspace)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            return f"--workspace {options.workspace} exists and is not an empty folder"
    return None


def _check_plot(options: DemoOptions) -> str | None:
    """Why `--plot` cannot be honoured (matplotlib missing), checked before the run."""
    if options.plot is None:
        return None
    from langchain_contextkit.dashboard.chart import require_matplotlib  # noqa: PLC0415
    from langchain_contextkit.errors import PlotUnavailableError  # noqa: PLC0415

    try:
        require_matplotlib()
    except PlotUnavailableError as error:
        return f"--plot: {error}"
    return None


def _fail(err: TextIO, message: str) -> None:
    print(f"contextkit demo: {message}", file=err)


class _Run:
    """One demo run: set up, run the turns, print as it goes, then the summary."""

    def __init__(
        self,
        options: DemoOptions,
        label: str,
        model: BaseChatModel | None,
        out: TextIO,
        progress: Progress,
    ) -> None:
        self.options = options
        self.label = label
        self.model = model
        self.out = out
        self.progress = progress
        self.colour = wants_colour(out)
        self.started = time.monotonic()
        self.temporary: Path | None = None
        """The temporary workspace once made; removed at the end unless kept."""

    @property
    def keeps_workspace(self) -> bool:
        """Whether the workspace outlives the run (`--keep`, or a `--workspace` folder)."""
        return self.options.keep or self.options.workspace is not None

    def run(self) -> int:
        try:
            return self._run()
        finally:
            # The demo's own temporary folder would otherwise pile up in the temp directory
            # on every run (and on a failure or an interrupt too).
            if self.temporary is not None and not self.keeps_workspace:
                shutil.rmtree(self.temporary, ignore_errors=True)

    def _run(self) -> int:
        progress = self.progress
        progress.status("loading langchain and the agent")
        from langchain_contextkit.cli.demo.script import TURNS  # noqa: PLC0415 - heavy imports
        from langchain_contextkit.cli.demo.session import DemoSession, SessionSettings  # noqa: PLC0415

        try:
            workspace = self._workspace()
            session = DemoSession(
                SessionSettings(
                    workspace=workspace,
                    window=self.options.window,
                    output_reserve=DEFAULT_OUTPUT_RESERVE,
                    turns=self.options.turns or len(TURNS),
                    model=self.model,
                    ledger_path=self._ledger_path(workspace),
                )
            )
            session.setup()
        except (ContextKitError, OSError) as error:
            progress.close()
            _fail(progress.stream, f"cannot set up the agent: {error}")
            return _EXIT_FAILED
        self._header(session)
        with quiet_gate_log():  # a failed call shows in the summary's gate line instead
            status = self._turns(session, TURNS)
        if status:
            return status
        progress.close()
        seconds = time.monotonic() - self.started
        try:
            report = LedgerReport.of(session, self.options.plot)
        except (ContextKitError, OSError, ValueError) as error:
            _fail(progress.stream, f"cannot report the ledger log: {error}")
            return _EXIT_FAILED
        from langchain_contextkit.cli.demo.evaluation import evaluate_session  # noqa: PLC0415

        evaluation = evaluate_session(session)
        if self.options.as_json:
            data = summary_data(session, self.label, seconds, kept=self.keeps_workspace)
            data["report"] = report.data()
            data["evaluation"] = evaluation.to_dict()
            print(json.dumps(data, indent=2, default=str), file=self.out)
        else:
            self._summary(session, seconds)
            self._report(report)
            self._print("")
            for line in (self._paint("evaluation", "1") + _EVALUATION_NOTE).splitlines():
                self._print(line)
            for line in evaluation.text().splitlines()[1:]:
                self._print(line)
        return 0

    def _ledger_path(self, workspace: Path) -> Path:
        """The ledger log of this run, emptied: the report covers this run alone."""
        path = Path(self.options.ledger) if self.options.ledger else workspace / "ledger.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        return path.resolve()

    def _report(self, report: LedgerReport) -> None:
        kept = self.options.ledger is not None or self.keeps_workspace
        self._print("")
        for line in report.text.splitlines():
            self._print(self._paint(line, "1") if not line.startswith(" ") else line)
        where = str(report.path) if kept else "removed with the workspace; --ledger FILE keeps it"
        self._print(f"  {'ledger log':<18} {where}")
        if report.chart is not None:
            self._print(f"  {'chart':<18} {report.chart}")

    def _workspace(self) -> Path:
        if self.options.workspace is None:
            self.temporary = Path(tempfile.mkdtemp(prefix="contextkit-demo-"))
            return self.temporary
        path = Path(self.options.workspace)
        path.mkdir(parents=True, exist_ok=True)
        return path.resolve()

    def _turns(self, session: DemoSession, turns: tuple[Any, ...]) -> int:
        for number in range(1, session.turns + 1):
            next_call = session.calls[-1].ledger.call + 1 if session.calls else 1
            self.progress.status(f"turn {number}/{session.turns}", f"call {next_call}")
            self._print(self._turn_line(f"turn {number}/{session.turns}", turns[number - 1].user))
            try:
                for record in session.run_turn(number):
                    self.progress.status(
                        f"turn {number}/{session.turns}", f"call {record.ledger.call + 1}"
                    )
                    self._print(self._call_line(record))
            except ContextKitError as error:
                self.progress.close()
                _fail(self.progress.stream, f"turn {number}: {error}")
                return _EXIT_FAILED
            except Exception as error:
                if self.model is None:
                    raise  # the scripted session failing is a bug: show it
                self.progress.close()
                reason = " ".join(str(error).split())[:300]
                _fail(
                    self.progress.stream,
                    f"turn {number}: the model call failed: {type(error).__name__}: {reason}",
                )
                return _EXIT_FAILED
        return 0

    # -- text output ---------------------------------------------------------------------

    def _print(self, line: str) -> None:
        if self.options.as_json:
            return
        with self.progress.paused():
            print(line, file=self.out, flush=True)

    def _paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and text.strip() else text

    def _bar(self, bar: str) -> str:
        if not self.colour:
            return bar
        runs: list[str] = []
        start = 0
        for index in range(1, len(bar) + 1):
            if index == len(bar) or bar[index] != bar[start]:
                runs.append(self._paint(bar[start:index], _COLOURS.get(bar[start], "0")))
                start = index
        return "".join(runs)

    def _header(self, session: DemoSession) -> None:
        window = self.options.window
        sandbox = "bubblewrap sandbox" if session.sandbox == "bwrap" else "no sandbox here"
        cell = f"{window:,} tokens, one cell = {window / _BAR:,.0f}"
        lines = [
            self._paint("contextkit demo", "1")
            + f": an on-call shift on a sample project, {session.turns} user turns, one ledger"
            " per model call",
            "",
            f"  model       {self.label}",
            f"  project     {session.project}  ({len(session.files)} markdown files)",
            f"  notes       {session.notes_dir}  (FileNoteStore)",
            f"  tools       terminal (read-only, {sandbox}), note (create/update/read/search)",
            (
                f"  middleware  ContextKitMiddleware: window {window:,} tokens, "
                f"{DEFAULT_OUTPUT_RESERVE:,} kept for the answer,"
            ),
            f"{'':14}retrieval: DocsSource (BM25) over the project, and the notes; compaction:",
            f"{'':14}HistoryCompactor (extractive, no LLM)",
            "",
            *self._legend(),
            "",
            self._paint(
                f"{'call':>6}  {'window: ' + cell:<{_BAR}}  {'prompt':>{self._size_width}}"
                "  CR  model's move",
                "2",
            ),
        ]
        for line in lines:
            self._print(line)

    def _legend(self) -> list[str]:
        from langchain_contextkit.agent.ledger import LEGEND  # noqa: PLC0415 - loaded with the session

        return [
            "  " + "  ".join(self._glyph(item) for item in LEGEND.split("  ")),
            "  " + "  ".join(self._glyph(item) for item in _MARKS),
        ]

    def _glyph(self, item: str) -> str:
        glyph, _, name = item.partition(" ")
        return self._paint(glyph, _COLOURS.get(glyph, "0")) + " " + name

    @property
    def _size_width(self) -> int:
        return max(len("prompt"), len(f"{self.options.window:,}"))

    def _turn_line(self, head: str, text: str) -> str:
        flat = " ".join(text.split())
        room = WIDTH - len(head) - 2
        if len(flat) > room:
            flat = flat[: room - 3] + "..."
        return self._paint(head, "1") + "  " + flat

    def _call_line(self, record: CallRecord) -> str:
        ledger = record.ledger
        size = f"{ledger.prompt:,}"
        marks = "".join(
            self._paint(mark, _COLOURS[mark]) if on else " "
            for mark, on in (("C", ledger.compacted), ("r", ledger.reduced))
        )
        room = WIDTH - (6 + 2 + _BAR + 2 + self._size_width + 2 + 2 + 2)
        move = record.move if len(record.move) <= room else record.move[: room - 3] + "..."
        bar = self._bar(ledger.bar(_BAR))
        return f"{ledger.call:>6}  {bar}  {size:>{self._size_width}}  {marks}  {move}"

    def _deliberate(self, failure: dict[str, Any]) -> None:
        """The gate failure provoked on purpose, and why it failed."""
        removed = " and ".join(failure["removed"])
        self._print(f"  {'gate, on purpose':<17} the last request without its {removed}:")
        if failure["passed"]:
            self._print(f"  {'':<17} passes: the facts are still in the recent history")
            return
        verdict = self._paint("FAILS", "1;31")
        self._print(f"  {'':<17} {verdict}, as intended (deliberate, not a problem of the run)")
        for line in failure["failures"]:
            self._print(f"  {'':<17}   {line}")

    def _summary(self, session: DemoSession, seconds: float) -> None:
        data = summary_data(session, self.label, seconds, kept=self.keeps_workspace)
        compactions, reduced = data["compactions"], data["reduced"]
        largest, notes, facts = data["largest_prompt"], data["notes"], data["facts"]
        visible = sum(1 for fact in facts if fact["parts"])
        reduced_text = f"; tool loop reduced at call {numbers_text(reduced)}" if reduced else ""
        rows = [
            ("run", f"{data['turns']} user turns, {data['calls']} model calls, {seconds:.1f} s"),
            (
                "compactions",
                f"{len(compactions)}"
                + (f" (calls {numbers_text(compactions)})" if compactions else "")
                + reduced_text,
            ),
            (
                "largest prompt",
                (
                    f"{largest['tokens']:,} tokens (call {largest['call']}); limit "
                    f"{data['limit']:,} = window {data['window']:,} - output reserve "
                    f"{data['output_reserve']:,}"
                ),
            ),
            (
                "notes",
                (
                    f"{notes['created']} written, {notes['updated']} updated, {notes['read']} "
                    f"read back, {notes['searched']} searches; {notes['on_disk']} on disk"
                ),
            ),
            ("quality gate", gate_row(data["gate"])),
            (
                "",
                (
                    f"prompt <= {data['gate']['max_request_tokens']:,} tokens, retrieval <= "
                    f"{data['gate']['max_retrieval_share']:.0%} of the window, facts stated so far"
                ),
            ),
            (
                f"facts at call {data['calls']}",
                f"{visible} of {len(facts)} planted facts still in the model's request",
            ),
        ]
        self._print("")
        self._print(self._paint("summary", "1"))
        for label, value in rows:
            self._print(f"  {label:<17} {value}")
        needle_width = max((len(f["needle"]) for f in facts), default=0)
        label_width = max((len(f["label"]) for f in facts), default=0)
        for fact in facts:
            where = (
                ", ".join(_PART_NAMES[part] for part in fact["parts"])
                if fact["parts"]
                else self._paint("not visible", "1;31")
            )
            self._print(
                f"  {'':<17}   {fact['needle']:<{needle_width}}  "
                f"{fact['label']:<{label_width}}  {where}"
            )
        self._deliberate(data["deliberate_failure"])
        if data["workspace_kept"]:
            self._print(f"  {'workspace':<17} {data['workspace']}")
            self._print(
                f"  {'':<17} project/ is what the terminal explored, notes/ the agent's notes"
            )
        else:
            self._print(f"  {'workspace':<17} removed ({data['workspace']}); --keep keeps it")
        answer = textwrap.wrap(data["last_answer"], WIDTH - 20) or ["(none)"]
        self._print(f"  {'last answer':<17} {answer[0]}")
        for line in answer[1:]:
            self._print(f"  {'':<17} {line}")
