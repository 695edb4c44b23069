"""What the model reads after a command ran: output, cut notes, stderr, exit status."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_contextkit.tools.terminal._exec import MAX_DRAIN_BYTES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain_contextkit.tools.terminal._exec import PipelineResult

__all__ = ["Report", "report"]

# By name: some of these signals do not exist off POSIX, where this module still imports.
_SIGNAL_NOTES = {
    "SIGXFSZ": "it tried to write a file; this terminal is read-only",
    "SIGXCPU": "it used up its CPU time",
    "SIGKILL": "it was stopped",
    "SIGSEGV": "it crashed (perhaps at its memory limit)",
}


@dataclass(frozen=True, slots=True)
class Report:
    """The text for the model, and whether it describes a failure to act on."""

    text: str
    timed_out: bool


def report(
    result: PipelineResult,
    names: Sequence[str],
    executables: Mapping[str, str],
    timeout: float,
) -> Report:
    """Render a pipeline's result for the model.

    Args:
        result: What the pipeline printed and how its stages ended.
        names: The stages' command names.
        executables: Command name to the absolute path it ran as.
        timeout: The call's time limit, for the timeout note.

    Returns:
        The text; `(no output)` when there is nothing to show.
    """
    parts: list[str] = []
    head, tail, cut = result.stdout.result()
    parts.append(head)
    if cut:
        parts.append(
            f"\n[... {cut:,} of {result.stdout.total_chars:,} characters cut here; the "
            "start and the end are shown. Narrow the command (grep -n, head -n, tail -n, "
            "wc -l) to see the rest ...]\n"
        )
        parts.append(tail)
    if result.stopped_early:
        parts.append(
            f"\n[output passed {MAX_DRAIN_BYTES >> 20} MiB; the command was stopped there, "
            "so the end shown is not the end of the output]"
        )
    # NUL bytes (binary files) become a visible symbol: many stores and provider APIs
    # reject NUL inside text (a Postgres checkpointer cannot save such a message).
    text = "".join(parts).rstrip("\n").replace("\0", "\u2400")
    errors = _stderr(result, names, executables)
    if errors:
        text += ("\n" if text else "") + "[stderr]\n" + errors
    status = _status(result, names)
    if status:
        text += ("\n" if text else "") + status
    if result.timed_out:
        note = (
            f"[timed out after {timeout:g} s; the command was stopped. Narrow it (a "
            "subdirectory, find -maxdepth, grep on fewer files).]"
        )
        return Report(f"{text}\n{note}" if text else note, timed_out=True)
    return Report(text or "(no output)", timed_out=False)


def _stderr(result: PipelineResult, names: Sequence[str], executables: Mapping[str, str]) -> str:
    head, tail, cut = result.stderr.result()
    text = head + (f"\n[... {cut:,} characters cut ...]\n{tail}" if cut else "")
    # Commands name themselves by argv[0], the absolute path here: show the plain name.
    for name in set(names):
        path = executables[name]
        text = re.sub(rf"(?m)^{re.escape(path)}:", f"{name}:", text)
    return text.rstrip("\n")


def _status(result: PipelineResult, names: Sequence[str]) -> str:
    if result.timed_out or result.stopped_early:
        return ""
    notes = []
    last = len(result.statuses) - 1
    for i, (name, status) in enumerate(zip(names, result.statuses, strict=True)):
        if not status:
            continue
        if status < 0:
            if i < last and signal.Signals(-status).name == "SIGPIPE":
                continue  # an earlier stage stopped by `| head`: normal
            number = signal.Signals(-status)
            why = _SIGNAL_NOTES.get(number.name, "it was killed")
            notes.append(f"[{name} was killed by {number.name}: {why}]")
        elif name == "grep" and status == 1:
            notes.append("[grep: no lines matched (exit status 1)]")
        else:
            notes.append(f"[{name}: exit status {status}]")
    return "\n".join(notes)
