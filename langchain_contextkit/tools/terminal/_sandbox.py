"""The bubblewrap sandbox of a terminal command: finding the executable and its argv.

A sandboxed stage runs under `bwrap` with the workspace and the system directories
mounted read-only, no network, no capabilities and a private /tmp; `sandbox_works` tells
whether this machine can start one at all (user namespaces may be disabled).
"""

# String paths throughout, as os.path returns them:
# ruff: noqa: PTH112, PTH114, PTH115

from __future__ import annotations

import functools
import os
import shutil
import subprocess

__all__ = ["SYSTEM_PATH", "bwrap_command", "find_bwrap", "find_executable", "sandbox_works"]

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""Where commands are looked up, and the children's PATH (never the parent's PATH)."""

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
