"""Run a checked pipeline: resource limits, the bubblewrap sandbox, capped output, no leftovers.

Each stage is its own process (`shell=False`) in its own session, the first reading an
empty standard input (never the agent's own: for a stdio tool server that is the protocol
channel). Limits (CPU, memory, no file writes, few processes) are set by util-linux
`prlimit`, or by a `preexec_fn` where it is missing. Under bubblewrap a stage sees the
workspace and the system directories read-only, no network and a private /tmp. On timeout
and at the end of every call the process groups still alive are killed.
"""

# /proc is read with plain os calls on its fixed kernel paths; string paths throughout:
# ruff: noqa: PTH112, PTH114, PTH115, PTH123, PTH208

from __future__ import annotations

import codecs
import contextlib
import functools
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# POSIX only; the package still imports elsewhere (the tool then refuses to start).
if sys.platform != "win32":
    import resource

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "SYSTEM_PATH",
    "CappedText",
    "PipelineResult",
    "bwrap_command",
    "find_bwrap",
    "find_executable",
    "limit_preexec",
    "limit_prefix",
    "run_pipeline",
    "runs",
    "sandbox_works",
]

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""Where commands are looked up, and the children's PATH (never the parent's PATH)."""

MAX_DRAIN_BYTES = 64 << 20
"""Output after which a command is stopped (what was kept so far is still shown)."""

STDERR_CHARS = 2_000
"""Characters of standard error kept (head and tail), on top of `max_output_chars`."""

_READ_CHUNK = 1 << 16
_ADDRESS_SPACE_BYTES = 1 << 30  # enough for sort and grep on large files
_SPARE_PROCESSES = 64
_KILL_GRACE = 2.0  # seconds to reap a killed group; SIGKILL cannot be ignored
_GONE_POLL = 0.002
# Mounted read-only in the sandbox when present: what dynamic linking, user names in
# `ls -l`, time zones and `file`'s magic need. No secrets (no shadow, no keys).
# fmt: off
_SANDBOX_ETC = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
    "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/magic",
    "/etc/magic.mime",
)
# fmt: on
_SANDBOX_TOP = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_NOBODY = "65534"


# -- the sandbox -------------------------------------------------------------------------


def find_executable(name: str) -> str | None:
    """The absolute path of `name` on the system PATH (not the parent process's PATH)."""
    return shutil.which(name, path=SYSTEM_PATH)


def find_bwrap() -> str | None:
    """The bubblewrap executable, if installed."""
    return find_executable("bwrap")


def bwrap_command(bwrap: str, root: str | None, cwd: str) -> list[str]:
    """The bubblewrap argv up to its `--`: `root` and the system directories read-only.

    New user (mapped to nobody), PID, network, IPC, UTS and cgroup namespaces, no
    capabilities, a private /tmp, a minimal /dev and /proc, killed with its parent. No
    `--new-session`: the stage already runs in its own session without a terminal, and
    staying in its process group lets the tool kill the sandbox with the group. The root
    is mounted at its own path so paths in the output match the model's; `None` mounts
    none (the probe).
    """
    argv = [
        *(bwrap, "--unshare-all", "--unshare-user", "--uid", _NOBODY, "--gid", _NOBODY),
        *("--cap-drop", "ALL", "--die-with-parent"),
        # The command is pid 1: bwrap reaps it itself, so nothing outlives bwrap's exit.
        *("--as-pid-1", "--ro-bind", "/usr", "/usr"),
    ]
    for top in _SANDBOX_TOP:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for path in _SANDBOX_ETC:
        argv += ["--ro-bind-try", path, path]
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]  # noqa: S108 - private
    if root is not None:
        argv += ["--ro-bind", root, root]
    return [*argv, "--chdir", cwd, "--"]


def runs(argv: Sequence[str]) -> bool:
    """Whether `argv` starts and exits 0 (a probe: fixed arguments, no input, 10 s)."""
    try:
        done = subprocess.run(  # noqa: S603 - fixed arguments
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
            env={"PATH": SYSTEM_PATH},
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def sandbox_works(bwrap: str) -> bool:
    """Whether bubblewrap can start a sandbox here (user namespaces may be disabled)."""
    true = find_executable("true")
    return true is not None and runs([*bwrap_command(bwrap, None, "/"), true])


# -- resource limits (soft = hard, so a command cannot raise them) ----------------------


def _limits(timeout: float) -> list[tuple[str, int, int]]:
    """(prlimit name, resource, value) of every limit, clamped to the current hard limit.

    CPU time is a little above the wall-clock timeout (the timeout acts first). The
    process cap is per user (and not enforced for root): the tasks on the machine now,
    from /proc/loadavg, plus some spare, against runaway forking.
    """
    wanted = [
        ("cpu", resource.RLIMIT_CPU, math.ceil(timeout) + 1),
        ("as", resource.RLIMIT_AS, _ADDRESS_SPACE_BYTES),
        ("fsize", resource.RLIMIT_FSIZE, 0),
        ("core", resource.RLIMIT_CORE, 0),
    ]
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/loadavg", encoding="ascii") as handle:
            tasks = int(handle.read().split()[3].split("/")[1])
        wanted.append(("nproc", resource.RLIMIT_NPROC, tasks + _SPARE_PROCESSES))
    out = []
    for name, which, value in wanted:
        hard = resource.getrlimit(which)[1]
        out.append((name, which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return out


def limit_prefix(prlimit: str, timeout: float) -> list[str]:
    """`prlimit --cpu=N:N ... --`: runs a command under the limits, keeping `vfork` spawns."""
    return [prlimit, *(f"--{name}={v}:{v}" for name, _, v in _limits(timeout)), "--"]


def limit_preexec(timeout: float) -> Callable[[], None]:
    """A `preexec_fn` setting the limits (the fallback where `prlimit` is missing)."""
    values = [(which, value) for _, which, value in _limits(timeout)]

    def apply() -> None:
        for which, value in values:
            resource.setrlimit(which, (value, value))

    return apply


# -- output --------------------------------------------------------------------------------


class CappedText:
    """Decoded output kept as a head and a tail within a budget, counting what was cut."""

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
            if len(self._tail) > 2 * self.tail_limit + _READ_CHUNK:
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


# -- running -------------------------------------------------------------------------------


def run_pipeline(
    stages: Sequence[Sequence[str]],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    max_chars: int,
    preexec: Callable[[], None] | None = None,
) -> PipelineResult:
    """Run `stages` as a pipeline; return its capped output within `timeout` seconds.

    Raises:
        OSError: A stage could not be started (the caller reports it to the model).
    """
    deadline = time.monotonic() + timeout
    result = PipelineResult(CappedText(max_chars), CappedText(STDERR_CHARS))
    procs: list[subprocess.Popen[bytes]] = []
    err_read, err_write = os.pipe()
    previous: int | None = None
    try:
        for argv in stages:
            read, write = os.pipe()
            try:
                procs.append(
                    subprocess.Popen(  # noqa: S603 - argv checked by the policy, no shell
                        argv,
                        stdin=subprocess.DEVNULL if previous is None else previous,
                        stdout=write,
                        stderr=err_write,
                        cwd=cwd,
                        env=dict(env),
                        start_new_session=True,
                        preexec_fn=preexec,  # noqa: PLW1509 - only without prlimit
                    )
                )
            except BaseException:
                os.close(read)
                raise
            finally:
                os.close(write)
                if previous is not None:
                    os.close(previous)
            previous = read
        os.close(err_write)
        err_write = -1
        if previous is not None:
            _collect({previous: result.stdout, err_read: result.stderr}, result, deadline)
        if not (result.timed_out or result.stopped_early):
            try:
                for proc in procs:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                result.timed_out = True
    finally:
        _kill_all(procs)
        for fd in (err_read, err_write, previous):
            if fd is not None and fd >= 0:
                os.close(fd)
    result.statuses = [proc.returncode for proc in procs]
    return result


def _collect(sinks: dict[int, CappedText], result: PipelineResult, deadline: float) -> None:
    """Read the pipes until EOF, the deadline, or `MAX_DRAIN_BYTES` in all."""
    with selectors.DefaultSelector() as selector:
        for fd in sinks:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while sinks:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                result.timed_out = True
                return
            for key, _ in selector.select(remaining):
                fd = int(key.fd)
                try:
                    data = os.read(fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not data:
                    selector.unregister(fd)
                    del sinks[fd]
                    continue
                sinks[fd].feed(data)
                if result.stdout.total_bytes + result.stderr.total_bytes > MAX_DRAIN_BYTES:
                    result.stopped_early = True
                    return


def _kill_all(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Kill every stage's process group and wait until no member is left running."""
    for proc in procs:
        if proc.returncode is None:
            # The leader is not reaped yet, so its pid (the group id) cannot be reused.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        for proc in procs:
            proc.wait(timeout=_KILL_GRACE)
    gone_by = time.monotonic() + _KILL_GRACE
    while _groups_alive([p.pid for p in procs]) and time.monotonic() < gone_by:
        time.sleep(_GONE_POLL)


def _groups_alive(pgids: Sequence[int]) -> bool:
    """Whether a running process is left in any of these groups.

    Reaping a leader does not wait for the rest of its group (a killed sandbox's members
    die a moment later). A group id stays taken while any member exists, so probing it
    cannot hit an unrelated process; /proc then tells running members from zombies.
    """
    present = set()
    for pgid in pgids:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        present.add(pgid)
    if not present:
        return False
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) in present and fields[0] not in {"Z", "X"}:
                return True
    return False
