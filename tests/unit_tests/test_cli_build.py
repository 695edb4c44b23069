"""`contextkit build`: chunk a folder, rank with BM25, assemble under the budget."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_contextkit.cli import main
from langchain_contextkit.tokens.count import count_tokens

EXPENSES = """\
# Expense policy

Everything an employee may claim back, and how.

## Meals

Meals are capped at 80 euros per day while travelling. No receipt is needed under 25 euros;
above that, keep the receipt and attach it to the claim within 30 days.

## Hotels

Hotels are capped at 180 euros per night in most cities and 250 in London, Paris and
New York. Book through the travel portal so the invoice goes to the company directly.

## Mileage

Private cars are reimbursed at 0.30 euros per kilometre. Record the start and end address.
"""

ONBOARDING = """\
# Onboarding

## First day

Collect your badge at the front desk, then meet your buddy. Your laptop waits at the IT counter.

## Accounts

You get an email account, a chat account and access to the wiki on the first day.
"""

REIMBURSEMENT_ZH = """\
# 报销制度

## 餐费

出差期间餐费每天上限八十元。二十五元以下无需发票，超过部分须在三十天内附发票报销。

## 住宿

住宿费每晚上限五百元，须通过差旅平台预订。
"""

HISTORY = [
    {"role": "user", "content": "I am flying to Paris next week."},
    {"role": "assistant", "content": "Noted. Do you want the travel policy?"},
    {"role": "user", "content": "Yes, hotels first."},
]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "guide").mkdir(parents=True)
    (root / "zh").mkdir()
    (root / ".private").mkdir()
    (root / "guide" / "expenses.md").write_text(EXPENSES, encoding="utf-8")
    (root / "guide" / "onboarding.markdown").write_text(ONBOARDING, encoding="utf-8")
    (root / "zh" / "报销制度.md").write_text(REIMBURSEMENT_ZH, encoding="utf-8")
    (root / "notes.txt").write_text(
        "The office is closed on public holidays. The cafeteria opens at 8.\n", encoding="utf-8"
    )
    (root / ".private" / "secret.md").write_text("# Zanzibar\n\nzanzibar code 1234\n")
    (root / "logo.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00zanzibar")
    (root / "latin1.txt").write_bytes("café zanzibar".encode("latin-1"))
    (root / "photo.png").write_bytes(b"\x89PNG\r\n")
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["build", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    status, out, err = _run(capsys, *argv, "--json")
    assert status == 0, err
    return json.loads(out)


def test_prompt_holds_the_relevant_chunk_and_the_ledger(
    docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _run(capsys, "How much can I spend on meals?", "--docs", str(docs))
    assert status == 0, err
    prompt, ledger = out.split("=== ledger", 1)
    assert "[guide/expenses.md › Expense policy › Meals]" in prompt
    assert "Meals are capped at 80 euros per day" in prompt
    assert "badge at the front desk" not in prompt  # nothing in it matches the query
    assert "Hotels are capped" not in prompt
    assert prompt.rstrip().endswith("[Current question]\nHow much can I spend on meals?")
    assert "8192-token window" in ledger
    assert "rag" in ledger
    assert "block:" in ledger
    assert "window" not in err  # the ledger's title names the default window, once
    assert "skipped logo.md: binary file" in err
    assert "skipped latin1.txt: not UTF-8 text" in err
    assert "Traceback" not in err


def test_ranking_prefers_the_matching_section(
    docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _run(capsys, "hotel in London", "--docs", str(docs), "--top", "1")
    assert status == 0
    assert "250 in London" in out  # "hotel" finds "Hotels" through the Porter stemmer
    assert "80 euros per day" not in out


def test_chinese_query_finds_chinese_chunk(docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "餐费每天上限是多少？", "--docs", str(docs), "--top", "1")
    assert status == 0
    assert "[zh/报销制度.md › 报销制度 › 餐费]" in out
    assert "餐费每天上限八十元" in out
    assert "五百元" not in out
    assert "Meals are capped" not in out


def test_hidden_folders_and_unreadable_files_are_not_read(
    docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _json(capsys, "zanzibar", "--docs", str(docs), "--window", "8192")
    assert "zanzibar" not in report["prompt"].split("[Current question]")[0].lower()
    assert report["documents"]["files"] == 4  # expenses, onboarding, 报销制度, notes
    assert {s["path"] for s in report["documents"]["skipped"]} == {"logo.md", "latin1.txt"}


def test_json_has_prompt_and_ledger(docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _json(capsys, "meals", "--docs", str(docs), "--window", "16000")
    assert report["window"] == 16000
    assert report["max_tokens"] == 8000
    assert report["output_reserve"] == 1600
    assert "80 euros per day" in report["prompt"]
    assert report["prompt_tokens"] == count_tokens(report["prompt"])
    (rag,) = report["sources"]
    assert rag["name"] == "rag"
    for field in ("quota", "borrowed", "used", "fetched", "kept", "dropped"):
        assert isinstance(rag[field], int), field
    assert rag["kept"] >= 1
    assert rag["fetched"] == rag["kept"] + rag["dropped"]
    assert report["block_tokens"] <= report["budget"]


def test_budget_is_respected_when_documents_overflow_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "big"
    root.mkdir()
    sections = "\n\n".join(
        f"## Rule {i}\n\n"
        + f"Travel rule {i}: meals and hotels are reimbursed with a receipt. " * 12
        for i in range(40)
    )
    (root / "rules.md").write_text(f"# Rules\n\n{sections}\n", encoding="utf-8")
    report = _json(capsys, "meals receipt", "--docs", str(root), "--window", "2000", "--top", "40")
    (rag,) = report["sources"]
    assert rag["fetched"] == 40
    assert rag["dropped"] > 0  # the budget could not hold them all
    assert rag["borrowed"] > 0  # the idle quotas of absent sources were lent to rag
    assert rag["used"] <= report["budget"]
    assert report["block_tokens"] <= report["budget"]
    assert report["prompt_tokens"] <= report["max_tokens"]


def test_history_joins_the_prompt_in_order(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "history.json"
    history.write_text(json.dumps(HISTORY), encoding="utf-8")
    report = _json(
        capsys, "hotel price", "--docs", str(docs), "--history", str(history), "--window", "8192"
    )
    prompt = report["prompt"]
    lines = [
        "- user: I am flying to Paris next week.",
        "- assistant: Noted. Do you want the travel policy?",
        "- user: Yes, hotels first.",
    ]
    assert "[Conversation so far]\n" + "\n".join(lines) in prompt
    # Fixed layout: knowledge, then the conversation, then the question.
    assert prompt.index("[Knowledge]") < prompt.index("[Conversation so far]")
    assert prompt.index("[Conversation so far]") < prompt.index("[Current question]")
    assert [s["name"] for s in report["sources"]] == ["rag", "history"]
    assert report["history"] == {"messages": 3, "offered": 3}


def test_long_history_keeps_the_recent_messages(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "word " * 40}
        for i in range(60)
    ]
    history = tmp_path / "history.json"
    history.write_text(json.dumps(messages), encoding="utf-8")
    status, out, err = _run(
        capsys, "meals", "--docs", str(docs), "--history", str(history), "--window", "4096"
    )
    assert status == 0, err
    assert "message 59:" in out
    assert "message 0:" not in out
    assert "oldest of 60 messages do not fit" in err


def test_text_help_documents_the_history_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["build", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert '"role": "user" | "assistant"' in help_text
    assert "--window" in help_text


def _bad_inputs(docs: Path, tmp_path: Path) -> dict[str, list[str]]:
    empty = tmp_path / "empty"
    empty.mkdir()
    only_binary = tmp_path / "only_binary"
    only_binary.mkdir()
    (only_binary / "a.md").write_bytes(b"\x00\x01\x02")
    (only_binary / "b.png").write_bytes(b"\x89PNG")
    blank = tmp_path / "blank"
    blank.mkdir()
    (blank / "a.md").write_text("\n\n   \n", encoding="utf-8")
    malformed = tmp_path / "malformed.json"
    malformed.write_text('[{"role": "user", "content": "hi"', encoding="utf-8")
    not_a_list = tmp_path / "object.json"
    not_a_list.write_text('{"role": "user", "content": "hi"}', encoding="utf-8")
    bad_role = tmp_path / "role.json"
    bad_role.write_text('[{"role": "bot", "content": "hi"}]', encoding="utf-8")
    bad_content = tmp_path / "content.json"
    bad_content.write_text('[{"role": "user", "content": 3}]', encoding="utf-8")
    undecodable = tmp_path / "latin1.json"
    undecodable.write_bytes('[{"role": "user", "content": "café"}]'.encode("latin-1"))
    window = ["--window", "8192"]
    return {
        "missing folder": ["q", "--docs", str(tmp_path / "nope"), *window],
        "file as folder": ["q", "--docs", str(docs / "notes.txt"), *window],
        "empty folder": ["q", "--docs", str(empty)],
        "only unreadable files": ["q", "--docs", str(only_binary), *window],
        "documents without text": ["q", "--docs", str(blank), *window],
        "missing history": ["q", "--docs", str(docs), "--history", str(tmp_path / "h.json")],
        "history is a folder": ["q", "--docs", str(docs), "--history", str(tmp_path)],
        "malformed history": ["q", "--docs", str(docs), "--history", str(malformed)],
        "history not a list": ["q", "--docs", str(docs), "--history", str(not_a_list)],
        "history bad role": ["q", "--docs", str(docs), "--history", str(bad_role)],
        "history bad content": ["q", "--docs", str(docs), "--history", str(bad_content)],
        "history not utf-8": ["q", "--docs", str(docs), "--history", str(undecodable)],
        "window below the quotas": ["q", "--docs", str(docs), "--window", "500"],
        "window of one token": ["q", "--docs", str(docs), "--window", "1"],
        "window zero": ["q", "--docs", str(docs), "--window", "0"],
        "question over the reserve": ["word " * 900, "--docs", str(docs), "--window", "4000"],
        "system prompt over the window": [
            "q",
            "--docs",
            str(docs),
            "--window",
            "2000",
            "--system",
            "rule " * 2000,
        ],
        "empty question": ["  ", "--docs", str(docs), *window],
        "top zero": ["q", "--docs", str(docs), "--top", "0", *window],
        "chunk tokens zero": ["q", "--docs", str(docs), "--chunk-tokens", "0", *window],
    }


BAD_INPUT_NAMES = [
    "missing folder",
    "file as folder",
    "empty folder",
    "only unreadable files",
    "documents without text",
    "missing history",
    "history is a folder",
    "malformed history",
    "history not a list",
    "history bad role",
    "history bad content",
    "history not utf-8",
    "window below the quotas",
    "window of one token",
    "window zero",
    "question over the reserve",
    "system prompt over the window",
    "empty question",
    "top zero",
    "chunk tokens zero",
]


@pytest.mark.parametrize("case", BAD_INPUT_NAMES)
def test_bad_input_gets_one_line_and_a_nonzero_exit(
    case: str, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _bad_inputs(docs, tmp_path)[case]
    status, out, err = _run(capsys, *argv)
    assert status != 0
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("contextkit: ")
    assert "Traceback" not in err


def test_bad_input_messages_say_what_is_wrong(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = _bad_inputs(docs, tmp_path)
    expected = {
        "missing folder": "no such folder",
        "file as folder": "is not a folder",
        "empty folder": "no documents under",
        "only unreadable files": "1 skipped as unreadable",
        "malformed history": "is not valid JSON",
        "history bad role": "role must be 'user' or 'assistant'",
        "window below the quotas": "--window 500 is too small (the smallest that works is 536)",
        "question over the reserve": "the question takes",
        "system prompt over the window": "the system prompt takes",
    }
    for case, words in expected.items():
        _, _, err = _run(capsys, *cases[case])
        assert words in err, (case, err)


def test_the_bad_input_list_is_complete(docs: Path, tmp_path: Path) -> None:
    assert sorted(_bad_inputs(docs, tmp_path)) == sorted(BAD_INPUT_NAMES)


def _module(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - this interpreter, our module, test arguments
        [sys.executable, "-m", "langchain_contextkit.cli", "build", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        encoding="utf-8",
    )


def test_a_real_process_prints_no_traceback(docs: Path, tmp_path: Path) -> None:
    malformed = tmp_path / "h.json"
    malformed.write_text("[", encoding="utf-8")
    for status, argv in (
        (1, ["q", "--docs", str(tmp_path / "missing")]),  # failures: input it cannot use
        (1, ["q", "--docs", str(docs), "--history", str(malformed)]),
        (2, ["q", "--docs", str(docs), "--window", "100"]),  # usage: a bad argument
    ):
        done = _module(*argv)
        assert done.returncode == status, done.stderr
        assert done.stdout == ""
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_real_process_builds_json(docs: Path) -> None:
    done = _module("住宿每晚上限", "--docs", str(docs), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "住宿费每晚上限五百元" in report["prompt"]
    assert "Traceback" not in done.stderr
