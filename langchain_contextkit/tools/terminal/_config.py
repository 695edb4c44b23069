"""TerminalTool's configuration: checked arguments, the sandbox choice, the description.

Every check runs in `TerminalTool.__init__`, so a bad configuration fails at
construction, not at the model's first call.
"""

# String paths throughout, as os.path.realpath returns them:
# ruff: noqa: PTH112

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Collection, Mapping
from typing import Literal

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.tools.terminal._commands import COMMANDS
from langchain_contextkit.tools.terminal._exec import (
    SYSTEM_PATH,
    find_bwrap,
    find_executable,
    sandbox_works,
)

__all__ = [
    "BUILTINS",
    "check_allowed",
    "check_env",
    "check_limits",
    "check_platform",
    "check_root",
    "child_env",
    "describe",
    "executable_for",
    "pick_sandbox",
]

BUILTINS = frozenset({"cd", "pwd"})
"""Commands the tool answers itself: they change or report its own directory."""

# Variables a user may pass to the commands: locale, time zone and display settings.
# Anything else could change how a command parses its arguments (POSIXLY_CORRECT stops
# GNU option permutation, which the policy relies on), what it loads (LD_*, MAGIC,
# AWKPATH), or hand a secret to the children.
_ENV_ALLOWED = frozenset(
    {
        "LANG",
        "LANGUAGE",
        "TZ",
        "COLUMNS",
        "TIME_STYLE",
        "LS_COLORS",
        "GREP_COLORS",
        "TREE_CHARSET",
        "TREE_COLORS",
        "BLOCK_SIZE",
        "DU_BLOCK_SIZE",
        "LS_BLOCK_SIZE",
        "QUOTING_STYLE",
    }
)
_MIN_OUTPUT_CHARS = 200
_MAX_TIMEOUT = 600.0


def child_env(root: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The children's whole environment: nothing inherited from this process."""
    return {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "HOME": root, **extra}


def check_platform() -> None:
    """The tool needs Linux: process groups, resource limits, /proc, the GNU tools."""
    if not sys.platform.startswith("linux"):
        msg = f"TerminalTool runs on Linux only (this is {sys.platform})."
        raise ConfigError(msg)


def check_root(root: str | os.PathLike[str]) -> str:
    try:
        real = os.path.realpath(os.fspath(root))
    except TypeError:
        msg = f"root must be a path, not {type(root).__name__}."
        raise ConfigError(msg) from None
    if not os.path.isdir(real):
        msg = f"root {os.fspath(root)!r} is not a directory."
        raise ConfigError(msg)
    if real == os.path.sep:
        msg = "root '/' confines nothing; give the workspace directory."
        raise ConfigError(msg)
    return real


def check_allowed(commands: Collection[str]) -> frozenset[str]:
    if isinstance(commands, str) or not isinstance(commands, Collection):
        msg = "allowed_commands must be a collection of command names, not a string."
        raise ConfigError(msg)
    allowed = frozenset(commands)
    unknown = sorted(allowed - COMMANDS.keys() - BUILTINS)
    if unknown:
        msg = (
            f"No argument policy for {', '.join(unknown)}: the terminal only runs commands "
            f"it knows how to confine ({', '.join(sorted({*COMMANDS, *BUILTINS}))}). "
            "Shells, interpreters, editors and pagers are never allowed."
        )
        raise ConfigError(msg)
    for name in ("sed", "awk"):
        if name in allowed:
            _check_sandboxed_form(name)
    return allowed


def _check_sandboxed_form(name: str) -> None:
    """Offer sed and awk only as GNU `sed --sandbox` and `gawk --sandbox`."""
    executable = executable_for(name)
    probe = ["-n", "q"] if name == "sed" else ["BEGIN {}"]
    if executable is None or not _runs(executable, "--sandbox", *probe):
        binary = COMMANDS[name].binary or name
        msg = (
            f"{name} is only offered in its sandboxed form ({binary} --sandbox, GNU), "
            "which is not installed here."
        )
        raise ConfigError(msg)


def _runs(executable: str, *args: str) -> bool:
    try:
        done = subprocess.run(  # noqa: S603 - fixed arguments
            [executable, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
            env={"PATH": SYSTEM_PATH},
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def executable_for(name: str) -> str | None:
    if name in BUILTINS:
        return None
    return find_executable(COMMANDS[name].binary or name)


def check_limits(timeout: float, max_output_chars: int) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        msg = f"timeout must be a number of seconds, not {type(timeout).__name__}."
        raise ConfigError(msg)
    if not 0 < timeout <= _MAX_TIMEOUT:
        msg = f"timeout must be in (0, {_MAX_TIMEOUT:g}] seconds, got {timeout}."
        raise ConfigError(msg)
    if isinstance(max_output_chars, bool) or not isinstance(max_output_chars, int):
        msg = f"max_output_chars must be an int, not {type(max_output_chars).__name__}."
        raise ConfigError(msg)
    if max_output_chars < _MIN_OUTPUT_CHARS:
        msg = f"max_output_chars must be at least {_MIN_OUTPUT_CHARS}, got {max_output_chars}."
        raise ConfigError(msg)


def check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    given: object = env  # checked at run time too: callers are not always type-checked
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        msg = f"env must be a mapping of names to values, not {type(given).__name__}."
        raise ConfigError(msg)
    out: dict[str, str] = {}
    for key, value in given.items():
        if not isinstance(key, str) or not isinstance(value, str):
            msg = "env names and values must be strings."
            raise ConfigError(msg)
        if key not in _ENV_ALLOWED and not key.startswith("LC_"):
            msg = (
                f"env variable {key!r} is not passed to commands: only locale, time zone "
                f"and display settings are ({', '.join(sorted(_ENV_ALLOWED))}, LC_*)."
            )
            raise ConfigError(msg)
        if "\0" in value:
            msg = f"env variable {key!r} contains a NUL character."
            raise ConfigError(msg)
        out[key] = value
    return out


def pick_sandbox(sandbox: str) -> tuple[str | None, Literal["bwrap", "none"]]:
    if sandbox not in {"auto", "bwrap", "none"}:
        msg = f"sandbox must be 'auto', 'bwrap' or 'none', got {sandbox!r}."
        raise ConfigError(msg)
    if sandbox == "none":
        return None, "none"
    bwrap = find_bwrap()
    if bwrap is not None and sandbox_works(bwrap):
        return bwrap, "bwrap"
    if sandbox == "auto":
        return None, "none"
    why = "is not installed" if bwrap is None else "cannot create its namespaces here"
    msg = f"sandbox='bwrap' but bubblewrap {why}; use sandbox='auto' or 'none'."
    raise ConfigError(msg)


_SANDBOX_LINES = {
    "bwrap": "Sandbox: bubblewrap (workspace read-only, no network, nothing else of the "
    "host) plus the argument policy.",
    "none": "Sandbox: none (bubblewrap is not in use); the argument policy alone confines "
    "commands.",
}


def describe(
    allowed: frozenset[str],
    executables: Mapping[str, str],
    sandbox: str,
    *,
    timeout: float,
    max_chars: int,
) -> str:
    """The tool description: how to explore, the commands, the rules, the sandbox in use."""
    names = sorted(allowed)
    missing = sorted(n for n in allowed if n not in BUILTINS and n not in executables)
    commands = f"Commands: {', '.join(names)}."
    if missing:
        commands += f" Not installed here: {', '.join(missing)}."
    lines = [
        (
            "Run one read-only command in the workspace and get its output. Explore step "
            "by step instead of reading everything: look around (ls, tree -L 2, find "
            "-name), search (grep -rn), then read only the lines you need (head -n, "
            "tail -n, grep -n -A/-B, wc -l)."
        ),
        commands,
        (
            "Pipes between them work (grep -rn TODO . | head -20). There is no shell: ;, "
            "&&, ||, <, >, $VAR, $(...), backticks, newlines and here-docs are refused. "
            "Quote patterns with single quotes. Globs (*, ?, [...]) are expanded inside "
            "the workspace."
        ),
        (
            "Every path must stay inside the workspace. cd DIR moves you for later calls; "
            "pwd shows where you are, relative to the workspace root (.)."
        ),
        (
            "Options that write files, run programs or follow symlinks out are refused "
            "(find -exec/-delete, sort -o, ...)."
        ),
        *(f"{COMMANDS[n].note}." for n in names if n in COMMANDS and COMMANDS[n].note),
        (
            f"Each call may take {timeout:g} s; output beyond {max_chars:,} characters is "
            "cut in the middle (start and end kept)."
        ),
        _SANDBOX_LINES[sandbox],
    ]
    return "\n".join(lines)
