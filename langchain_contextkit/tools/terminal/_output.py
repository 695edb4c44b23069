"""What a terminal command printed: output kept as a head and a tail, and how it ended.

A command's output is read as it comes; `CappedText` keeps its first and last characters
within a budget and counts what was cut between them, so memory stays bounded whatever
the command prints. A command that keeps writing is stopped after `MAX_DRAIN_BYTES`.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

__all__ = ["MAX_DRAIN_BYTES", "READ_CHUNK", "STDERR_CHARS", "CappedText", "PipelineResult"]

MAX_DRAIN_BYTES = 64 << 20
"""Output after which a command is stopped (what was kept so far is still shown)."""

STDERR_CHARS = 2_000
"""Characters of standard error kept (head and tail), on top of `max_output_chars`."""

READ_CHUNK = 1 << 16
"""Bytes read from a pipe at a time."""


class CappedText:
    """Decoded output kept as a head and a tail, with a count of what was cut."""

    __slots__ = (
        "_decoder",
        "_head",
        "_head_len",
        "_tail",
        "head_limit",
        "tail_limit",
        "total_bytes",
        "total_chars",
    )

    def __init__(self, limit: int) -> None:
        """Keep at most `limit` characters: the first half and the last half."""
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self.total_bytes = 0
        self.total_chars = 0

    def feed(self, data: bytes, *, final: bool = False) -> None:
        """Add a chunk of output."""
        self.total_bytes += len(data)
        text = self._decoder.decode(data, final=final)
        self.total_chars += len(text)
        if self._head_len < self.head_limit:
            taken = text[: self.head_limit - self._head_len]
            self._head.append(taken)
            self._head_len += len(taken)
            text = text[len(taken) :]
        if text:
            self._tail += text
            if len(self._tail) > 2 * self.tail_limit + READ_CHUNK:
                self._tail = self._tail[-self.tail_limit :] if self.tail_limit else ""

    def result(self) -> tuple[str, str, int]:
        """(head, tail, characters cut between them); the tail is empty if nothing was cut."""
        self.feed(b"", final=True)
        head = "".join(self._head)
        kept_tail = self._tail[-self.tail_limit :] if self.tail_limit else ""
        cut = self.total_chars - len(head) - len(kept_tail)
        if cut <= 0:
            return head + self._tail, "", 0
        # Cut at line boundaries when one is near, so no half lines are shown.
        newline = head.rfind("\n")
        if newline >= len(head) // 2:
            cut += len(head) - newline - 1
            head = head[: newline + 1]
        newline = kept_tail.find("\n")
        if 0 <= newline < len(kept_tail) // 2:
            cut += newline + 1
            kept_tail = kept_tail[newline + 1 :]
        return head, kept_tail, cut


@dataclass(slots=True)
class PipelineResult:
    """What a pipeline printed and how its stages ended."""

    stdout: CappedText
    stderr: CappedText
    statuses: list[int | None] = field(default_factory=list)
    """Each stage's exit status (negative: killed by that signal)."""
    timed_out: bool = False
    stopped_early: bool = False
    """The output passed `MAX_DRAIN_BYTES` and the command was stopped."""
    elapsed: float = 0.0
