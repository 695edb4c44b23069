"""Resource limits of a terminal command: CPU time, memory, no file writes, few processes.

The limits are set before the command runs, by util-linux `prlimit` (which sets them on
itself and then execs the command, keeping CPython's fast `vfork` spawn) or, where
`prlimit` is missing, by a `preexec_fn`.
"""

# /proc/loadavg is a fixed kernel file, read with plain open():
# ruff: noqa: PTH123

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

# POSIX only. The package must still import elsewhere (the tool then refuses to start,
# see TerminalTool's platform check), so `resource` is optional here.
if sys.platform != "win32":
    import resource

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ADDRESS_SPACE_BYTES", "SPARE_PROCESSES", "Limits"]

ADDRESS_SPACE_BYTES = 1 << 30
"""`RLIMIT_AS` of every command: enough for sort and grep on large files."""

SPARE_PROCESSES = 64
"""How many more tasks than exist now a command's user may start (`RLIMIT_NPROC`)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of every command (soft = hard, so a command cannot raise them)."""

    cpu_seconds: int
    address_space: int = ADDRESS_SPACE_BYTES

    @classmethod
    def for_timeout(cls, timeout: float) -> Limits:
        """CPU time a little above the wall-clock timeout (the timeout acts first)."""
        return cls(cpu_seconds=math.ceil(timeout) + 1)

    def values(self) -> list[tuple[int, int]]:
        """(resource, limit) pairs, each clamped to the current hard limit."""
        wanted = [
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_AS, self.address_space),
            (resource.RLIMIT_FSIZE, 0),
            (resource.RLIMIT_CORE, 0),
        ]
        processes = _process_cap()
        if processes is not None:
            # Per user, by the kernel's definition, and not enforced for root: a cap on
            # runaway forking, while the real guard is that no allowed command forks.
            wanted.append((resource.RLIMIT_NPROC, processes))
        out = []
        for which, value in wanted:
            hard = resource.getrlimit(which)[1]
            out.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
        return out

    def prlimit_prefix(self, prlimit: str) -> list[str]:
        """`prlimit --cpu=N:N ... --` to run a command under these limits."""
        names = {
            resource.RLIMIT_CPU: "cpu",
            resource.RLIMIT_AS: "as",
            resource.RLIMIT_FSIZE: "fsize",
            resource.RLIMIT_CORE: "core",
            resource.RLIMIT_NPROC: "nproc",
        }
        return [prlimit, *(f"--{names[w]}={v}:{v}" for w, v in self.values()), "--"]

    def preexec(self) -> Callable[[], None]:
        """A `preexec_fn` setting these limits (the fallback without `prlimit`)."""
        values = self.values()

        def apply() -> None:
            for which, value in values:
                resource.setrlimit(which, (value, value))

        return apply


def _process_cap() -> int | None:
    """Tasks on the machine now plus `SPARE_PROCESSES`: an upper bound that leaves room.

    `RLIMIT_NPROC` counts all of the user's tasks (threads too), so a fixed small cap
    would break commands for a user with many processes; /proc/loadavg's total counts
    every task on the machine, which bounds the user's.
    """
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            total = int(handle.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return None
    return total + SPARE_PROCESSES
