"""Split a terminal command line into pipeline stages of words, without a shell.

Quoting follows POSIX shell (as `shlex.split` does); everything a shell would *do* with
the rest (sequencing, redirections, substitutions, subshells, comments, `~`, newlines)
is refused, and `|` is the one operator kept. Unlike `shlex` the scanner remembers which
characters were quoted, so only an unquoted `|` splits and only unquoted `*?[` glob.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass

__all__ = ["MAX_COMMAND_CHARS", "MAX_STAGES", "Refusal", "Word", "split_pipeline"]

MAX_COMMAND_CHARS = 8_000
"""Longest command line accepted; a model never needs more, a flood is refused early."""

MAX_STAGES = 8
"""Most commands one pipeline may chain."""

_BLANKS = " \t"
# C0 controls other than tab, and DEL: never meaningful in a command, and terminal escape
# sequences in arguments would end up in the model's output.
_CONTROL = frozenset({*map(chr, range(0x20)), "\x7f"} - {"\t"})
_GLOB_CHARS = "*?["
# Characters after `$` that a shell would expand (variables, parameters, substitutions,
# ANSI-C and locale quoting). A `$` before anything else is literal in a shell too.
_EXPANDS_AFTER_DOLLAR = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_{(@*#?$!-'\""
)
# In double quotes `$'` and `$"` are literal (ANSI-C and locale quoting work unquoted only).
_EXPANDS_IN_DQUOTES = _EXPANDS_AFTER_DOLLAR - {"'", '"'}
# Inside double quotes a backslash escapes only these (POSIX); elsewhere it is literal.
_DQUOTE_ESCAPABLE = frozenset('$`"\\')
_ONLY_PIPES = (
    "Only simple commands and pipelines of allowed commands joined by | are accepted; "
    "make one call per command."
)


class Refusal(Exception):  # noqa: N818 - a verdict, not a failure of the code
    """A command the tool will not run; the message tells the model what it may do."""


@dataclass(frozen=True, slots=True)
class Word:
    """One argument as the command will receive it."""

    text: str
    """The argument with quotes removed."""

    pattern: str | None = None
    """A glob pattern (quoted parts escaped) when the word has unquoted `*`, `?` or `[`."""


class _WordBuilder:
    """Accumulates one word's characters, remembering which ones were quoted."""

    __slots__ = ("glob", "pattern", "started", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.pattern: list[str] = []
        self.glob = False
        self.started = False

    def add(self, chars: str, *, quoted: bool) -> None:
        self.started = True
        self.text.append(chars)
        if quoted:
            self.pattern.append(glob.escape(chars))
        else:
            self.pattern.append(chars)
            self.glob = self.glob or any(c in _GLOB_CHARS for c in chars)

    def build(self) -> Word:
        text = "".join(self.text)
        return Word(text, "".join(self.pattern) if self.glob else None)


def _refuse_control(command: str) -> None:
    if "\x00" in command:
        msg = "The command contains a NUL character; arguments cannot hold NUL bytes."
        raise Refusal(msg)
    if "\n" in command or "\r" in command:
        msg = f"Newlines (and so here-docs) are not accepted. {_ONLY_PIPES}"
        raise Refusal(msg)
    bad = sorted({f"U+{ord(c):04X}" for c in command if c in _CONTROL})
    if bad:
        msg = f"The command contains control characters ({', '.join(bad)})."
        raise Refusal(msg)


_OPERATOR_MESSAGES = {
    "&&": f"'&&' is not accepted. {_ONLY_PIPES}",
    "||": f"'||' is not accepted. {_ONLY_PIPES}",
    "|&": "'|&' is not accepted; use a plain | between commands.",
    ";": f"';' is not accepted. {_ONLY_PIPES}",
    "&": f"'&' (background jobs) is not accepted. {_ONLY_PIPES}",
    "<": "Redirections and here-docs ('<') are not accepted: commands read the files "
    "named as their arguments.",
    ">": "Redirections ('>') are not accepted: output comes back to you, nothing is written.",
    "(": "Subshells ('(') are not accepted; quote a literal parenthesis.",
    ")": "Subshells (')') are not accepted; quote a literal parenthesis.",
    "`": "Command substitution (backticks) is not accepted; quote a literal backtick "
    "with single quotes.",
}


def _operator_refusal(char: str, following: str) -> Refusal:
    message = _OPERATOR_MESSAGES.get(char + following) or _OPERATOR_MESSAGES[char]
    return Refusal(message)


def _dollar_refusal() -> Refusal:
    return Refusal(
        "$ expansion ($VAR, ${...}, $(...)) is not accepted: there are no variables "
        "here. For a literal $ (a regex anchor, say) use single quotes: grep 'end$' file"
    )


def split_pipeline(command: str) -> list[list[Word]]:
    """Split `command` into stages (split at unquoted `|`), each a list of words.

    Args:
        command: The command line as the model wrote it.

    Returns:
        One list of words per pipeline stage, none of them empty.

    Raises:
        Refusal: The line uses shell syntax the tool does not run, or is empty.
    """
    if len(command) > MAX_COMMAND_CHARS:
        msg = f"The command is longer than {MAX_COMMAND_CHARS} characters."
        raise Refusal(msg)
    _refuse_control(command)
    stages = _Scanner(command).scan()
    if any(not stage for stage in stages):
        msg = "Empty command." if len(stages) == 1 else "A pipeline stage is empty."
        raise Refusal(msg)
    if len(stages) > MAX_STAGES:
        msg = f"At most {MAX_STAGES} commands can be joined in one pipeline."
        raise Refusal(msg)
    return stages


class _Scanner:
    """One left-to-right pass over a command line; each `_at_*` consumes some characters."""

    __slots__ = ("command", "i", "stages", "word")

    def __init__(self, command: str) -> None:
        self.command = command
        self.i = 0
        self.stages: list[list[Word]] = [[]]
        self.word = _WordBuilder()

    def scan(self) -> list[list[Word]]:
        command = self.command
        while self.i < len(command):
            char = command[self.i]
            following = command[self.i + 1 : self.i + 2]
            if char in _BLANKS:
                self._end_word()
            elif char == "'":
                self._at_single_quote()
            elif char == '"':
                self._at_double_quote()
            elif char == "\\":
                self._at_backslash(following)
            elif char == "|" and following not in ("|", "&"):
                self._end_word()
                self.stages.append([])
            elif char in "|;&<>()`":
                raise _operator_refusal(char, following)
            else:
                self._at_plain(char, following)
            self.i += 1
        self._end_word()
        return self.stages

    def _end_word(self) -> None:
        if self.word.started:
            self.stages[-1].append(self.word.build())
        self.word = _WordBuilder()

    def _at_plain(self, char: str, following: str) -> None:
        if char == "$" and following and following not in _BLANKS + "|":
            raise _dollar_refusal()
        if char == "~" and not self.word.started:
            msg = "~ is not expanded: paths are relative to the workspace (start from '.')."
            raise Refusal(msg)
        if char == "#" and not self.word.started:
            msg = "Comments ('#') are not accepted; quote a literal '#'."
            raise Refusal(msg)
        self.word.add(char, quoted=False)

    def _at_backslash(self, following: str) -> None:
        if not following:
            msg = "The command ends with a lone backslash."
            raise Refusal(msg)
        self.word.add(following, quoted=True)
        self.i += 1

    def _at_single_quote(self) -> None:
        close = self.command.find("'", self.i + 1)
        if close < 0:
            msg = "Unterminated single quote."
            raise Refusal(msg)
        self.word.add(self.command[self.i + 1 : close], quoted=True)
        self.i = close

    def _at_double_quote(self) -> None:
        command, i = self.command, self.i + 1
        chunk: list[str] = []
        while i < len(command):
            char = command[i]
            if char == '"':
                self.word.add("".join(chunk), quoted=True)
                self.i = i
                return
            if char == "\\" and command[i + 1 : i + 2] in _DQUOTE_ESCAPABLE:
                chunk.append(command[i + 1])
                i += 2
                continue
            if char == "`":
                raise _operator_refusal(char, "")
            if char == "$" and command[i + 1 : i + 2] in _EXPANDS_IN_DQUOTES:
                raise _dollar_refusal()
            chunk.append(char)
            i += 1
        msg = "Unterminated double quote."
        raise Refusal(msg)
