"""Per-call overhead of TerminalTool against running the same argv with subprocess.run.

    python bench/bench_terminal.py            # 200 calls per measurement
    python bench/bench_terminal.py --quick    # 30 calls (CI smoke run)

A generated tree of 1,000 files (50 directories of 20 small text files, in a temporary
directory) is explored with `ls -R .` and `grep -rn needle .`. For each command the median
wall time of one call is measured, all variants interleaved call by call so the noise of a
shared machine hits them alike:

- direct: `subprocess.run(argv, capture_output=True)` of the plain command;
- tool: `TerminalTool(sandbox="none")._run(command)`, everything the tool adds: parsing,
  the argument policy, path checks, `prlimit`, capped incremental reading, the report;
- invoke: `tool.invoke({"command": ...})`, the same plus LangChain's own tool dispatch
  (input validation, callbacks), which every `BaseTool` pays; shown, not a target;
- with bubblewrap: direct is `subprocess.run` of the very argv the tool runs under
  bubblewrap, tool and invoke as above with `sandbox="bwrap"`.

Target (issue 7): the tool's median is under 2x the direct median, without bubblewrap
and with it (the same sandboxed argv). The cost of the sandbox itself (bwrap direct vs
direct) is printed too; it is not a target.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_contextkit.tools import TerminalTool
from langchain_contextkit.tools.terminal._exec import find_bwrap, find_executable, sandbox_works

if TYPE_CHECKING:
    from collections.abc import Callable

TARGET = 2.0
COMMANDS = {"ls": ["ls", "-R", "."], "grep -rn": ["grep", "-rn", "needle", "."]}


def make_tree(root: Path, dirs: int = 50, files: int = 20) -> None:
    for d in range(dirs):
        directory = root / f"pkg{d:02d}"
        directory.mkdir()
        for f in range(files):
            lines = [f"line {i} of module {d}.{f}" for i in range(30)]
            if f == 7:
                lines[12] = "needle here"
            (directory / f"mod{f:02d}.py").write_text("\n".join(lines) + "\n")


def medians_ms(*fns: Callable[[], object], calls: int) -> list[float]:
    """Median wall time of each function, calls interleaved so machine noise hits all alike."""
    for fn in fns:
        fn()  # warm caches (page cache, dynamic linker, imports)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(calls):
        for fn, bucket in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) * 1e3 for bucket in times]


def direct(argv: list[str], cwd: Path) -> Callable[[], object]:
    def run() -> object:
        return subprocess.run(  # noqa: S603 - a fixed argv
            argv, cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL, check=False
        )

    return run


def via_tool(tool: TerminalTool, command: str) -> Callable[[], object]:
    return lambda: tool._run(command)  # noqa: SLF001 - the tool's own work, no dispatch


def via_invoke(tool: TerminalTool, command: str) -> Callable[[], object]:
    return lambda: tool.invoke({"command": command})


def measure(
    tool: TerminalTool, command: str, argv: list[str], root: Path, calls: int
) -> tuple[float, float, float]:
    base, ours, invoked = medians_ms(
        direct(argv, root), via_tool(tool, command), via_invoke(tool, command), calls=calls
    )
    return base, ours, invoked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 calls per measurement")
    args = parser.parse_args()
    calls = 30 if args.quick else 200
    bwrap = find_bwrap()
    bwrap_ok = bwrap is not None and sandbox_works(bwrap)
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        make_tree(root)
        plain = TerminalTool(root, sandbox="none")
        boxed = TerminalTool(root, sandbox="bwrap") if bwrap_ok else None
        print(f"tree: 1,000 files in 50 directories; median of {calls} interleaved calls")
        print(f"{'':15} {'direct':>8} {'tool':>8} {'ratio':>6} {'invoke':>8} {'ratio':>6}")
        for name, words in COMMANDS.items():
            command = " ".join(words)
            executable = find_executable(words[0])
            if executable is None or "pkg07" not in plain.invoke({"command": command}):
                print(f"FAIL: {command} does not run here")
                return 1
            rows = [("", plain, [executable, *words[1:]])]
            if boxed is not None:
                plan = boxed._check(command)  # noqa: SLF001 - the exact argv the tool runs
                rows.append((" bwrap", boxed, plan.stages[0] if not isinstance(plan, str) else []))
            bare = 0.0
            for suffix, tool, argv in rows:
                base, ours, invoked = measure(tool, command, argv, root, calls)
                bare = bare or base
                label = name + suffix
                print(
                    f"{label:15} {base:6.2f}ms {ours:6.2f}ms {ours / base:5.2f}x "
                    f"{invoked:6.2f}ms {invoked / base:5.2f}x"
                    + (f"   (sandbox alone: {base / bare:.1f}x direct)" if suffix else "")
                )
                if ours / base >= TARGET:
                    failures.append(f"{label}: {ours / base:.2f}x")
    if boxed is None:
        print("bubblewrap: not usable here (not installed, or no user namespaces); skipped")
    print()
    if failures:
        print(f"FAIL: overhead at or above {TARGET:g}x: " + "; ".join(failures))
        return 1
    print(f"PASS: the tool's median call is under {TARGET:g}x running the same argv directly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
