r"""TerminalTool: a read-only, whitelisted, sandboxed terminal for progressive disclosure.

An agent explores a large workspace step by step (`ls` -> the right folder -> the right
file -> the right lines) instead of loading it into its window. The tool makes that
safe, treating every command as written by an attacker:

- **No shell.** The line is split with POSIX quoting rules; pipelines of allowed
  commands joined by `|` are run by the tool itself, and everything else a shell would
  do (`;`, `&&`, redirections, `$VAR`, substitutions, here-docs, newlines) is refused
  with a message saying what is allowed.
- **A whitelist with an argument policy.** Read-only inspection commands only, each
  with its own allowlist of options; options that write, run programs or follow
  symlinks out are refused; every path, operand or option value, is resolved
  (symlinks too) and must stay inside the root; globs are expanded inside the root.
- **Confined execution.** `cd` moves the tool's own directory (re-checked on every
  call), children get an empty stdin, a minimal environment, resource limits (no file
  writes at all) and their own process group, killed on timeout; output is read
  incrementally and cut to `max_output_chars`, head and tail kept.
- **Defence in depth.** Under `sandbox="bwrap"` (or `"auto"` where bubblewrap works)
  each command also runs in a bubblewrap sandbox: the root and system directories
  read-only, nothing else of the host, no network, a private /tmp.

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

The tool targets Linux with the GNU tools (coreutils, findutils, grep); bubblewrap is
the Debian package `bubblewrap`.

One tool class and its run loop; the lexer, policy and executor are in this package's
other modules.
"""

# String paths throughout, as os.path.realpath returns them:
# ruff: noqa: PTH112, PTH118

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal, cast

from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field, PrivateAttr

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.tools.terminal._commands import COMMANDS
from langchain_contextkit.tools.terminal._config import (
    BUILTINS,
    check_allowed,
    check_env,
    check_limits,
    check_platform,
    check_root,
    child_env,
    describe,
    executable_for,
    pick_sandbox,
)
from langchain_contextkit.tools.terminal._exec import (
    Limits,
    PipelineResult,
    arun_pipeline,
    bwrap_command,
    find_executable,
    run_pipeline,
)
from langchain_contextkit.tools.terminal._lex import Refusal, Word, split_pipeline
from langchain_contextkit.tools.terminal._paths import Workspace
from langchain_contextkit.tools.terminal._policy import check_find, check_stage
from langchain_contextkit.tools.terminal._report import report

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from langchain_core.callbacks import (
        AsyncCallbackManagerForToolRun,
        CallbackManagerForToolRun,
    )

__all__ = ["DEFAULT_READ_ONLY", "SandboxMode", "TerminalCommandError", "TerminalTool"]

DEFAULT_READ_ONLY: frozenset[str] = frozenset(
    {
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "find",
        "tree",
        "stat",
        "file",
        "du",
        "sort",
        "uniq",
        "cut",
        "pwd",
        "cd",
        "echo",
    }
)
"""The default whitelist: read-only inspection only. No interpreters, shells, editors or
pagers; `sed` and `awk` can be added (they then run in GNU's `--sandbox` form)."""

SandboxMode = Literal["auto", "bwrap", "none"]
"""`"bwrap"`: bubblewrap plus the argument policy; `"none"`: the policy alone; `"auto"`:
bubblewrap where it works here, else the policy alone."""

# Named in refusals, so the model stops asking for them.
_NEVER = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "zsh",
        "fish",
        "ksh",
        "csh",
        "tcsh",
        "busybox",
        "env",
        "xargs",
        "nohup",
        "timeout",
        "nice",
        "sudo",
        "su",
        "python",
        "python3",
        "perl",
        "ruby",
        "node",
        "nodejs",
        "php",
        "lua",
        "tclsh",
        "R",
        "julia",
        "vi",
        "vim",
        "nvim",
        "emacs",
        "nano",
        "ed",
        "ex",
        "less",
        "more",
        "most",
        "view",
        "tee",
        "dd",
        "cp",
        "mv",
        "rm",
        "ln",
        "mkdir",
        "rmdir",
        "touch",
        "chmod",
        "chown",
        "install",
        "truncate",
        "shred",
        "curl",
        "wget",
        "nc",
        "ssh",
        "scp",
        "rsync",
        "git",
        "make",
    }
)


_ROOT_REACHED = "Now in . (the workspace root)."


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


class TerminalTool(BaseTool):
    r"""A read-only terminal confined to a workspace root, for exploring it step by step.

    See [the module][langchain_contextkit.tools.terminal.tool] for the rules. Refused
    commands, timeouts and commands that cannot start come back to the model as error
    messages it can act on; the tool never raises for a bad command and never hangs.
    The description tells the model the commands, the rules and which sandbox is active
    (`sandbox_active`).

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
            ConfigError: Not on Linux, the root is not a directory (or is `/`), a command has no
                argument policy or is not installed in its safe form, a limit is out of
                range, an env variable is not allowed, or `sandbox="bwrap"` cannot
                start bubblewrap here.
        """
        if (root is None) == (workspace is None):
            msg = "pass the workspace folder once: TerminalTool(root) or workspace=..."
            raise ConfigError(msg)
        check_platform()
        real_root = check_root(cast("str | os.PathLike[str]", root or workspace))
        allowed = check_allowed(allowed_commands)
        check_limits(timeout, max_output_chars)
        extra_env = check_env(env)
        bwrap, active = pick_sandbox(sandbox)
        executables = {name: path for name in allowed if (path := executable_for(name))}
        kwargs.setdefault(
            "description",
            describe(allowed, executables, active, timeout=timeout, max_chars=max_output_chars),
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

    # The two entry points differ only in how the pipeline is awaited.

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
        plan = self._plan(command)
        if isinstance(plan, str):
            return plan
        try:
            result = run_pipeline(plan.stages, **plan.options)
        except OSError as error:
            raise TerminalCommandError(_start_failure(error)) from error
        return self._report(plan, result)

    async def _arun(
        self,
        command: str,
        run_manager: AsyncCallbackManagerForToolRun | None = None,  # noqa: ARG002
    ) -> str:
        """Async twin of `_run`: the same checks, asyncio subprocesses.

        Raises:
            TerminalCommandError: Refused, timed out or not startable.
        """
        plan = self._plan(command)
        if isinstance(plan, str):
            return plan
        try:
            result = await arun_pipeline(plan.stages, **plan.options)
        except OSError as error:
            raise TerminalCommandError(_start_failure(error)) from error
        return self._report(plan, result)

    def _report(self, plan: _Plan, result: PipelineResult) -> str:
        rendered = report(result, plan.names, self._executables, self.timeout)
        if rendered.timed_out:
            raise TerminalCommandError(rendered.text)
        return rendered.text

    def _plan(self, command: str) -> _Plan | str:
        """Check `command` and build its stages; answer `cd` and `pwd` directly.

        Raises:
            TerminalCommandError: The command is refused.
        """
        try:
            return self._check(command)
        except Refusal as refusal:
            raise TerminalCommandError(str(refusal)) from None

    def _check(self, command: str) -> _Plan | str:
        cwd = self._current_dir()
        stages = split_pipeline(command.strip())
        names = [self._command_name(stage[0]) for stage in stages]
        builtins = [name for name in names if name in BUILTINS]
        if builtins and len(stages) > 1:
            msg = f"{builtins[0]} cannot be part of a pipeline; run it on its own."
            raise Refusal(msg)
        if builtins:
            return self._builtin(names[0], stages[0][1:], cwd)
        argvs = [
            self._stage_argv(name, stage[1:], cwd)
            for name, stage in zip(names, stages, strict=True)
        ]
        preexec = None if self._prlimit else Limits.for_timeout(self.timeout).preexec()
        options: dict[str, Any] = {
            "cwd": cwd,
            "env": child_env(self.root, self.env),
            "timeout": self.timeout,
            "max_chars": self.max_output_chars,
            "preexec": preexec,
        }
        return _Plan(argvs, names, options)

    def _current_dir(self) -> str:
        """The current directory's real path, re-checked (it may have become a symlink).

        Raises:
            Refusal: The root or the current directory changed; the tool is back at
                the root.
        """
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
            argv = [*Limits.for_timeout(self.timeout).prlimit_prefix(self._prlimit), *argv]
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


class _Plan:
    """A checked command: its stages' argvs, their names, and how to run them."""

    __slots__ = ("names", "options", "stages")

    def __init__(self, stages: list[list[str]], names: list[str], options: dict[str, Any]) -> None:
        self.stages = stages
        self.names = names
        self.options = options


def _start_failure(error: OSError) -> str:
    return f"The command could not be started: {error.strerror or error}."
