"""`contextkit count`: per file, the characters, the `count_tokens` estimate and the exact count.

The exact (tiktoken) count is shown when its encoding can be loaded on this machine.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from langchain_contextkit.cli import EXIT_FAILED

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.tokens.count import TiktokenCounter

__all__ = ["run_count"]


@dataclass(frozen=True, slots=True)
class _FileCount:
    path: str
    chars: int
    estimate: int
    exact: int | None


def _exact_counter(encoding: str) -> TiktokenCounter | None:
    from langchain_contextkit.errors import ContextKitError  # noqa: PLC0415 - only for count
    from langchain_contextkit.tokens.count import tiktoken_counter  # noqa: PLC0415

    try:
        return tiktoken_counter(encoding)
    except ContextKitError as exc:
        print(f"contextkit: no exact counts: {exc}", file=sys.stderr)
        return None


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    # Undecodable bytes become U+FFFD instead of aborting the whole count.
    return Path(path).read_text(encoding="utf-8", errors="replace")


def run_count(files: Sequence[str], *, encoding: str, as_json: bool, out: TextIO) -> int:
    """Print the counts of `files` to `out` (a table, or one JSON object); the exit status."""
    from langchain_contextkit.tokens.count import count_tokens  # noqa: PLC0415 - only for count

    exact = _exact_counter(encoding)
    rows: list[_FileCount] = []
    status = 0
    for path in files:
        try:
            text = _read(path)
        except OSError as exc:
            print(f"contextkit: {path}: {exc.strerror or exc}", file=sys.stderr)
            status = EXIT_FAILED
            continue
        rows.append(_FileCount(path, len(text), count_tokens(text), exact(text) if exact else None))
    if as_json:
        for row in rows:
            print(json.dumps(asdict(row), ensure_ascii=False), file=out)
        return status
    # The encoding asked for, not the one loaded: offline, `tiktoken_counter` loads the
    # `<name>_offline` copy, which bundles the same BPE file and so gives the same counts.
    exact_heading = encoding if exact else "exact"
    width = max([len("file"), *(len(r.path) for r in rows)])
    print(
        f"{'file':<{width}} {'chars':>10} {'estimate':>10} {exact_heading:>20} {'diff':>7}",
        file=out,
    )
    for row in rows:
        if row.exact is None:
            exact_cell, diff = "n/a", ""
        else:
            exact_cell = f"{row.exact:,}"
            diff = f"{(row.estimate - row.exact) / row.exact:+.1%}" if row.exact else ""
        print(
            f"{row.path:<{width}} {row.chars:>10,} {row.estimate:>10,} {exact_cell:>20} {diff:>7}",
            file=out,
        )
    return status
