"""The argument policy: turn one pipeline stage into an argv the tool will run, or refuse.

Options are read as GNU getopt reads them (clusters, attached values, options after
operands, `--`), so the policy sees the split the command will see; every path, operand
or option value, is then confined to the workspace and globs are expanded inside it.
The policy holds on its own, without the bubblewrap sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_contextkit.tools.terminal._commands import (
    FIND_PRIMARIES,
    FIND_REFUSED,
    CommandSpec,
    Kind,
    Operands,
)
from langchain_contextkit.tools.terminal._lex import Refusal, Word

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.tools.terminal._paths import Workspace

__all__ = ["MAX_ARGS", "check_find", "check_stage"]

MAX_ARGS = 10_000
"""Most arguments one stage may have after glob expansion."""

_NEWER_XY = re.compile(r"-newer[aBcmt][aBcmt]")
_FIND_LEADING_LEVEL = re.compile(r"-O\d*")


@dataclass(frozen=True, slots=True)
class _Value:
    """An option's value and what it is."""

    text: str
    kind: Kind
    option: str


@dataclass(slots=True)
class _Parsed:
    """A stage's words sorted into options, values and operands (GNU getopt's way)."""

    operands: list[int]
    """Indexes of the operand words, in order."""
    values: list[_Value]
    """Option values, to vet."""
    script_given: bool = False
    """Whether an option supplied the pattern or program (`grep -e`)."""


def _options_help(name: str, spec: CommandSpec) -> str:
    shorts = sorted(spec.flags + "".join(spec.short_values))
    longs = sorted([*spec.long_flags, *spec.long_values, *spec.long_optional])
    return f"Options {name} accepts here: " + " ".join([*(f"-{c}" for c in shorts), *longs])


def _refuse_option(name: str, option: str, spec: CommandSpec) -> Refusal:
    reason = spec.refused.get(option)
    if reason:
        return Refusal(f"{name} {option} is not allowed: {reason}.")
    return Refusal(f"{name}: option '{option}' is not allowed. {_options_help(name, spec)}.")


def _next_word(words: Sequence[Word], i: int, name: str, option: str) -> str:
    if i >= len(words):
        msg = f"{name}: option '{option}' needs a value."
        raise Refusal(msg)
    return words[i].text


def _parse_long(words: Sequence[Word], i: int, name: str, spec: CommandSpec, out: _Parsed) -> int:
    """Parse the long option at `words[i]`; return the index of the next word."""
    option, eq, value = words[i].text.partition("=")
    known = option in spec.long_flags or option in spec.long_values or option in spec.long_optional
    if option in spec.refused or not known:
        # Exact names only: GNU would also take a unique prefix (`--out` for `--output`),
        # the usual way past a list of refused names.
        raise _refuse_option(name, option, spec)
    out.script_given = out.script_given or option in spec.script_options
    if option in spec.long_flags:
        if eq:
            msg = f"{name}: option '{option}' takes no value."
            raise Refusal(msg)
        return i + 1
    if option in spec.long_values:
        if not eq:
            value = _next_word(words, i + 1, name, option)
        out.values.append(_Value(value, spec.long_values[option], option))
        return i + 1 if eq else i + 2
    if eq:  # an optional value is only ever attached with '='
        out.values.append(_Value(value, spec.long_optional[option], option))
    return i + 1


def _parse_short(words: Sequence[Word], i: int, name: str, spec: CommandSpec, out: _Parsed) -> int:
    """Parse the short-option cluster at `words[i]`; return the index of the next word."""
    text = words[i].text
    if spec.numeric_option and text[1:].isdigit():
        return i + 1
    for j, char in enumerate(text[1:], start=1):
        option = f"-{char}"
        if option in spec.refused:
            raise _refuse_option(name, option, spec)
        if char in spec.flags:
            continue
        kind = spec.short_values.get(char)
        if kind is None:
            raise _refuse_option(name, option, spec)
        out.script_given = out.script_given or option in spec.script_options
        rest = text[j + 1 :]
        if not rest:
            out.values.append(_Value(_next_word(words, i + 1, name, option), kind, option))
            return i + 2
        if not spec.attached_values:
            msg = f"{name}: give the value of {option} as the next word ({option} VALUE)."
            raise Refusal(msg)
        out.values.append(_Value(rest, kind, option))
        return i + 1
    return i + 1


def _parse(name: str, spec: CommandSpec, words: Sequence[Word]) -> _Parsed:
    out = _Parsed(operands=[], values=[])
    i = 0
    options_done = False
    while i < len(words):
        text = words[i].text
        if options_done or text == "-" or not text.startswith("-"):
            out.operands.append(i)
            # Without GNU permutation (gawk) the first operand ends the options.
            options_done = options_done or not spec.permute
            i += 1
        elif text == "--":
            options_done = True
            i += 1
        elif text.startswith("--"):
            i = _parse_long(words, i, name, spec, out)
        else:
            i = _parse_short(words, i, name, spec, out)
    return out


def _check_value(value: _Value, workspace: Workspace, cwd: str) -> None:
    text, kind = value.text, value.kind
    if kind is Kind.TEXT:
        return
    if kind is Kind.NAMES0:
        workspace.check_name_list(text, cwd, "\0")
    elif kind is Kind.NAMES_NL:
        workspace.check_name_list(text, cwd, "\n")
    elif kind is Kind.INPUT_LIST:
        for part in text.split(":"):
            if part:
                workspace.check_input(workspace.resolve(part, cwd), part)
    elif kind is Kind.INPUT:
        if text != "-":  # '-' is standard input: the previous stage or nothing
            workspace.check_input(workspace.resolve(text, cwd), text)
    else:
        workspace.resolve(text, cwd)


def check_stage(
    name: str, spec: CommandSpec, words: Sequence[Word], workspace: Workspace, cwd: str
) -> list[str]:
    """Check one stage's arguments against its command's spec and return the argv tail.

    That is the spec's injected options, then the words in order with path globs
    expanded; `Refusal` for an unknown or refused option or a path outside the root.
    """
    if spec.operands is Operands.TEXT:
        return [word.text for word in words]
    parsed = _parse(name, spec, words)
    for value in parsed.values:
        _check_value(value, workspace, cwd)
        if value.option in spec.script_options:
            _check_script(name, spec, value.text)
    script = None
    if spec.operands is Operands.SCRIPT_THEN_PATHS and not parsed.script_given:
        if not parsed.operands:
            msg = f"{name} needs a pattern or script."
            raise Refusal(msg)
        script = parsed.operands[0]
        _check_script(name, spec, words[script].text)
    paths = [i for i in parsed.operands if i != script and words[i].text != "-"]
    if spec.max_operands is not None and len(paths) > spec.max_operands:
        msg = f"{name} takes at most {spec.max_operands} file here: {spec.max_operands_reason}."
        raise Refusal(msg)
    expanded = {i: _expand_path(words[i], spec, workspace, cwd) for i in paths}
    args: list[str] = list(spec.inject)
    for i, word in enumerate(words):
        args.extend(expanded.get(i, (word.text,)))
    if len(args) > MAX_ARGS:
        msg = f"More than {MAX_ARGS} arguments; narrow the globs."
        raise Refusal(msg)
    return args


def _check_script(name: str, spec: CommandSpec, script: str) -> None:
    if spec.script_refused is not None and spec.script_refused[0].search(script):
        msg = f"{name}: this script is not allowed: {spec.script_refused[1]}."
        raise Refusal(msg)


def _expand_path(word: Word, spec: CommandSpec, workspace: Workspace, cwd: str) -> list[str]:
    expanded = workspace.expand(word, cwd)
    for text in expanded:
        resolved = workspace.resolve(text, cwd)
        if spec.reads:
            workspace.check_input(resolved, text)
    return expanded


def check_find(words: Sequence[Word], workspace: Workspace, cwd: str) -> list[str]:
    """Check `find`'s arguments: leading options, starting points, then the expression.

    find does not use getopt: starting points come before the first word starting with
    `-` (or `!`, `(`, `)`, `,`) and are confined (globs expanded); each expression word
    takes a fixed number of arguments.
    """
    args, i = _find_leading_options(words)
    while i < len(words) and not _starts_find_expression(words[i].text):
        args.extend(_expand_path(words[i], _FIND_SPEC_FOR_PATHS, workspace, cwd))
        i += 1
    while i < len(words):
        text = words[i].text
        arity = _find_arity(text)
        args.append(text)
        i += 1
        if arity == 0:
            continue
        value = _next_word(words, i, "find", text)
        if isinstance(arity, Kind):
            _check_value(_Value(value, arity, text), workspace, cwd)
        args.append(value)
        i += 1
    if len(args) > MAX_ARGS:
        msg = f"More than {MAX_ARGS} arguments; narrow the globs."
        raise Refusal(msg)
    return args


def _find_leading_options(words: Sequence[Word]) -> tuple[list[str], int]:
    """-H and -P (starting points are confined anyway), -D DEBUG, -O LEVEL; -L refused."""
    args: list[str] = []
    i = 0
    while i < len(words):
        text = words[i].text
        if text in FIND_REFUSED:
            msg = f"find {text} is not allowed: {FIND_REFUSED[text]}."
            raise Refusal(msg)
        if text == "-D":
            args.extend((text, _next_word(words, i + 1, "find", "-D")))
            i += 2
        elif text in {"-H", "-P"} or _FIND_LEADING_LEVEL.fullmatch(text):
            args.append(text)
            i += 1
        else:
            break
    return args, i


def _find_arity(text: str) -> int | Kind:
    """How many arguments an expression word takes (or its argument's kind); refuse others."""
    if text in FIND_REFUSED:
        msg = f"find {text} is not allowed: {FIND_REFUSED[text]}."
        raise Refusal(msg)
    arity = FIND_PRIMARIES.get(text)
    if arity is not None:
        return arity
    if _NEWER_XY.fullmatch(text):
        return Kind.TEXT if text.endswith("t") else Kind.PATH
    if text == "--":
        msg = "find: '--' is not needed here; write ./NAME for a name starting with '-'."
    elif text.startswith("-"):
        msg = f"find: '{text}' is not allowed. {_find_help()}"
    else:
        msg = (
            f"find: '{text}' is out of place: starting points come before the "
            "expression, and each test takes a fixed number of arguments."
        )
    raise Refusal(msg)


# find's starting points are walked, not read, so FIFOs and devices among them are fine.
_FIND_SPEC_FOR_PATHS = CommandSpec(reads=False)


def _starts_find_expression(text: str) -> bool:
    return (text.startswith("-") and len(text) > 1) or text in {"!", "(", ")", ","}


def _find_help() -> str:
    names = sorted(n for n in FIND_PRIMARIES if n.startswith("-") and not n.startswith("--"))
    return "Expression words find accepts here: " + " ".join([*names, "-newerXY"]) + "."
