"""The terminal's parsing and argument policy on their own (no process is started)."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings, strategies as st

from langchain_contextkit.tools.terminal._commands import COMMANDS
from langchain_contextkit.tools.terminal._exec import CappedText
from langchain_contextkit.tools.terminal._lex import Refusal, Word, split_pipeline
from langchain_contextkit.tools.terminal._paths import Workspace
from langchain_contextkit.tools.terminal._policy import check_find, check_stage

if TYPE_CHECKING:
    from pathlib import Path


def words(command: str) -> list[list[str]]:
    return [[w.text for w in stage] for stage in split_pipeline(command)]


# -- lexer ------------------------------------------------------------------------------


def test_quoting_follows_posix_rules() -> None:
    assert words("grep -n 'a|b' \"c d\" e\\ f") == [["grep", "-n", "a|b", "c d", "e f"]]
    assert words("grep 'end$' x") == [["grep", "end$", "x"]]
    assert words('echo "a\\"b" "\\$" \'\\n\'') == [["echo", 'a"b', "$", "\\n"]]
    assert words("echo '' x") == [["echo", "", "x"]]
    assert words("ls | wc -l") == [["ls"], ["wc", "-l"]]
    assert words("echo a$ b") == [["echo", "a$", "b"]]


def test_only_unquoted_glob_characters_are_globs() -> None:
    (stage,) = split_pipeline("ls *.py '*.md' a[0-9]\\?")
    assert stage[1] == Word("*.py", "*.py")
    assert stage[2] == Word("*.md", None)
    assert stage[3] == Word("a[0-9]?", "a[0-9][?]")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("ls; id", "';' is not accepted"),
        ("ls && id", "'&&' is not accepted"),
        ("ls || id", "'||' is not accepted"),
        ("ls &", "background"),
        ("ls > x", "Redirections"),
        ("cat < x", "here-docs"),
        ("echo $(id)", "$ expansion"),
        ("echo `id`", "backticks"),
        ('echo "`id`"', "backticks"),
        ('echo "$HOME"', "$ expansion"),
        ("echo ${HOME}", "$ expansion"),
        ("echo $'x'", "$ expansion"),
        ("ls\nid", "Newlines"),
        ("(ls)", "Subshells"),
        ("ls ~", "~ is not expanded"),
        ("ls # x", "Comments"),
        ("ls 'x", "Unterminated single quote"),
        ('ls "x', "Unterminated double quote"),
        ("ls \\", "lone backslash"),
        ("ls |", "stage is empty"),
        ("| ls", "stage is empty"),
        ("", "Empty command"),
        ("ls\0", "NUL"),
        ("ls \x1b[0m", "control characters"),
        ("ls |& wc", "'|&'"),
        (" | ".join(["ls"] * 9), "At most 8"),
        ("x" * 9000, "longer than"),
    ],
)
def test_shell_syntax_is_refused_with_a_reason(command: str, message: str) -> None:
    with pytest.raises(Refusal, match=re.escape(message)):
        split_pipeline(command)


_PLAIN = st.text(
    alphabet=st.characters(
        codec="utf-8",
        exclude_characters="|;&<>()`$~#*?[\\\"'\n\r\0",
        exclude_categories=("Cc", "Cs"),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(_PLAIN)
def test_plain_text_splits_like_shlex(text: str) -> None:
    expected = shlex.split(text)
    if not expected:
        with pytest.raises(Refusal):
            split_pipeline(text)
    else:
        assert words(text) == [expected]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_either_splits_or_is_refused(text: str) -> None:
    try:
        stages = split_pipeline(text)
    except Refusal as refusal:
        message = str(refusal)
        assert message
    else:
        assert all(stages)
        assert all("\0" not in w.text and "\n" not in w.text for s in stages for w in s)


# -- argument policy ---------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "ws" / "src").mkdir(parents=True)
    (tmp_path / "ws" / "src" / "a.py").write_text("a\n")
    (tmp_path / "ws" / "-n").write_text("dash\n")
    return Workspace(str(tmp_path / "ws"))


def check(ws: Workspace, command: str) -> list[str]:
    (stage,) = split_pipeline(command)
    name = stage[0].text
    if name == "find":
        return check_find(stage[1:], ws, ws.root)
    return check_stage(name, COMMANDS[name], stage[1:], ws, ws.root)


def test_options_are_parsed_like_getopt(ws: Workspace) -> None:
    assert check(ws, "grep -rnA3 -e x --include=*.py src") == [
        "-rnA3",
        "-e",
        "x",
        "--include=*.py",
        "src",
    ]
    assert check(ws, "head -5 src/a.py") == ["-5", "src/a.py"]
    assert check(ws, "sort -k2,2 -t, src/a.py") == ["-k2,2", "-t,", "src/a.py"]
    # Options after operands are options (GNU permutation) and are checked too.
    with pytest.raises(Refusal, match="sort -o is not allowed"):
        check(ws, "sort src/a.py -o out")


def test_glob_matches_starting_with_a_dash_cannot_become_options(ws: Workspace) -> None:
    assert check(ws, "cat *") == ["./-n", "src"]


def test_values_of_path_options_are_confined(ws: Workspace) -> None:
    with pytest.raises(Refusal, match="outside the workspace"):
        check(ws, "grep -e x --exclude-from=../x src")
    with pytest.raises(Refusal, match="outside the workspace"):
        check(ws, "grep -rf../x src")
    assert check(ws, "grep -f src/a.py src") == ["-f", "src/a.py", "src"]


def test_find_expression(ws: Workspace) -> None:
    assert check(ws, "find src -name *.py -newer src/a.py") == [
        "src",
        "-name",
        "*.py",
        "-newer",
        "src/a.py",
    ]
    assert check(ws, "find -H . -maxdepth 1 '(' -type f -o -type d \\) -print") == [
        "-H",
        ".",
        "-maxdepth",
        "1",
        "(",
        "-type",
        "f",
        "-o",
        "-type",
        "d",
        ")",
        "-print",
    ]
    with pytest.raises(Refusal, match="outside the workspace"):
        check(ws, "find . -newermm /etc/passwd")
    assert check(ws, "find . -newermt 2024-01-01") == [".", "-newermt", "2024-01-01"]
    with pytest.raises(Refusal, match="out of place"):
        check(ws, "find . -name x y")
    with pytest.raises(Refusal, match="needs a value"):
        check(ws, "find . -name")


def test_tree_values_must_be_separate_words(ws: Workspace) -> None:
    assert check(ws, "tree -a -L 2 src") == ["-a", "-L", "2", "src"]
    with pytest.raises(Refusal, match="next word"):
        check(ws, "tree -L2")


def test_grep_pattern_is_not_a_path_unless_e_is_given(ws: Workspace) -> None:
    assert check(ws, "grep ../../etc src") == ["../../etc", "src"]
    with pytest.raises(Refusal, match="outside"):
        check(ws, "grep -e x ../../etc")


# -- output capping ----------------------------------------------------------------------


def test_capped_text_keeps_head_and_tail_at_line_boundaries() -> None:
    capped = CappedText(40)
    for i in range(100):
        capped.feed(f"line {i:03d}\n".encode())
    head, tail, cut = capped.result()
    assert head.startswith("line 000\n")
    assert tail.endswith("line 099\n")
    assert head.endswith("\n")
    assert len(head) + len(tail) + cut == capped.total_chars == 900
    assert len(head) <= 20
    assert len(tail) <= 20


def test_capped_text_decodes_split_characters() -> None:
    capped = CappedText(1000)
    data = "日本語テキスト".encode()
    for i in range(len(data)):
        capped.feed(data[i : i + 1])
    assert capped.result() == ("日本語テキスト", "", 0)
