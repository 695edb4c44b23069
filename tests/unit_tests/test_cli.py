import json
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_contextkit import __version__, count_tokens, tiktoken_counter
from langchain_contextkit.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"contextkit {__version__}"


def test_console_script_module_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "langchain_contextkit.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert __version__ in done.stdout


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "count" in capsys.readouterr().out


def test_count_prints_estimate_and_exact_per_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    english = tmp_path / "en.txt"
    english.write_text(
        "Meals are capped at 80 per day, no receipt needed.\n" * 20, encoding="utf-8"
    )
    chinese = tmp_path / "zh.txt"
    chinese.write_text("餐费每天上限八十元，无需发票。" * 20, encoding="utf-8")
    assert main(["count", str(english), str(chinese)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "estimate" in lines[0]
    assert "cl100k_base" in lines[0]
    exact = tiktoken_counter("cl100k_base")
    for path, line in zip((english, chinese), lines[1:], strict=True):
        text = path.read_text(encoding="utf-8")
        cells = line.split()
        assert cells[0] == str(path)
        assert cells[2] == f"{count_tokens(text):,}"
        assert cells[3] == f"{exact(text):,}"


def test_count_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.md"
    path.write_text("# Title\n\nSome text.\n", encoding="utf-8")
    assert main(["count", "--json", str(path)]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row == {
        "path": str(path),
        "chars": len(path.read_text(encoding="utf-8")),
        "estimate": count_tokens(path.read_text(encoding="utf-8")),
        "exact": tiktoken_counter("cl100k_base")(path.read_text(encoding="utf-8")),
    }


def test_count_missing_file_fails_but_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ok.txt"
    path.write_text("hello world", encoding="utf-8")
    assert main(["count", str(tmp_path / "missing.txt"), str(path)]) == 1
    captured = capsys.readouterr()
    assert "missing.txt" in captured.err
    assert str(path) in captured.out


def test_count_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("hello world"))
    assert main(["count", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["estimate"] == 3


def test_count_without_tiktoken_shows_na(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.txt"
    path.write_text("hello world", encoding="utf-8")
    assert main(["count", "--encoding", "no_such_encoding", str(path)]) == 0
    captured = capsys.readouterr()
    assert "n/a" in captured.out
    assert "no exact counts" in captured.err


def test_count_undecodable_bytes_do_not_abort(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "binary.bin"
    path.write_bytes(b"abc\xff\xfe def")
    assert main(["count", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["chars"] == 9
