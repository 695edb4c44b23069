"""Run a checked pipeline: one process per stage, a deadline, and nothing left running.

Each stage is its own process (`shell=False`), the first reading an empty standard
input (never the agent's own: for a stdio tool server that is the protocol channel),
each the previous one's output. Every stage starts a new session, so its whole process
group can be killed; on timeout and at the end of every call the groups still alive are
killed, so no process outlives the call. Output is captured as `CappedText` (see
`_output`); the sandbox argv and the resource limits come from `_sandbox` and `_limits`,
and are re-exported here with the runner.
"""

# /proc is scanned with plain os calls on its fixed kernel paths:
# ruff: noqa: PTH123, PTH208

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_contextkit.tools.terminal._limits import ADDRESS_SPACE_BYTES, SPARE_PROCESSES, Limits
from langchain_contextkit.tools.terminal._output import (
    MAX_DRAIN_BYTES,
    READ_CHUNK,
    STDERR_CHARS,
    CappedText,
    PipelineResult,
)
from langchain_contextkit.tools.terminal._sandbox import (
    SYSTEM_PATH,
    bwrap_command,
    find_bwrap,
    find_executable,
    sandbox_works,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "ADDRESS_SPACE_BYTES",
    "MAX_DRAIN_BYTES",
    "SPARE_PROCESSES",
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

_KILL_GRACE = 2.0  # seconds to reap a killed group; SIGKILL cannot be ignored


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
                    data = os.read(fd, READ_CHUNK)
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
            data = os.read(fd, READ_CHUNK)
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
