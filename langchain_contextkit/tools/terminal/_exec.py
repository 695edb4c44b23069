"""Run a checked pipeline: processes, limits, the bubblewrap sandbox and capped output.

Each stage is its own process (`shell=False`), the first reading an empty standard
input (never the agent's own: for a stdio tool server that is the protocol channel),
each the previous one's output. Every stage starts a new session, so its whole process
group can be killed; on timeout and at the end of every call the groups still alive are
killed, so no process outlives the call.

Resource limits (CPU seconds, address space, `RLIMIT_FSIZE` 0 so nothing can write a
file, core dumps off, a cap on new processes) are set before the command runs by
util-linux `prlimit`, which sets them on itself and then execs the command. That keeps
CPython's fast `vfork` spawn (a `preexec_fn` forces a full `fork`, several milliseconds
in a large agent process); `preexec_fn` is the fallback where `prlimit` is missing.

Output is read as it comes and kept as a head and a tail (see `CappedText`); a command
that keeps writing is stopped after `MAX_DRAIN_BYTES`, so `cat` of a 2 GB file returns
promptly.

Process setup, pipes, limits and output capture are one call path, kept together.
"""

# String paths throughout, as os.path.realpath returns them:
# ruff: noqa: PTH112, PTH114, PTH115, PTH123, PTH208

from __future__ import annotations

import asyncio
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

# POSIX only. The package must still import elsewhere (the tool then refuses to start,
# see TerminalTool's platform check), so `resource` is optional here.
if sys.platform != "win32":
    import resource

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "MAX_DRAIN_BYTES",
    "STDERR_CHARS",
    "SYSTEM_PATH",
    "CappedText",
    "Limits",
    "PipelineResult",
    "arun_pipeline",
    "bwrap_command",
    "find_bwrap",
    "find_executable",
    "run_pipeline",
    "sandbox_works",
]

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""Where commands are looked up, and the children's PATH (never the parent's PATH)."""

MAX_DRAIN_BYTES = 64 << 20
"""Output after which a command is stopped (what was kept so far is still shown)."""

STDERR_CHARS = 2_000
"""Characters of standard error kept (head and tail), on top of `max_output_chars`."""

ADDRESS_SPACE_BYTES = 1 << 30
"""`RLIMIT_AS` of every command: enough for sort and grep on large files."""

SPARE_PROCESSES = 64
"""How many more tasks than exist now a command's user may start (`RLIMIT_NPROC`)."""

_READ_CHUNK = 1 << 16
_KILL_GRACE = 2.0  # seconds to reap a killed group; SIGKILL cannot be ignored

# Mounted read-only in the sandbox when present: what dynamic linking, user names in
# `ls -l`, time zones and `file`'s magic need. No secrets (no shadow, no keys).
_SANDBOX_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/magic",
    "/etc/magic.mime",
)
_SANDBOX_TOP = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_NOBODY = "65534"


def find_executable(name: str) -> str | None:
    """The absolute path of `name` on the system PATH (not the parent process's PATH)."""
    return shutil.which(name, path=SYSTEM_PATH)


def find_bwrap() -> str | None:
    """The bubblewrap executable, if installed."""
    return find_executable("bwrap")


def bwrap_command(bwrap: str, root: str | None, cwd: str) -> list[str]:
    """The bubblewrap prefix for one stage: `root` read-only, system directories read-only.

    New user (mapped to nobody), PID, network, IPC, UTS and cgroup namespaces, no
    capabilities, a private /tmp, a minimal /dev and /proc, killed with its parent. No
    `--new-session`: the stage already runs in a session of its own without a terminal
    (so no terminal injection), and staying in that session's process group lets the
    tool kill the sandboxed processes with the group. The root is mounted at its own
    path so paths in the output match the ones the model uses.

    Args:
        bwrap: The bubblewrap executable.
        root: The workspace root (a real path); `None` mounts none (the probe).
        cwd: The stage's working directory (a real path inside the root).

    Returns:
        The argv up to and including the `--` that precedes the command.
    """
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid",
        _NOBODY,
        "--gid",
        _NOBODY,
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        # The command is the namespace's pid 1 (no reaper process in between): bwrap
        # then reaps it itself, so nothing of the sandbox outlives bwrap's exit.
        "--as-pid-1",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in _SANDBOX_TOP:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for path in _SANDBOX_ETC:
        argv += ["--ro-bind-try", path, path]
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]  # noqa: S108 - a private tmpfs
    if root is not None:
        argv += ["--ro-bind", root, root]
    argv += ["--chdir", cwd, "--"]
    return argv


@functools.cache
def sandbox_works(bwrap: str) -> bool:
    """Tell whether bubblewrap can start a sandbox here; tried once per executable.

    It fails where user namespaces are disabled (some containers, hardened kernels)
    and bubblewrap is not setuid.
    """
    true = find_executable("true")
    if true is None:
        return False
    probe = [*bwrap_command(bwrap, None, "/"), true]
    try:
        completed = subprocess.run(  # noqa: S603 - a fixed argv
            probe,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
            env={"PATH": SYSTEM_PATH},
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return completed.returncode == 0


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
    elapsed: float = 0.0


@dataclass(slots=True)
class _Launch:
    """What every stage is started with."""

    cwd: str
    env: Mapping[str, str]
    preexec: Callable[[], None] | None


def _kill_group(pid: int) -> None:
    # The leader is not reaped yet (the caller checks), so its pid, and with it the
    # group id, cannot have been reused by an unrelated process.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _groups_alive(pgids: Sequence[int]) -> bool:
    """Whether a process that is still running is left in any of these groups.

    Reaping a stage's leader does not wait for the rest of its group: when a sandbox is
    killed, the processes inside it die with it, but a moment later. A group id stays
    taken while any member exists (so probing it cannot hit an unrelated process); the
    slower /proc scan then tells running members from zombies waiting for init.
    """
    present = []
    for pgid in pgids:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        present.append(pgid)
    return bool(present) and _running_members(set(present))


def _running_members(pgids: set[int]) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp in pgids and state not in {"Z", "X"}:
            return True
    return False


_GONE_POLL = 0.002  # seconds between probes for a killed group's last members


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
    start = time.monotonic()
    deadline = start + timeout
    result = PipelineResult(CappedText(max_chars), CappedText(STDERR_CHARS))
    launch = _Launch(cwd, env, preexec)
    procs: list[subprocess.Popen[bytes]] = []
    err_read, err_write = os.pipe()
    out_read: int | None = None
    exits: list[int] = []
    try:
        out_read = _start_stages(stages, launch, err_write, procs)
        os.close(err_write)
        err_write = -1
        exits = _exit_fds(procs)
        _collect(out_read, err_read, exits, result, deadline)
        if not (result.timed_out or result.stopped_early):
            try:
                for proc in procs:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                result.timed_out = True
    finally:
        for proc in procs:
            if proc.returncode is None:
                _kill_group(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            for proc in procs:
                proc.wait(timeout=_KILL_GRACE)
        gone_by = time.monotonic() + _KILL_GRACE
        while _groups_alive([p.pid for p in procs]) and time.monotonic() < gone_by:
            time.sleep(_GONE_POLL)
        for fd in (err_read, err_write, out_read, *exits):
            if fd is not None and fd >= 0:
                os.close(fd)
    result.statuses = [proc.returncode for proc in procs]
    result.elapsed = time.monotonic() - start
    return result


def _exit_fds(procs: Sequence[subprocess.Popen[bytes]]) -> list[int]:
    """A pidfd per stage (readable once it exits), so the selector also waits for exits.

    Without them, `Popen.wait(timeout)` polls with growing sleeps, a millisecond or more
    per call for a process that closed its output a moment before exiting. Empty where
    pidfds are missing (Linux before 5.3); the waits then fall back to polling.
    """
    fds: list[int] = []
    try:
        fds.extend(os.pidfd_open(proc.pid) for proc in procs)
    except (AttributeError, OSError):
        for fd in fds:
            os.close(fd)
        return []
    return fds


def _start_stages(
    stages: Sequence[Sequence[str]],
    launch: _Launch,
    err_write: int,
    procs: list[subprocess.Popen[bytes]],
) -> int:
    """Start every stage, stdout wired to the next stdin; return the last stage's stdout.

    Started processes are appended to `procs` at once, so the caller kills them even
    when a later stage fails to start.
    """
    previous: int | None = None
    for argv in stages:
        read, write = os.pipe()
        try:
            proc = subprocess.Popen(  # noqa: S603 - argv checked by the policy, no shell
                argv,
                stdin=subprocess.DEVNULL if previous is None else previous,
                stdout=write,
                stderr=err_write,
                cwd=launch.cwd,
                env=dict(launch.env),
                start_new_session=True,
                preexec_fn=launch.preexec,  # noqa: PLW1509 - only without prlimit; sets rlimits
            )
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
            if previous is not None:
                os.close(previous)
        procs.append(proc)
        previous = read
    if previous is None:  # pragma: no cover - the policy never sends an empty pipeline
        msg = "empty pipeline"
        raise ValueError(msg)
    return previous


def _collect(
    out_read: int, err_read: int, exits: Sequence[int], result: PipelineResult, deadline: float
) -> None:
    """Read both pipes until EOF and every stage's exit, the deadline, or `MAX_DRAIN_BYTES`."""
    sinks = {out_read: result.stdout, err_read: result.stderr}
    running = set(exits)
    with selectors.DefaultSelector() as selector:
        for fd in sinks:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        for fd in running:
            selector.register(fd, selectors.EVENT_READ)
        while sinks or running:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                result.timed_out = True
                return
            for key, _ in selector.select(remaining):
                fd = int(key.fd)
                if fd in running:  # a stage exited
                    selector.unregister(fd)
                    running.discard(fd)
                    continue
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


async def arun_pipeline(
    stages: Sequence[Sequence[str]],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    max_chars: int,
    preexec: Callable[[], None] | None = None,
) -> PipelineResult:
    """Async twin of `run_pipeline`: asyncio subprocesses, pipes read by the event loop.

    Raises:
        OSError: A stage could not be started.
    """
    loop = asyncio.get_running_loop()
    start = time.monotonic()
    deadline = start + timeout
    result = PipelineResult(CappedText(max_chars), CappedText(STDERR_CHARS))
    launch = _Launch(cwd, env, preexec)
    procs: list[asyncio.subprocess.Process] = []
    err_read, err_write = os.pipe()
    out_read: int | None = None
    try:
        out_read = await _astart_stages(stages, launch, err_write, procs)
        os.close(err_write)
        err_write = -1
        await _acollect(loop, out_read, err_read, result, deadline)
        if not (result.timed_out or result.stopped_early):
            waits = asyncio.gather(*(proc.wait() for proc in procs))
            try:
                await asyncio.wait_for(waits, max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                result.timed_out = True
    finally:
        for proc in procs:
            if proc.returncode is None:
                _kill_group(proc.pid)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(proc.wait() for proc in procs)), _KILL_GRACE)
        gone_by = time.monotonic() + _KILL_GRACE
        # Polling the kernel: there is no event to wait on.
        while _groups_alive([p.pid for p in procs]) and time.monotonic() < gone_by:  # noqa: ASYNC110
            await asyncio.sleep(_GONE_POLL)
        for fd in (err_read, err_write, out_read):
            if fd is not None and fd >= 0:
                os.close(fd)
    result.statuses = [proc.returncode for proc in procs]
    result.elapsed = time.monotonic() - start
    return result


async def _astart_stages(
    stages: Sequence[Sequence[str]],
    launch: _Launch,
    err_write: int,
    procs: list[asyncio.subprocess.Process],
) -> int:
    """`_start_stages` with asyncio subprocesses; started ones are appended to `procs`."""
    previous: int | None = None
    for argv in stages:
        read, write = os.pipe()
        try:
            procs.append(
                await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=subprocess.DEVNULL if previous is None else previous,
                    stdout=write,
                    stderr=err_write,
                    cwd=launch.cwd,
                    env=dict(launch.env),
                    start_new_session=True,
                    preexec_fn=launch.preexec,
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
    if previous is None:  # pragma: no cover - the policy never sends an empty pipeline
        msg = "empty pipeline"
        raise ValueError(msg)
    return previous


async def _acollect(
    loop: asyncio.AbstractEventLoop,
    out_read: int,
    err_read: int,
    result: PipelineResult,
    deadline: float,
) -> None:
    """`_collect` on the event loop: a reader callback per pipe, one future for all."""
    sinks = {out_read: result.stdout, err_read: result.stderr}
    done: asyncio.Future[None] = loop.create_future()

    def readable(fd: int) -> None:
        try:
            data = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return
        if data:
            sinks[fd].feed(data)
            if result.stdout.total_bytes + result.stderr.total_bytes > MAX_DRAIN_BYTES:
                result.stopped_early = True
                if not done.done():
                    done.set_result(None)
            return
        loop.remove_reader(fd)
        del sinks[fd]
        if not sinks and not done.done():
            done.set_result(None)

    for fd in list(sinks):
        os.set_blocking(fd, False)
        loop.add_reader(fd, readable, fd)
    try:
        await asyncio.wait_for(done, max(0.0, deadline - time.monotonic()))
    except asyncio.TimeoutError:
        result.timed_out = True
    finally:
        for fd in list(sinks):
            loop.remove_reader(fd)
