"""TerminalTool in normal use: progressive disclosure on a realistic tree, limits, config."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from typing import TYPE_CHECKING

import pytest
from langchain_core.messages import ToolMessage
from langchain_tests.unit_tests import ToolsUnitTests
from terminal_world import HAS_GAWK, HAS_TREE, MODES, World, build_world, processes_in

import langchain_contextkit
from langchain_contextkit import ConfigError, TerminalTool
from langchain_contextkit.tools import DEFAULT_READ_ONLY
from langchain_contextkit.tools.terminal._exec import run_pipeline
from langchain_contextkit.tools.terminal.tool import TerminalCommandError

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory.mktemp("normal"))


@pytest.fixture(params=MODES)
def tool(request: pytest.FixtureRequest, world: World) -> TerminalTool:
    return TerminalTool(world.root, sandbox=request.param, timeout=5)


def call(tool: TerminalTool, command: str) -> ToolMessage:
    message = tool.invoke(
        {"type": "tool_call", "name": "terminal", "args": {"command": command}, "id": "1"}
    )
    assert isinstance(message, ToolMessage)
    return message


# -- progressive disclosure: task -> tree -> folder -> file -> lines ----------------------


def test_progressive_disclosure_finds_the_bug(tool: TerminalTool) -> None:
    top = tool.invoke({"command": "ls"})
    assert "src" in top.split()
    assert "README.md" in top.split()
    if HAS_TREE:
        tree = tool.invoke({"command": "tree -L 2 -d src"})
        assert "shop" in tree
    hits = tool.invoke({"command": "grep -rn 'def charge' src"})
    assert hits == 'src/shop/payments/pay.py:6:def charge(amount, currency="EUR"):'
    assert tool.invoke({"command": "cd src/shop/payments"}) == "Now in src/shop/payments."
    assert tool.invoke({"command": "pwd"}) == "src/shop/payments"
    lines = tool.invoke({"command": "grep -n -A 2 TODO pay.py"})
    assert lines.splitlines()[0] == "7:    # TODO: rounding bug for JPY (no minor unit)"
    assert tool.invoke({"command": "wc -l ../../../README.md"}) == "3 ../../../README.md"
    assert tool.invoke({"command": "cd ../.."}) == "Now in src."
    assert tool.invoke({"command": "cd"}) == "Now in . (the workspace root)."
    assert tool.cwd == "."


def test_find_sort_uniq_cut_and_pipelines(tool: TerminalTool) -> None:
    found = tool.invoke({"command": "find src -name '*.py' -type f"})
    assert sorted(found.splitlines()) == [
        "src/shop/__init__.py",
        "src/shop/cart.py",
        "src/shop/money.py",
        "src/shop/payments/__init__.py",
        "src/shop/payments/pay.py",
    ]
    errors = tool.invoke({"command": "grep ERROR data/app.log | cut -d ' ' -f 2 | sort | uniq -c"})
    assert errors.split() == ["100", "ERROR"]
    last = tool.invoke({"command": "tail -n 2 docs/guide.md | head -n 1"})
    assert last == "Guide line 199"
    assert tool.invoke({"command": "echo hello 'quoted | pipe'"}) == "hello quoted | pipe"
    assert tool.invoke({"command": "head -3 docs/guide.md | wc -l"}) == "3"


def test_globs_are_expanded_inside_the_root(tool: TerminalTool) -> None:
    assert tool.invoke({"command": "ls src/shop/*.py"}).split() == [
        "src/shop/__init__.py",
        "src/shop/cart.py",
        "src/shop/money.py",
    ]
    # A quoted star is literal, and a pattern option value is never expanded.
    assert "No such file" in tool.invoke({"command": "ls 'src/shop/*.py'"})
    found = tool.invoke({"command": "find src -name *.py -path '*payments*'"})
    assert sorted(found.split()) == [
        "src/shop/payments/__init__.py",
        "src/shop/payments/pay.py",
    ]


def test_stat_file_du_and_metadata(tool: TerminalTool) -> None:
    assert tool.invoke({"command": "stat -c %s README.md"}) == "40"
    assert tool.invoke({"command": "file -b README.md"}) == "ASCII text"
    assert (
        tool.invoke({"command": "du -s --apparent-size -B1 src/shop/cart.py"})
        == "50\tsrc/shop/cart.py"
    )
    assert "escape_link -> ../outside/secret.txt" in tool.invoke({"command": "ls -l"})


def test_errors_come_back_as_messages(tool: TerminalTool) -> None:
    missing = call(tool, "cat nope.txt")
    assert missing.status == "success"
    assert missing.content == (
        "[stderr]\ncat: nope.txt: No such file or directory\n[cat: exit status 1]"
    )
    assert call(tool, "grep zebra README.md").content == (
        "[grep: no lines matched (exit status 1)]"
    )
    refused = call(tool, "rm -rf .")
    assert refused.status == "error"
    assert "'rm' is not available" in refused.content
    unknown = call(tool, "ls --frobnicate")
    assert unknown.status == "error"
    assert "Options ls accepts here" in unknown.content
    assert call(tool, "").status == "error"
    assert call(tool, "   ").content == "Empty command."


def test_invoke_without_tool_call_returns_text_for_refusals(tool: TerminalTool) -> None:
    text = tool.invoke({"command": "cat /etc/shadow"})
    assert "system directory" not in text
    assert "outside the workspace" in text


def test_empty_stdin_never_blocks(tool: TerminalTool) -> None:
    start = time.monotonic()
    assert tool.invoke({"command": "cat"}) == "(no output)"
    assert tool.invoke({"command": "sort"}) == "(no output)"
    assert time.monotonic() - start < 2


# -- limits ---------------------------------------------------------------------------


def test_output_is_cut_with_head_tail_and_a_note(world: World) -> None:
    tool = TerminalTool(world.root, sandbox="none", max_output_chars=400)
    text = tool.invoke({"command": "cat data/app.log"})
    assert text.startswith("2024-01-01 ERROR event 0\n")
    assert text.endswith("event 4999")
    assert "characters cut here" in text
    note = next(line for line in text.splitlines() if "characters cut here" in line)
    total = int(note.split(" of ")[1].split(" characters")[0].replace(",", ""))
    assert total == (world.root / "data" / "app.log").stat().st_size
    assert len(text) < 400 + len(note) + 10


@pytest.mark.parametrize("mode", MODES)
def test_huge_output_returns_promptly(world: World, mode: str) -> None:
    tool = TerminalTool(world.root, sandbox=mode, max_output_chars=1000)
    start = time.monotonic()
    text = tool.invoke({"command": "cat data/big.bin"})
    assert time.monotonic() - start < 3
    assert "MiB; the command was stopped" in text
    assert len(text) < 1500
    assert processes_in(world.root) == []


@pytest.mark.parametrize("mode", MODES)
def test_timeout_kills_and_reports(world: World, mode: str) -> None:
    tool = TerminalTool(world.root, sandbox=mode, timeout=0.5)
    start = time.monotonic()
    message = call(tool, "grep -r -D read x .")  # blocks on the FIFO
    assert time.monotonic() - start < 2.5
    assert message.status == "error"
    assert "timed out after 0.5 s" in message.content
    assert processes_in(world.root) == []


@pytest.mark.parametrize("mode", MODES)
async def test_async_twin_runs_concurrently_and_times_out(world: World, mode: str) -> None:
    tool = TerminalTool(world.root, sandbox=mode, timeout=0.5)
    start = time.monotonic()
    slow, fast = await asyncio.gather(
        tool.ainvoke({"command": "grep -r -D read x ."}),
        tool.ainvoke({"command": "grep -c ERROR data/app.log"}),
    )
    assert fast == "100"
    assert "timed out" in slow
    assert time.monotonic() - start < 2.5
    assert processes_in(world.root) == []


async def test_async_matches_sync(tool: TerminalTool) -> None:
    for command in ["ls src", "grep -rn TODO src | head -1", "cat ../outside/secret.txt"]:
        assert await tool.ainvoke({"command": command}) == tool.invoke({"command": command})


@pytest.mark.parametrize("mode", MODES)
def test_resource_limits_stop_writes(world: World, mode: str) -> None:
    # Policy aside, a child cannot write a file: RLIMIT_FSIZE is 0. Run a writer through
    # the tool's own launch path (bypassing the policy) to prove the limit is there.
    tool = TerminalTool(world.root, sandbox=mode)
    plan = tool._check("ls")
    assert not isinstance(plan, str)
    wrapper = plan.stages[0][:-1]  # prlimit (and bwrap), without ls itself
    target = world.base / "written.txt"
    dd = shutil.which("dd")
    assert dd is not None
    writer = [*wrapper, dd, "if=/dev/zero", f"of={target}", "bs=1k", "count=1"]
    result = run_pipeline([writer], **plan.options)
    assert result.statuses[0] != 0
    assert not target.exists() or target.stat().st_size == 0
    target.unlink(missing_ok=True)


@pytest.mark.parametrize("mode", MODES)
def test_canary_environment_variable_never_reaches_commands(
    world: World, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "contextkit-env-canary-5d1f"
    monkeypatch.setenv("CONTEXTKIT_CANARY", canary)
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    tool = TerminalTool(world.root, sandbox=mode)
    attempts = [
        "echo $CONTEXTKIT_CANARY",
        'echo "${OPENAI_API_KEY}"',
        "cat /proc/self/environ",
        "cat /proc/1/environ",
        f"grep -r {canary} /proc/self",
        f"grep -r {canary[:10]} .",
    ]
    for command in attempts:
        assert canary not in tool.invoke({"command": command}).replace(canary[:10], "")
    # The children's whole environment, read by a process started the tool's way.
    plan = tool._check("ls")
    assert not isinstance(plan, str)
    env = shutil.which("env")
    assert env is not None
    stage = [*plan.stages[0][:-1], env]
    result = run_pipeline([stage], **plan.options)
    head, _, _ = result.stdout.result()
    assert canary not in head
    names = {line.split("=", 1)[0] for line in head.splitlines()}
    # bubblewrap adds PWD for its --chdir: the working directory, no secret.
    assert names - {"PWD"} == {"PATH", "LANG", "HOME"}
    assert f"HOME={world.root}" in head


# -- cd and the current directory ----------------------------------------------------------


def test_cd_rules(tool: TerminalTool) -> None:
    assert call(tool, "cd README.md").content == "'README.md' is not a directory."
    assert call(tool, "cd src docs").status == "error"
    assert call(tool, "cd -").status == "error"
    assert call(tool, "cd src/sh*").content == "Now in src/shop."
    assert call(tool, "cd ..").content == "Now in src."
    assert call(tool, "cd ..").content == "Now in . (the workspace root)."
    assert call(tool, "cd ..").status == "error"
    assert tool.cwd == "."
    assert call(tool, "pwd").content == "."
    assert call(tool, "pwd -P").status == "error"


def test_current_directory_is_rechecked_every_call(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("swapped-secret\n")
    tool = TerminalTool(root, sandbox="none")
    assert tool.invoke({"command": "cd sub"}) == "Now in sub."
    # Swap the directory for a symlink that leads out.
    (root / "sub").rmdir()
    (root / "sub").symlink_to(tmp_path / "outside")
    message = call(tool, "cat secret.txt")
    assert message.status == "error"
    assert "changed since cd" in message.content
    assert "swapped-secret" not in message.content
    assert tool.cwd == "."
    assert tool.invoke({"command": "ls"}) == "sub"


# -- sed and awk, when enabled --------------------------------------------------------------


@pytest.mark.skipif(not HAS_GAWK, reason="gawk is not installed (awk runs only as gawk)")
def test_sed_and_awk_work_in_their_sandboxed_forms(world: World) -> None:
    tool = TerminalTool(
        world.root, sandbox="none", allowed_commands=DEFAULT_READ_ONLY | {"sed", "awk"}
    )
    assert tool.invoke({"command": "sed -n '6,7p' src/shop/payments/pay.py"}).splitlines() == [
        'def charge(amount, currency="EUR"):',
        "    # TODO: rounding bug for JPY (no minor unit)",
    ]
    assert tool.invoke({"command": "awk '/ERROR/ { n++ } END { print n }' data/app.log"}) == "100"
    assert "sed runs as `sed --sandbox`" in tool.description
    assert "--sandbox" in tool._check("sed -n 1p README.md").stages[0]  # type: ignore[union-attr]


# -- configuration -------------------------------------------------------------------------


def test_description_names_the_sandbox_and_the_commands(world: World) -> None:
    none = TerminalTool(world.root, sandbox="none")
    assert none.sandbox_active == "none"
    assert "Sandbox: none" in none.description
    assert "Commands: cat, cd, cut, du, echo, file, find, grep, head, ls, pwd" in none.description
    auto = TerminalTool(world.root)
    assert auto.sandbox_active in {"bwrap", "none"}
    assert f"Sandbox: {'bubblewrap' if auto.sandbox_active == 'bwrap' else 'none'}" in (
        auto.description
    )
    assert "10 s" in auto.description


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"root": "/nonexistent/dir"}, "not a directory"),
        ({"root": "/"}, "confines nothing"),
        ({"allowed_commands": {"ls", "python"}}, "No argument policy for python"),
        ({"allowed_commands": {"ls", "bash"}}, "No argument policy for bash"),
        ({"allowed_commands": "ls"}, "not a string"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": "10"}, "timeout"),
        ({"max_output_chars": 10}, "max_output_chars"),
        ({"sandbox": "docker"}, "sandbox must be"),
        ({"env": {"LD_PRELOAD": "/x.so"}}, "LD_PRELOAD"),
        ({"env": {"POSIXLY_CORRECT": "1"}}, "POSIXLY_CORRECT"),
        ({"env": {"LC_ALL": 1}}, "strings"),
    ],
)
def test_bad_configuration_fails_at_construction(kwargs: dict, match: str, tmp_path: Path) -> None:
    args = {"root": tmp_path, **kwargs}
    root = args.pop("root")
    with pytest.raises(ConfigError, match=match):
        TerminalTool(root, **args)


def test_env_extra_variables_are_passed(tmp_path: Path) -> None:
    tool = TerminalTool(tmp_path, sandbox="none", env={"TZ": "UTC", "LC_ALL": "C"})
    assert tool.env == {"TZ": "UTC", "LC_ALL": "C"}


def test_bwrap_mode_needs_bubblewrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_contextkit.tools.terminal import tool as _terminal_config

    monkeypatch.setattr(_terminal_config, "find_bwrap", lambda: None)
    with pytest.raises(ConfigError, match="not installed"):
        TerminalTool(tmp_path, sandbox="bwrap")
    assert TerminalTool(tmp_path, sandbox="auto").sandbox_active == "none"


def test_missing_command_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_contextkit.tools.terminal import tool as _terminal_config

    real = _terminal_config.executable_for
    monkeypatch.setattr(
        _terminal_config, "executable_for", lambda name: None if name == "tree" else real(name)
    )
    monkeypatch.setattr(
        langchain_contextkit.tools.terminal.tool,
        "executable_for",
        _terminal_config.executable_for,
    )
    tool = TerminalTool(tmp_path, sandbox="none")
    assert "Not installed here: tree." in tool.description
    assert call(tool, "tree").content == "tree is not installed on this machine."


def test_refusal_error_is_a_tool_exception() -> None:
    from langchain_core.tools import ToolException

    assert issubclass(TerminalCommandError, ToolException)


def test_tool_raises_only_when_asked_to(tmp_path: Path) -> None:
    tool = TerminalTool(tmp_path, sandbox="none", handle_tool_error=False)
    with pytest.raises(TerminalCommandError, match="not an allowed command"):
        tool.invoke({"command": "frobnicate"})


def test_no_process_outlives_a_pipeline(world: World) -> None:
    tool = TerminalTool(world.root, sandbox="none")
    assert tool.invoke({"command": "cat data/big.bin | head -c 3 | wc -c"}) == "3"
    assert processes_in(world.root) == []


# -- langchain-tests standard suite ----------------------------------------------------------


class TestTerminalToolStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> type[TerminalTool]:
        return TerminalTool

    @property
    def tool_constructor_params(self) -> dict:
        return {"root": tempfile.gettempdir(), "sandbox": "none"}

    @property
    def tool_invoke_params_example(self) -> dict:
        return {"command": "ls"}


def test_public_exports() -> None:
    assert langchain_contextkit.TerminalTool is TerminalTool
    assert "ls" in DEFAULT_READ_ONLY
    assert not DEFAULT_READ_ONLY & {"sh", "bash", "python", "sed", "awk", "less", "vi"}
    assert os.fspath(TerminalTool(tempfile.gettempdir(), sandbox="none").root)


def test_limits_without_prlimit_use_preexec(world: World) -> None:
    # Where util-linux prlimit is missing, the limits are set by a preexec_fn instead.
    tool = TerminalTool(world.root, sandbox="none")
    tool._prlimit = None
    plan = tool._check("ls")
    assert not isinstance(plan, str)
    assert plan.stages[0][0].endswith("/ls")
    assert plan.options["preexec"] is not None
    assert tool.invoke({"command": "grep -c ERROR data/app.log"}) == "100"
    target = world.base / "written-preexec.txt"
    dd = shutil.which("dd")
    assert dd is not None
    result = run_pipeline(
        [[dd, "if=/dev/zero", f"of={target}", "bs=1k", "count=1"]], **plan.options
    )
    assert result.statuses[0] != 0
    assert not target.exists() or target.stat().st_size == 0
    target.unlink(missing_ok=True)


def test_other_platforms_are_refused_at_construction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_contextkit.tools.terminal import tool as _terminal_config

    monkeypatch.setattr(_terminal_config.sys, "platform", "darwin")
    with pytest.raises(ConfigError, match="Linux only"):
        TerminalTool(tmp_path)
