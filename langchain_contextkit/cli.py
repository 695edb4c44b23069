"""The ``contextkit`` command.

```
contextkit --version
contextkit count FILE... [--encoding cl100k_base] [--json]
contextkit demo
```

`count` prints, per file, the characters, the `count_tokens` estimate and, when a tiktoken
encoding can be loaded, the exact count beside it. `demo` runs offline and shows what the
library does with nothing but its own code.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from langchain_contextkit._version import __version__
from langchain_contextkit.errors import ContextKitError
from langchain_contextkit.tokens import TiktokenCounter, count_tokens, tiktoken_counter

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


@dataclass(frozen=True, slots=True)
class _FileCount:
    path: str
    chars: int
    estimate: int
    exact: int | None


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextkit",
        description="Context engineering for LangChain and LangGraph: token budgets you can see.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    count = commands.add_parser("count", help="count the tokens of files ('-' reads stdin)")
    count.add_argument("files", nargs="+", metavar="FILE")
    count.add_argument(
        "--encoding",
        default="cl100k_base",
        help="tiktoken encoding for the exact column (default: cl100k_base)",
    )
    count.add_argument("--json", action="store_true", help="print JSON lines instead of a table")

    commands.add_parser("demo", help="run the offline demonstration")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    Args:
        argv: Arguments without the program name; `sys.argv[1:]` when None.
    """
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "count":
        return _count(args.files, encoding=args.encoding, as_json=args.json, out=sys.stdout)
    if args.command == "demo":
        from langchain_contextkit._demo import run_demo  # noqa: PLC0415 - only the demo needs it

        return run_demo(sys.stdout)
    parser.print_help()
    return 2


def _exact_counter(encoding: str) -> TiktokenCounter | None:
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


def _count(files: Sequence[str], *, encoding: str, as_json: bool, out: TextIO) -> int:
    exact = _exact_counter(encoding)
    rows: list[_FileCount] = []
    status = 0
    for path in files:
        try:
            text = _read(path)
        except OSError as exc:
            print(f"contextkit: {path}: {exc.strerror or exc}", file=sys.stderr)
            status = 1
            continue
        rows.append(_FileCount(path, len(text), count_tokens(text), exact(text) if exact else None))
    if as_json:
        for row in rows:
            print(json.dumps(asdict(row), ensure_ascii=False), file=out)
        return status
    exact_heading = exact.encoding_name if exact else "exact"
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
