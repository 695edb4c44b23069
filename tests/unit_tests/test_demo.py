"""`contextkit demo`: the offline agent session, its output, and its bad-input paths."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from importlib import resources
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit.agent.ledger import LEGEND
from langchain_contextkit.cli import main
from langchain_contextkit.cli.demo import run as _demo
from langchain_contextkit.cli.demo.model import ChosenModel, choose_model
from langchain_contextkit.cli.demo.project import copy_project
from langchain_contextkit.cli.demo.script import FACTS, TURNS, scripted_reply
from langchain_contextkit.retrieval.sources.docs import DocsSource
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from pathlib import Path

BAR = re.compile(r"^\s+(\d+)  ([STRKHQ.O]{40})  \s*([\d,]+)  ([C ][r ])  (.+)$")
PROJECT_FILES = [
    "README.md",
    "docs/architecture.md",
    "docs/decisions/0007-kafka-over-sqs.md",
    "docs/decisions/0011-idempotency-keys.md",
    "docs/decisions/0014-replica-lag-alert.md",
    "docs/oncall.md",
    "docs/runbook.md",
    "postmortems/2025-08-14-consumer-lag.md",
]


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The demo picks a real model from these; the tests choose explicitly.
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def run_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["demo", "--json", "--workspace", str(tmp_path / "ws"), *args]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    data: dict[str, Any] = json.loads(captured.out)
    return data


def test_demo_prints_a_bar_per_call_and_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    assert main(["demo", "--workspace", str(workspace)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # offline, not a terminal: no progress lines
    lines = captured.out.splitlines()
    assert all(len(line) <= 100 for line in lines if str(workspace) not in line)
    assert sum(LEGEND.split("  ")[0] in line for line in lines) == 1  # the legend, once
    assert f"  {LEGEND}" in lines

    bars = [match for line in lines if (match := BAR.match(line))]
    calls = int(re.search(r"(\d+) model calls", captured.out).group(1))  # type: ignore[union-attr]
    assert [int(match.group(1)) for match in bars] == list(range(1, calls + 1))
    assert calls >= 2 * len(TURNS)  # tool calls and answers
    assert sum(line.startswith("turn ") for line in lines) == len(TURNS)
    compacted = [match for match in bars if match.group(4)[0] == "C"]
    assert len(compacted) >= 2
    assert f"compactions       {len(compacted)} (calls " in captured.out
    moves = [match.group(5) for match in bars]
    assert any(move.startswith("$ ls") for move in moves)
    assert any(move.startswith("$ grep") for move in moves)
    assert any(move.startswith("$ head") for move in moves)
    for action in ("create", "update", "read", "search"):
        assert any(move.startswith(f"note {action}") for move in moves), action

    assert "5 written, 3 updated, 2 read back" in captured.out
    facts = len(FACTS)
    assert f"{facts} of {facts} planted facts still in the model's request" in captured.out
    assert "not visible" not in captured.out
    assert "INC-4821" in captured.out.split("summary")[-1]
    # The quality gate ran on every call (each ledger line carries a passing result) ...
    log = [json.loads(line) for line in (workspace / "ledger.jsonl").read_text().splitlines()]
    assert [line["call"] for line in log] == list(range(1, calls + 1))
    for line in log:
        assert line["gate"]["passed"] is True, line
        checks = {check["name"]: check for check in line["gate"]["checks"]}
        assert set(checks) == {"max_request_tokens", "required_facts", "max_retrieval_share"}
        assert checks["max_request_tokens"]["threshold"] == 5000
    assert log[-1]["gate"]["checks"][1]["threshold"] == len(FACTS)  # every fact, by the end
    assert f"checked on every call: {calls} of {calls} passed" in captured.out
    assert f"gate failures      0 of {calls} gated calls" in captured.out
    # ... and fails, on purpose, on the last request without its summary and retrieval block.
    on_purpose = captured.out.split("gate, on purpose")[1].split("workspace")[0]
    assert "without its summary and retrieval block" in on_purpose
    assert "FAILS, as intended (deliberate" in on_purpose
    assert "- required_facts: 4 of 5 present; missing: '2025-11-20'" in on_purpose
    # The workspace holds the project the terminal saw and the agent's notes, as markdown.
    assert copy_project(tmp_path / "again") == sorted(
        p.relative_to(workspace / "project").as_posix()
        for p in (workspace / "project").rglob("*")
        if p.is_file()
    )
    assert len(list((workspace / "notes").glob("note_*.md"))) == 5


def test_demo_json_keeps_every_call_within_the_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = run_json(tmp_path, capsys, "--window", "7000")
    assert data["window"] == 7000
    assert data["limit"] == 7000 - data["output_reserve"]
    ledgers = data["ledgers"]
    assert len(ledgers) == data["calls"]
    assert [entry["call"] for entry in ledgers] == list(range(1, data["calls"] + 1))
    parts = ("system", "tools", "summary", "retrieval", "history", "turn", "free", "output_reserve")
    for entry in ledgers:
        assert sum(entry[part] for part in parts) == entry["window"] == 7000
        assert entry["prompt"] <= data["limit"]
    assert data["largest_prompt"]["tokens"] == max(entry["prompt"] for entry in ledgers)
    assert len(data["compactions"]) >= 2
    assert data["compactions"] == [entry["call"] for entry in ledgers if entry["compacted"]]
    assert [fact["needle"] for fact in data["facts"]] == [fact.needle for fact in FACTS]
    for fact in data["facts"]:
        assert fact["parts"], fact
    assert data["notes"]["created"] == data["notes"]["on_disk"] == 5
    assert "Hand-over" in data["last_answer"]
    gate = data["gate"]
    assert gate["checked"] == gate["passed"] == data["calls"]
    assert gate["failed_calls"] == []
    assert gate["max_request_tokens"] == data["limit"]
    assert all(entry["gate"]["passed"] for entry in ledgers)
    assert data["report"]["overall"]["gate_checked"] == data["calls"]
    assert data["report"]["overall"]["gate_failures"] == 0
    failure = data["deliberate_failure"]
    assert failure["deliberate"] is True
    assert failure["removed"] == ["summary", "retrieval block"]
    assert failure["passed"] is False
    assert failure["failures"] == ["- required_facts: 4 of 5 present; missing: '2025-11-20'"]
    facts_check = next(c for c in failure["result"]["checks"] if c["name"] == "required_facts")
    assert facts_check["passed"] is False
    evaluation = data["evaluation"]  # every planted fact asked after the conversation
    assert [case["reference"] for case in evaluation["cases"]] == [f.needle for f in FACTS]
    scores = [case["score"] for case in evaluation["cases"]]
    assert evaluation["figures"]["mean_score"] == sum(scores) / len(scores) == 1.0
    for case in evaluation["cases"]:
        assert case["answer"] == case["reference"]
        assert case["tokens"] <= case["limit"] == data["limit"]
    assert all(entry["model_ms"] >= 0 for entry in ledgers)
    assert data["report"]["overall"]["timed_calls"] == data["calls"]


def test_demo_turns_runs_the_first_turns_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = run_json(tmp_path, capsys, "--turns", "3")
    assert data["turns"] == 3
    assert {entry["user_turn"] for entry in data["ledgers"]} == {1, 2, 3}
    # Only the facts planted by then are checked.
    assert [fact["needle"] for fact in data["facts"]] == ["INC-4821", "2025-11-20"]
    assert all(fact["parts"] for fact in data["facts"])
    asked = [case["reference"] for case in data["evaluation"]["cases"]]
    assert asked == ["INC-4821", "2025-11-20"]


def test_scripted_agent_answers_every_turn_from_the_request_alone() -> None:
    # Given only a turn's question, the scripted agent starts its plan (or answers).
    for number, turn in enumerate(TURNS):
        reply = scripted_reply([HumanMessage(turn.user)])
        if turn.steps:
            assert reply.tool_calls[0]["id"] == f"call_{number}_0"
        else:
            assert reply.text == turn.answer
    assert scripted_reply([HumanMessage("off script")]).text.startswith("I have no script")


def test_the_sample_project_ships_as_package_data(tmp_path: Path) -> None:
    bundled = resources.files("langchain_contextkit.cli.demo") / "demo_project"
    assert bundled.is_dir()
    assert copy_project(tmp_path) == PROJECT_FILES
    lines = sum(len((tmp_path / name).read_text().splitlines()) for name in PROJECT_FILES)
    assert 200 <= lines <= 500
    best = DocsSource.from_folder(tmp_path, k=1).fetch("dedupe keys window")
    assert best[0].metadata["path"] == "docs/decisions/0011-idempotency-keys.md"


# -- a real model: only the paths that need no network ------------------------------


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("contextkit demo: ")
    return lines[0]


def test_missing_key_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "openai:gpt-4o-mini"]) == 1  # a setup failure
    assert "OPENAI_API_KEY" in one_line_error(capsys)


def test_unknown_provider_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "nosuch:some-model"]) == 2  # a bad argument
    assert "provider" in one_line_error(capsys)


def test_missing_provider_package_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)
    assert main(["demo", "--model", "anthropic:claude-sonnet-4-5"]) == 1
    assert "pip install langchain-anthropic" in one_line_error(capsys)


def test_base_url_without_langchain_openai_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setitem(sys.modules, "langchain_openai", None)
    assert main(["demo"]) == 1
    assert "langchain-openai" in one_line_error(capsys)


def test_base_url_picks_chat_openai_without_a_key() -> None:
    chosen = choose_model(
        "local-model", max_tokens=500, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    )
    assert type(chosen.model).__name__ == "ChatOpenAI"
    assert chosen.model.model_name == "local-model"  # type: ignore[union-attr]
    assert "http://127.0.0.1:9/v1" in chosen.label
    default = choose_model(None, max_tokens=500, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert default.model.model_name == "gpt-4o-mini"  # type: ignore[union-attr]
    assert choose_model(None, max_tokens=500, env={}).model is None


def test_a_failing_model_call_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(_messages: list[BaseMessage]) -> AIMessage:
        msg = "401 invalid key"
        raise PermissionError(msg)

    model = ScriptedChatModel(respond=refuse)
    monkeypatch.setattr(
        _demo, "choose_model", lambda *_a, **_k: ChosenModel(model, "a model that refuses")
    )
    assert main(["demo", "--model", "any:thing", "--workspace", str(tmp_path / "ws")]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == (
        "contextkit demo: turn 1: the model call failed: PermissionError: 401 invalid key"
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--window", "500"], "--window 500 is too small"),
        (["--turns", "0"], "--turns must be at least 1"),
    ],
)
def test_bad_numbers_are_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", *args]) == 2
    assert needle in one_line_error(capsys)


def test_a_non_empty_workspace_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["demo", "--workspace", str(tmp_path)]) == 2
    assert "is not an empty folder" in one_line_error(capsys)
    assert (tmp_path / "keep.txt").read_text() == "mine"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_spins_on_a_terminal_and_clears_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    stream = FakeTerminal()
    progress = _demo.Progress(stream, plain_lines=True)
    progress.status("turn 2/30", "call 5")
    deadline = time.monotonic() + 5
    while "turn 2/30: call 5" not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    with progress.paused():
        assert stream.getvalue().endswith("\r\x1b[K")  # the line is free for the output
    progress.close()
    assert "turn 2/30: call 5" in stream.getvalue()
    assert stream.getvalue().endswith("\r\x1b[K")
    assert "\n" not in stream.getvalue()  # no plain lines on a terminal


def test_colours_only_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    out, err = FakeTerminal(), io.StringIO()
    options = _demo.DemoOptions(turns=1, workspace=str(tmp_path / "ws"))
    assert _demo.run_demo(options, out=out, err=err) == 0
    assert "\x1b[34mS\x1b[0m" in out.getvalue()  # the system part of the bar, in blue
    monkeypatch.setenv("NO_COLOR", "1")
    out = FakeTerminal()
    options = _demo.DemoOptions(turns=1, workspace=str(tmp_path / "ws2"))
    assert _demo.run_demo(options, out=out, err=err) == 0
    assert "\x1b[" not in out.getvalue()


def test_a_failing_gate_shows_in_the_summary_not_as_log_lines(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_contextkit.cli.demo.session import DemoGate
    from langchain_contextkit.quality import QualityGate

    def too_tight(self: DemoGate, turn: int) -> QualityGate:
        return QualityGate(max_request_tokens=1, required_facts=["INC-4821"])

    monkeypatch.setattr(DemoGate, "for_turn", too_tight)
    assert main(["demo", "--turns", "2", "--workspace", str(tmp_path / "ws")]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # on_gate_fail="log", but the demo keeps the log quiet
    assert "context quality gate failed" not in captured.out
    assert not [r for r in caplog.records if r.name == "langchain_contextkit.quality"]
    calls = int(re.search(r"(\d+) model calls", captured.out).group(1))  # type: ignore[union-attr]
    numbers = ", ".join(str(n) for n in range(1, calls + 1))
    assert f"checked on every call: 0 of {calls} passed; failed at call {numbers}" in captured.out
    assert f"gate failures      {calls} of {calls} gated calls" in captured.out
