"""The ``contextkit`` command.

```
contextkit --version
contextkit count FILE... [--encoding cl100k_base] [--json]
contextkit build QUERY --docs DIR [--history FILE] [--window N] [--json]
contextkit demo [--model PROVIDER:NAME] [--turns N] [--window N] [--workspace DIR] [--keep]
                [--ledger FILE] [--plot FILE.png] [--json]
contextkit report LEDGER.jsonl [--json] [--plot FILE.png] [--thread ID]
                  [--baseline OLD.jsonl] [--tolerance X] [--latency-tolerance X]
contextkit report RESULT.json [--baseline OLD.json] [--tolerance X] [--json] [--plot FILE.png]
```

`count` estimates tokens per file, `build` assembles a prompt from a folder under a window,
`demo` runs an agent session on a bundled project and `report` prints a ledger log's
dashboard. Exit status: 0 on success, 2 on a usage error, 1 on a failure, with one line on
stderr. Each command imports what it needs only when it runs, so `--help` is quick.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from langchain_contextkit._version import __version__

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.cli.build import BuildRequest

__all__ = ["main"]

EXIT_FAILED = 1
"""A command that could not do its job: a file it cannot read, a model that fails."""

EXIT_USAGE = 2
"""Bad arguments, the status argparse uses for its own errors."""

# The commands' defaults, as their help states them. `_build`, `docs_source` and `_demo`
# hold the values the commands run with, but importing them would load langchain (or the
# demo) for every `--help`; a test checks these copies against them.
_BUILD_WINDOW = 8192
_BUILD_TOP = 10
_BUILD_CHUNK_TOKENS = 200
_DEMO_WINDOW = 6000
_BUILD_HISTORY_HELP = (
    'a JSON list of {"role": "user" | "assistant", "content": "..."} objects, oldest first; '
    "the most recent messages that fit the history quota join the prompt"
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextkit",
        description="Context engineering for LangChain and LangGraph: token budgets you can see.",
        epilog="Exit status: 0 success, 1 failure, 2 bad arguments.",
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

    _add_build_parser(commands)

    _add_demo_parser(commands)
    _add_report_parser(commands)
    return parser


def _add_report_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser(
        "report",
        help="the dashboard of a ledger log (JSON lines, one per model call)",
        description=(
            "Read a ledger log written by ContextKitMiddleware(ledger_path=...) or "
            "LedgerCallbackHandler and print its dashboard: model calls, mean and p95 input "
            "tokens (reported by the provider when the lines have it, else the ledger's "
            "estimates), cache-hit rate from the reported cache reads, evidence share of the "
            "input, mean and p95 latency, compactions per 100 calls, overflow retries and "
            "quality-gate failures; per thread when the log holds several. With --baseline, "
            "the change of every figure from an earlier log; a saved evaluate result "
            "(EvalResult.to_json) prints its table and compares with an earlier result. A file "
            "that cannot be read or a malformed line exits with status 1, naming the line."
        ),
    )
    report.add_argument("ledger", metavar="LEDGER.jsonl", help="the ledger log to read")
    report.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    report.add_argument(
        "--plot",
        metavar="FILE.png",
        help=(
            "save every call's window as a stacked bar chart (needs matplotlib: "
            'pip install "langchain-contextkit[plot]")'
        ),
    )
    report.add_argument("--thread", metavar="ID", help="only the calls of this thread")
    report.add_argument(
        "--baseline",
        metavar="OLD",
        help=(
            "an earlier ledger log (or saved evaluate result) to compare with: prints the "
            "change of every figure and exits 1 when one got worse beyond --tolerance"
        ),
    )
    report.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        metavar="X",
        help=(
            "how much worse a figure may get: absolute for scores, shares and rates (0.05 = "
            "five points), relative for tokens and counts (0.05 = 5%%); default 0"
        ),
    )
    report.add_argument(
        "--latency-tolerance",
        type=float,
        metavar="X",
        help="relative tolerance for latencies (default: latency is shown, never fails)",
    )


def _add_demo_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo",
        help="run an agent session on a sample project, one window ledger per call (offline)",
        description=(
            "Run a create_agent agent with ContextKitMiddleware, TerminalTool and NoteTool "
            "through an on-call shift on a bundled sample project. Prints one ledger bar per "
            "model call and a summary. Offline by default: a scripted agent plays the model "
            "(no API key). With --model, or OPENAI_BASE_URL set, a real model gets the same "
            "user turns."
        ),
    )
    demo.add_argument(
        "--model",
        metavar="PROVIDER:NAME",
        help=(
            "a real model through init_chat_model, e.g. openai:gpt-4o-mini (needs the "
            "provider's package and key); with OPENAI_BASE_URL set, the model name for that "
            "OpenAI-compatible server"
        ),
    )
    demo.add_argument("--turns", type=int, metavar="N", help="run only the first N user turns")
    demo.add_argument(
        "--window",
        type=int,
        default=_DEMO_WINDOW,
        metavar="N",
        help=f"the window the middleware lays every call out in (default: {_DEMO_WINDOW})",
    )
    demo.add_argument(
        "--workspace",
        metavar="DIR",
        help=(
            "where to copy the project and keep the notes; it is kept (default: a temporary "
            "folder, removed at the end unless --keep is given)"
        ),
    )
    demo.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary workspace (project and notes) and print where it is",
    )
    demo.add_argument(
        "--ledger",
        metavar="FILE",
        help=(
            "append every call's ledger to this JSON-lines file and keep it (default: "
            "ledger.jsonl in the workspace)"
        ),
    )
    demo.add_argument(
        "--plot",
        metavar="FILE.png",
        help="save the calls' window ledgers as a stacked bar chart (needs matplotlib)",
    )
    demo.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the bars"
    )


def _add_build_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    build = commands.add_parser(
        "build",
        help="assemble a prompt from a folder of documents under a token budget",
        description=(
            "Chunk every .md, .markdown, .txt and .rst file under DIR (langchain-text-splitters), "
            "rank the chunks against QUERY with BM25 (SQLite FTS5; Chinese works), and "
            "assemble system prompt, retrieved chunks, history and question with a "
            "ContextBuilder under ContextConfig.for_window(N). Prints the prompt, then the "
            "ledger. Bad arguments (a window too small, an empty question) exit with status 2, "
            "input that cannot be used (a missing folder, a bad history file) with 1; either "
            "way with one line on stderr."
        ),
    )
    build.add_argument("query", metavar="QUERY", help="the question to build the prompt for")
    build.add_argument("--docs", required=True, metavar="DIR", help="folder of documents")
    build.add_argument(
        "--history", metavar="FILE", help=f"conversation so far: {_BUILD_HISTORY_HELP}"
    )
    build.add_argument(
        "--window",
        type=int,
        metavar="N",
        help=(
            "the model's context window in tokens; the context gets half of it "
            f"(default: {_BUILD_WINDOW}; the ledger's first line names the window used)"
        ),
    )
    build.add_argument(
        "--top",
        type=int,
        metavar="K",
        help=f"BM25 candidates offered to the builder (default: {_BUILD_TOP})",
    )
    build.add_argument(
        "--chunk-tokens",
        type=int,
        metavar="N",
        help=f"largest chunk, in count_tokens tokens (default: {_BUILD_CHUNK_TOKENS})",
    )
    build.add_argument(
        "--system",
        metavar="TEXT",
        help="the system prompt (default: answer from the knowledge, naming files)",
    )
    build.add_argument(
        "--json", action="store_true", help="print one JSON object: prompt and ledger"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    Args:
        argv: Arguments without the program name; `sys.argv[1:]` when None.
    """
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "count":
        from langchain_contextkit.cli.count import run_count  # noqa: PLC0415 - only here

        return run_count(args.files, encoding=args.encoding, as_json=args.json, out=sys.stdout)
    if args.command == "build":
        return _run_build(args)
    if args.command == "demo":
        from langchain_contextkit.cli.demo.run import DemoOptions, run_demo  # noqa: PLC0415 - only here

        options = DemoOptions(
            model=args.model,
            turns=args.turns,
            window=args.window,
            workspace=args.workspace,
            keep=args.keep,
            ledger=args.ledger,
            plot=args.plot,
            as_json=args.json,
        )
        return run_demo(options, out=sys.stdout, err=sys.stderr)
    if args.command == "report":
        from langchain_contextkit.cli.report import ReportRequest, run_report  # noqa: PLC0415 - only here

        request = ReportRequest(
            path=args.ledger,
            as_json=args.json,
            plot=args.plot,
            thread=args.thread,
            baseline=args.baseline,
            tolerance=args.tolerance,
            latency_tolerance=args.latency_tolerance,
        )
        return run_report(request, out=sys.stdout, err=sys.stderr)
    parser.print_help()
    return EXIT_USAGE


def _run_build(args: argparse.Namespace) -> int:
    # Loads langchain and the builder: only when the command runs.
    from langchain_contextkit.cli import build as _build  # noqa: PLC0415
    from langchain_contextkit.retrieval.sources.chunking import DEFAULT_CHUNK_TOKENS  # noqa: PLC0415

    # Always a number, so the build does not note the assumed window on stderr on every
    # run: the ledger's title (and the JSON's "window") already says which window was used.
    window: int = _build.DEFAULT_WINDOW if args.window is None else args.window
    request = _build.BuildRequest(
        query=args.query,
        docs=args.docs,
        history=args.history,
        window=window,
        top=_build.DEFAULT_TOP if args.top is None else args.top,
        chunk_tokens=DEFAULT_CHUNK_TOKENS if args.chunk_tokens is None else args.chunk_tokens,
        system_prompt=_build.DEFAULT_SYSTEM_PROMPT if args.system is None else args.system,
        as_json=args.json,
    )
    problem = _build_usage_problem(request, window)
    if problem is not None:
        print(f"contextkit: {problem}", file=sys.stderr)
        return EXIT_USAGE
    return _build.run_build(request, out=sys.stdout, err=sys.stderr)


def _build_usage_problem(request: BuildRequest, window: int) -> str | None:
    """What is wrong with the build's arguments alone, before any file is read."""
    from langchain_contextkit.cli.build import (  # noqa: PLC0415 - heavy, as above
        _check_fixed_parts,
        _check_options,
        _config,
        _one_line,
    )
    from langchain_contextkit.errors import ContextKitError  # noqa: PLC0415

    # The same checks `run_build` makes (they fail it with status 1), made first so that
    # numbers out of range and a window too small for the question are usage errors.
    try:
        _check_options(request)
        _check_fixed_parts(_config(window), window, request)
    except ContextKitError as exc:
        return _one_line(exc)
    return None
