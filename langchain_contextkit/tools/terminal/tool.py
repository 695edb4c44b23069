r"""TerminalTool: a read-only, whitelisted, sandboxed terminal for progressive disclosure.

An agent explores a large workspace step by step (`ls` -> the right folder -> the right
file -> the right lines) instead of loading it into its window. Every command is treated
as written by an attacker:

- **No shell.** The line is split with POSIX quoting rules; pipelines of allowed commands
  joined by `|` are run by the tool itself, and every other shell feature is refused with
  a message saying what is allowed.
- **A whitelist with an argument policy.** Read-only inspection commands only, each with
  an allowlist of options; every path, operand or option value, must resolve (symlinks
  too) inside the root; globs are expanded inside it.
- **Confined execution.** `cd` moves the tool's own directory (re-checked on every call);
  children get an empty stdin, a minimal environment, resource limits (no file writes)
  and their own process group, killed on timeout; output is cut to `max_output_chars`.
- **Defence in depth.** Under `sandbox="bwrap"` (or `"auto"` where bubblewrap works)
  each command also runs in a bubblewrap sandbox.

```python
import tempfile
from pathlib import Path

from langchain_contextkit.tools import TerminalTool

with tempfile.TemporaryDirectory() as tmp:
    Path(tmp, "src").mkdir()
    Path(tmp, "src", "pay.py").write_text("def charge(amount):\n    return amount\n")
    terminal = TerminalTool(tmp, sandbox="none")
    print(terminal.invoke({"command": "ls"}))
    print(terminal.invoke({"command": "cd src"}))
    print(terminal.invoke({"command": "grep -n 'def ' pay.py"}))
    print(terminal.invoke({"command": "cat ../../etc/passwd"}).split(" (")[0])
# src
# Now in src.
# 1:def charge(amount):
# '../../etc/passwd' is outside the workspace
```

The tool targets Linux with the GNU tools; bubblewrap is the Debian package `bubblewrap`.
"""

# String paths throughout, as os.path.realpath returns them:
# ruff: noqa: PTH112, PTH118

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, cast

from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field, PrivateAttr

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.tools.terminal._commands import COMMANDS
from langchain_contextkit.tools.terminal._exec import (
    MAX_DRAIN_BYTES,
    SYSTEM_PATH,
    PipelineResult,
    bwrap_command,
    find_bwrap,
    find_executable,
    limit_preexec,
    limit_prefix,
    run_pipeline,
    runs,
    sandbox_works,
)
from langchain_contextkit.tools.terminal._lex import Refusal, Word, split_pipeline
from langchain_contextkit.tools.terminal._paths import Workspace
from langchain_contextkit.tools.terminal._policy import check_find, check_stage

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.callbacks import CallbackManagerForToolRun

__all__ = ["DEFAULT_READ_ONLY", "SandboxMode", "TerminalCommandError", "TerminalTool"]

# fmt: off
DEFAULT_READ_ONLY: frozenset[str] = frozenset({
    "ls", "cat", "head", "tail", "wc", "grep", "find", "tree", "stat", "file", "du", "sort",
    "uniq", "cut", "pwd", "cd", "echo",
})
# fmt: on
"""The default whitelist: read-only inspection only. No interpreters, shells, editors or
pagers; `sed` and `awk` can be added (they then run in GNU's `--sandbox` form)."""

SandboxMode = Literal["auto", "bwrap", "none"]
"""`"bwrap"`: bubblewrap plus the argument policy; `"none"`: the policy alone; `"auto"`:
bubblewrap where it works here, else the policy alone."""

_BUILTINS = frozenset({"cd", "pwd"})  # answered by the tool: they move or show its directory
# Named in refusals, so the model stops asking for them.
# fmt: off
_NEVER = frozenset({
    "sh", "bash", "dash", "zsh", "fish", "ksh", "csh", "tcsh", "busybox", "env", "xargs",
    "nohup", "timeout", "nice", "sudo", "su", "python", "python3", "perl", "ruby", "node",
    "nodejs", "php", "lua", "tclsh", "R", "julia", "vi", "vim", "nvim", "emacs", "nano",
    "ed", "ex", "less", "more", "most", "view", "tee", "dd", "cp", "mv", "rm", "ln",
    "mkdir", "rmdir", "touch", "chmod", "chown", "install", "truncate", "shred", "curl",
    "wget", "nc", "ssh", "scp", "rsync", "git", "make",
})
# fmt: on
# Variables a user may pass: locale, time zone and display settings. Anything else could
# change how a command parses its arguments (POSIXLY_CORRECT stops the GNU option
# permutation the policy relies on), what it loads (LD_*, MAGIC, AWKPATH), or leak a secret.
# fmt: off
_ENV_ALLOWED = frozenset({
    "LANG", "LANGUAGE", "TZ", "COLUMNS", "TIME_STYLE", "LS_COLORS", "GREP_COLORS",
    "TREE_CHARSET", "TREE_COLORS", "BLOCK_SIZE", "DU_BLOCK_SIZE", "LS_BLOCK_SIZE",
    "QUOTING_STYLE",
})
# fmt: on
_MIN_OUTPUT_CHARS = 200
_MAX_TIMEOUT = 600.0
_ROOT_REACHED = "Now in . (the workspace root)."
_SANDBOX_LINES = {
    "bwrap": "Sandbox: bubblewrap (workspace read-only, no network, nothing else of the "
    "host) plus the argument policy.",
    "none": "Sandbox: none (bubblewrap is not in use); the argument policy alone confines "
    "commands.",
}
_SIGNAL_NOTES = {
    "SIGXFSZ": "it tried to write a file; this terminal is read-only",
    "SIGXCPU": "it used up its CPU time",
    "SIGKILL": "it was stopped",
    "SIGSEGV": "it crashed (perhaps at its memory limit)",
}


class TerminalCommandError(ToolException):
    """A command the model should change: refused, timed out, or unable to start.

    The tool sets `handle_tool_error=True`, so LangChain returns this message to the
    model (as a `ToolMessage` with `status="error"`) instead of raising.
    """


class TerminalInput(BaseModel):
    """Arguments of [`TerminalTool`][langchain_contextkit.tools.terminal.tool.TerminalTool]."""

    command: str = Field(
        description=(
            "One command line, e.g. `ls -la src`, `grep -rn 'def charge' . | head -20` "
            "or `tail -n 40 src/pay.py`."
        )
    )


class _Plan(NamedTuple):
    """A checked command: its stages' argvs, their names, and how to run them."""

    stages: list[list[str]]
    names: list[str]
    options: dict[str, Any]


class TerminalTool(BaseTool):
    r"""A read-only terminal confined to a workspace root, for exploring it step by step.

    See [the module][langchain_contextkit.tools.terminal.tool] for the rules. Refused
    commands, timeouts and commands that cannot start come back to the model as error
    messages it can act on; the tool never raises for a bad command and never hangs.
    The description tells the model the commands, the rules and the active sandbox. The
    async entry point runs the same code in an executor thread.

    ```python
    import tempfile
    from pathlib import Path

    from langchain_contextkit.tools import TerminalTool

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "notes.txt").write_text("alpha\nbeta\ngamma\n")
        terminal = TerminalTool(tmp, sandbox="none", timeout=5)
        print(terminal.invoke({"command": "grep -c a notes.txt"}))
        print(terminal.invoke({"command": "sort -r notes.txt | head -1"}))
        print(terminal.invoke({"command": "rm notes.txt"}).split(":")[0])
    # 3
    # gamma
    # 'rm' is not available
    ```
    """

    name: str = "terminal"
    description: str = ""
    args_schema: type[BaseModel] = TerminalInput
    # Refusals and timeouts are messages for the model, never exceptions for the caller.
    handle_tool_error: bool = True
    handle_validation_error: bool = True

    root: str
    """The workspace root (its real path): no command reaches outside it."""

    allowed_commands: frozenset[str] = DEFAULT_READ_ONLY
    """The whitelist; each name must be one the tool has an argument policy for."""

    timeout: float = 10.0
    """Seconds one call may take, the whole pipeline included."""

    max_output_chars: int = 10_000
    """Characters of output returned; beyond that the middle is cut (head and tail kept)."""

    sandbox: SandboxMode = "auto"
    """The sandbox requested (`"auto"`, `"bwrap"` or `"none"`)."""

    sandbox_active: Literal["bwrap", "none"] = "none"
    """The sandbox in use: `"bwrap"`, or `"none"` (the argument policy alone)."""

    env: dict[str, str] = Field(default_factory=dict)
    """Extra variables for the commands (locale, time zone and display settings only)."""

    _workspace: Workspace = PrivateAttr()
    _cwd: str = PrivateAttr(default=".")
    _executables: dict[str, str] = PrivateAttr(default_factory=dict)
    _bwrap: str | None = PrivateAttr(default=None)
    _prlimit: str | None = PrivateAttr(default=None)

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        allowed_commands: Collection[str] = DEFAULT_READ_ONLY,
        timeout: float = 10.0,
        max_output_chars: int = 10_000,
        sandbox: SandboxMode = "auto",
        env: Mapping[str, str] | None = None,
        **kwargs: Any,  # noqa: ANN401 - BaseTool's own fields (callbacks, tags, ...)
    ) -> None:
        """Check the configuration, find the executables and pick the sandbox.

        Args:
            root: The workspace directory; every path must stay inside it.
            workspace: The same, by the word the notes use (`NoteTool(workspace=...)`);
                give one of the two.
            allowed_commands: The whitelist (default: `DEFAULT_READ_ONLY`).
            timeout: Seconds one call may take.
            max_output_chars: Characters of output returned per call.
            sandbox: `"auto"`, `"bwrap"` or `"none"`.
            env: Extra variables for the commands: locale (`LANG`, `LC_*`), `TZ` and
                display settings such as `COLUMNS` or `TIME_STYLE`.
            **kwargs: Other `BaseTool` fields (`name`, `callbacks`, `tags`, ...).

        Raises:
            ConfigError: Not on Linux, the root is not a directory (or is `/`), a command
                has no argument policy or is not installed in its safe form, a limit is
                out of range, an env variable is not allowed, or `sandbox="bwrap"` cannot
                start bubblewrap here.
        """
        if (root is None) == (workspace is None):
            msg = "pass the workspace folder once: TerminalTool(root) or workspace=..."
            raise ConfigError(msg)
        if not sys.platform.startswith("linux"):
            # Process groups, resource limits, /proc and the GNU tools.
            msg = f"TerminalTool runs on Linux only (this is {sys.platform})."
            raise ConfigError(msg)
        real_root = _check_root(cast("str | os.PathLike[str]", root or workspace))
        allowed = _check_allowed(allowed_commands)
        _check_limits(timeout, max_output_chars)
        extra_env = _check_env(env)
        bwrap, active = _pick_sandbox(sandbox)
        executables = {name: path for name in allowed if (path := executable_for(name))}
        kwargs.setdefault(
            "description",
            _describe(allowed, executables, active, timeout=timeout, max_chars=max_output_chars),
        )
        super().__init__(
            root=real_root,
            allowed_commands=allowed,
            timeout=float(timeout),
            max_output_chars=max_output_chars,
            sandbox=sandbox,
            sandbox_active=active,
            env=extra_env,
            **kwargs,
        )
        self._workspace = Workspace(real_root)
        self._executables = executables
        self._bwrap = bwrap
        self._prlimit = find_executable("prlimit")

    @property
    def cwd(self) -> str:
        """The tool's current directory, relative to the root (`.` for the root)."""
        return self._cwd

    def _run(
        self,
        command: str,
        run_manager: CallbackManagerForToolRun | None = None,  # noqa: ARG002 - BaseTool API
    ) -> str:
        """Run one command line and return what the model should see.

        Raises:
            TerminalCommandError: Refused, timed out or not startable (returned to the
                model as its message, since `handle_tool_error` is set).
        """
        try:
            plan = self._check(command)
        except Refusal as refusal:
            raise TerminalCommandError(str(refusal)) from None
        if isinstance(plan, str):
            return plan
        try:
            result = run_pipeline(plan.stages, **plan.options)
        except OSError as error:
            msg = f"The command could not be started: {error.strerror or error}."
            raise TerminalCommandError(msg) from error
        text = _report(result, plan.names, self._executables)
        if result.timed_out:
            note = (
                f"[timed out after {self.timeout:g} s; the command was stopped. Narrow it (a "
                "subdirectory, find -maxdepth, grep on fewer files).]"
            )
            raise TerminalCommandError(f"{text}\n{note}" if text else note)
        return text or "(no output)"

    def _check(self, command: str) -> _Plan | str:
        """Check `command` and build its stages; answer `cd` and `pwd` directly."""
        cwd = self._current_dir()
        stages = split_pipeline(command.strip())
        names = [self._command_name(stage[0]) for stage in stages]
        builtins = [name for name in names if name in _BUILTINS]
        if builtins and len(stages) > 1:
            msg = f"{builtins[0]} cannot be part of a pipeline; run it on its own."
            raise Refusal(msg)
        if builtins:
            return self._builtin(names[0], stages[0][1:], cwd)
        argvs = [
            self._stage_argv(name, stage[1:], cwd)
            for name, stage in zip(names, stages, strict=True)
        ]
        options: dict[str, Any] = {
            "cwd": cwd,
            "env": {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "HOME": self.root, **self.env},
            "timeout": self.timeout,
            "max_chars": self.max_output_chars,
            "preexec": None if self._prlimit else limit_preexec(self.timeout),
        }
        return _Plan(argvs, names, options)

    def _current_dir(self) -> str:
        """The current directory's real path, re-checked (it may have become a symlink)."""
        root = self._workspace.root
        if os.path.realpath(root) != root or not os.path.isdir(root):
            msg = "The workspace root is gone or was replaced; nothing can run."
            raise Refusal(msg)
        expected = os.path.normpath(os.path.join(root, self._cwd))
        if os.path.realpath(expected) == expected and os.path.isdir(expected):
            return expected
        previous, self._cwd = self._cwd, "."
        msg = (
            f"The current directory '{previous}' changed since cd (it is gone or is now a "
            "symlink); you are back at the workspace root. Run the command again."
        )
        raise Refusal(msg)

    def _command_name(self, word: Word) -> str:
        name = word.text
        if name in self.allowed_commands and word.pattern is None:
            return name
        allowed = ", ".join(sorted(self.allowed_commands))
        if "/" in name:
            msg = f"Run commands by name only (ls, not /bin/ls). Allowed: {allowed}."
        elif name in _NEVER or name in COMMANDS:
            msg = (
                f"'{name}' is not available: no interpreters, shells, editors or pagers, "
                f"and nothing that writes. Allowed: {allowed}."
            )
        else:
            msg = f"'{name}' is not an allowed command. Allowed: {allowed}."
        raise Refusal(msg)

    def _stage_argv(self, name: str, words: Sequence[Word], cwd: str) -> list[str]:
        executable = self._executables.get(name)
        if executable is None:
            msg = f"{name} is not installed on this machine."
            raise Refusal(msg)
        if name == "find":
            args = check_find(words, self._workspace, cwd)
        else:
            args = check_stage(name, COMMANDS[name], words, self._workspace, cwd)
        argv = [executable, *args]
        if self._bwrap is not None:
            argv = [*bwrap_command(self._bwrap, self._workspace.root, cwd), *argv]
        if self._prlimit is not None:
            argv = [*limit_prefix(self._prlimit, self.timeout), *argv]
        return argv

    def _builtin(self, name: str, words: Sequence[Word], cwd: str) -> str:
        if name == "pwd":
            if words:
                msg = "pwd takes no arguments."
                raise Refusal(msg)
            return self._cwd
        if not words:
            self._cwd = "."
            return _ROOT_REACHED
        if len(words) > 1 or words[0].text.startswith("-"):
            msg = "cd takes one directory (no options); plain cd goes back to the root."
            raise Refusal(msg)
        targets = self._workspace.expand(words[0], cwd)
        if len(targets) != 1:
            msg = f"'{words[0].text}' matches {len(targets)} directories; name one."
            raise Refusal(msg)
        resolved = self._workspace.resolve(targets[0], cwd)
        if not os.path.isdir(resolved):
            msg = f"'{words[0].text}' is not a directory."
            raise Refusal(msg)
        self._cwd = self._workspace.relative(resolved)
        return _ROOT_REACHED if self._cwd == "." else f"Now in {self._cwd}."


# -- configuration (checked in __init__, so a bad one fails before the first call) -------


def _check_root(root: str | os.PathLike[str]) -> str:
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


def _check_allowed(commands: Collection[str]) -> frozenset[str]:
    if isinstance(commands, str) or not isinstance(commands, Collection):
        msg = "allowed_commands must be a collection of command names, not a string."
        raise ConfigError(msg)
    allowed = frozenset(commands)
    unknown = sorted(allowed - COMMANDS.keys() - _BUILTINS)
    if unknown:
        msg = (
            f"No argument policy for {', '.join(unknown)}: the terminal only runs commands "
            f"it knows how to confine ({', '.join(sorted({*COMMANDS, *_BUILTINS}))}). "
            "Shells, interpreters, editors and pagers are never allowed."
        )
        raise ConfigError(msg)
    for name in ("sed", "awk"):  # offered only as GNU `sed --sandbox` and `gawk --sandbox`
        if name in allowed:
            executable = executable_for(name)
            probe = ["-n", "q"] if name == "sed" else ["BEGIN {}"]
            if executable is None or not runs([executable, "--sandbox", *probe]):
                binary = COMMANDS[name].binary or name
                msg = (
                    f"{name} is only offered in its sandboxed form ({binary} --sandbox, GNU), "
                    "which is not installed here."
                )
                raise ConfigError(msg)
    return allowed


def executable_for(name: str) -> str | None:
    """The executable a whitelisted command runs as (`None` for `cd`, `pwd`, or missing)."""
    return None if name in _BUILTINS else find_executable(COMMANDS[name].binary or name)


def _check_limits(timeout: float, max_output_chars: int) -> None:
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


def _check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    given: object = env  # checked at run time too: callers are not always type-checked
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        msg = f"env must be a mapping of names to values, not {type(given).__name__}."
        raise ConfigError(msg)
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
    return dict(given)


def _pick_sandbox(sandbox: str) -> tuple[str | None, Literal["bwrap", "none"]]:
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


def _describe(
    allowed: frozenset[str],
    executables: Mapping[str, str],
    sandbox: str,
    *,
    timeout: float,
    max_chars: int,
) -> str:
    """The tool description: how to explore, the commands, the rules, the sandbox in use."""
    names = sorted(allowed)
    missing = sorted(n for n in allowed if n not in _BUILTINS and n not in executables)
    commands = f"Commands: {', '.join(names)}."
    if missing:
        commands += f" Not installed here: {', '.join(missing)}."
    lines = [
        (
            "Run one read-only command in the workspace and get its output. Explore step by "
            "step instead of reading everything: look around (ls, tree -L 2, find -name), "
            "search (grep -rn), then read only the lines you need (head -n, tail -n, grep -n "
            "-A/-B, wc -l)."
        ),
        commands,
        (
            "Pipes between them work (grep -rn TODO . | head -20). There is no shell: ;, &&, "
            "||, <, >, $VAR, $(...), backticks, newlines and here-docs are refused. Quote "
            "patterns with single quotes. Globs (*, ?, [...]) are expanded inside the "
            "workspace."
        ),
        (
            "Every path must stay inside the workspace. cd DIR moves you for later calls; pwd "
            "shows where you are, relative to the workspace root (.)."
        ),
        (
            "Options that write files, run programs or follow symlinks out are refused (find "
            "-exec/-delete, sort -o, ...)."
        ),
        *(f"{COMMANDS[n].note}." for n in names if n in COMMANDS and COMMANDS[n].note),
        (
            f"Each call may take {timeout:g} s; output beyond {max_chars:,} characters is cut "
            "in the middle (start and end kept)."
        ),
        _SANDBOX_LINES[sandbox],
    ]
    return "\n".join(lines)


# -- what the model reads after a command ran --------------------------------------------


def _report(result: PipelineResult, names: Sequence[str], executables: Mapping[str, str]) -> str:
    """The output (head, cut note, tail), then standard error, then failed stages' statuses."""
    head, tail, cut = result.stdout.result()
    parts = [head]
    if cut:
        note = (
            f"\n[... {cut:,} of {result.stdout.total_chars:,} characters cut here; the start "
            "and the end are shown. Narrow the command (grep -n, head -n, tail -n, wc -l) to "
            "see the rest ...]\n"
        )
        parts += [note, tail]
    if result.stopped_early:
        parts.append(
            f"\n[output passed {MAX_DRAIN_BYTES >> 20} MiB; the command was stopped there, "
            "so the end shown is not the end of the output]"
        )
    # NUL bytes (binary files) become a visible symbol: many stores and provider APIs
    # reject NUL inside text (a Postgres checkpointer cannot save such a message).
    text = "".join(parts).rstrip("\n").replace("\0", "\u2400")
    head, tail, cut = result.stderr.result()
    errors = head + (f"\n[... {cut:,} characters cut ...]\n{tail}" if cut else "")
    # Commands name themselves by argv[0], the absolute path here: show the plain name.
    for name in set(names):
        errors = re.sub(rf"(?m)^{re.escape(executables[name])}:", f"{name}:", errors)
    errors = errors.rstrip("\n")
    notes = [f"[stderr]\n{errors}"] if errors else []
    if not (result.timed_out or result.stopped_early):
        last = len(result.statuses) - 1
        for i, (name, status) in enumerate(zip(names, result.statuses, strict=True)):
            if not status:
                continue
            if status < 0:
                number = signal.Signals(-status)
                if i < last and number.name == "SIGPIPE":
                    continue  # an earlier stage stopped by `| head`: normal
                why = _SIGNAL_NOTES.get(number.name, "it was killed")
                notes.append(f"[{name} was killed by {number.name}: {why}]")
            elif name == "grep" and status == 1:
                notes.append("[grep: no lines matched (exit status 1)]")
            else:
                notes.append(f"[{name}: exit status {status}]")
    return "\n".join([text, *notes] if text else notes)
