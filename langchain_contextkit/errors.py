"""Errors raised by langchain-contextkit.

Every error this library raises on purpose derives from one base class, so callers
can catch the whole family at once:

```
ContextKitError                 base of everything below
├── ConfigError                 (also a ValueError) a bad argument or configuration value
├── TokenizerUnavailableError   a tiktoken encoding could not be loaded offline
├── ContextWindowExceeded       what must be kept does not fit the token budget (also
│                               langchain-core's ContextOverflowError)
├── InvalidMessagesError        (also a ValueError) a message list a provider would reject
├── NoteError                   a note store refused a call
│   ├── NoteNotFoundError       (also a LookupError) no note has that id
│   ├── InvalidNoteError        (also a ValueError) a bad id, type, title, tag or content
│   └── NoteLimitError          the store is full (`max_notes`) or the content too long
├── SearchUnavailableError      this Python's SQLite lacks FTS5, which BM25 search needs
├── ScriptExhaustedError        a `testing.ScriptedChatModel` ran out of scripted answers
├── ContextQualityError         an assembled request failed its `QualityGate` (the model
│                               was not called; `.result` says which checks failed)
├── BuildInputError             `contextkit build` cannot use its input (folder, history)
├── LedgerLogError              (also a ValueError) a ledger log that cannot be read; names
│                               the line
├── PlotUnavailableError        (also an ImportError) a chart needs matplotlib, not installed
└── ModelSetupError             `contextkit demo` cannot create the requested model
    └── ModelSpecError          ... because `--model` itself is wrong (a usage error)
```

`ConfigError` also subclasses `ValueError`, so code that already guards against
`ValueError` keeps working; `ContextWindowExceeded` also subclasses langchain-core's
`ContextOverflowError`, so code written for a provider's overflow catches ours too.
`ContextQualityWarning` (a `UserWarning`, not an error) is what a gate set to
``on_gate_fail="warn"`` emits instead of raising `ContextQualityError`.
Errors meant for a *model* to read (a tool called with a bad argument) are
`langchain_core.tools.ToolException` subclasses and live beside their tools.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from langchain_core.exceptions import ContextOverflowError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "BuildInputError",
    "ConfigError",
    "ContextKitError",
    "ContextQualityError",
    "ContextQualityWarning",
    "ContextWindowExceeded",
    "InvalidMessagesError",
    "InvalidNoteError",
    "LedgerLogError",
    "ModelSetupError",
    "ModelSpecError",
    "NoteError",
    "NoteLimitError",
    "NoteNotFoundError",
    "PlotUnavailableError",
    "ScriptExhaustedError",
    "SearchUnavailableError",
    "TokenizerUnavailableError",
]


class _Problem(Protocol):
    """What `InvalidMessagesError` needs of a problem (`messages.MessageProblem` is one).

    A protocol, so this module imports nothing of the library: every module may import it.
    """

    @property
    def index(self) -> int:
        """Position of the offending message."""
        ...

    @property
    def code(self) -> str:
        """A stable machine-readable name for the rule broken."""
        ...


class ContextKitError(Exception):
    """Base class of every error raised on purpose by langchain-contextkit."""


class ConfigError(ContextKitError, ValueError):
    """An argument or configuration value is out of range or inconsistent."""


class TokenizerUnavailableError(ContextKitError):
    """A tokenizer (for example a tiktoken encoding) cannot be loaded on this machine."""


class ContextWindowExceeded(ContextKitError, ContextOverflowError):  # noqa: N818 - the seed's name
    """What must be kept verbatim already exceeds the token budget.

    Raised instead of silently truncating: the caller decides what to drop.
    """

    def __init__(self, message: str, *, required: int, budget: int) -> None:
        """Record how many tokens were required and how many the budget allowed.

        Args:
            message: Human-readable explanation.
            required: Tokens that must be kept.
            budget: Tokens the budget allows.
        """
        super().__init__(message)
        self.required = required
        self.budget = budget


class InvalidMessagesError(ContextKitError, ValueError):
    """A message list breaks a rule chat providers enforce (see `messages.py`)."""

    def __init__(self, problems: Sequence[_Problem]) -> None:
        """Record the problems found.

        Args:
            problems: Every problem, in list order (at least one).
        """
        shown = "; ".join(str(p) for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""  # noqa: PLR2004
        super().__init__(f"invalid message list: {shown}{more}")
        self.problems = tuple(problems)


class NoteError(ContextKitError):
    """A note store refused a call; the message says why and what to do instead.

    [`NoteTool`][langchain_contextkit.tools.notes.NoteTool] hands these messages to the
    model as `ToolException`s: write them for a reader who can only change the call.
    """


class NoteNotFoundError(NoteError, LookupError):
    """No note has the requested id (it never existed or was deleted)."""


class InvalidNoteError(NoteError, ValueError):
    """A note id, type, title, tag or content is malformed."""


class NoteLimitError(NoteError):
    """The store already holds `max_notes` notes, or a content exceeds its size cap."""


class SearchUnavailableError(ContextKitError):
    """This Python's SQLite lacks the FTS5 extension that BM25 search needs."""


class ScriptExhaustedError(ContextKitError):
    """A `ScriptedChatModel` was called more often than its script has answers."""


class _GateOutcome(Protocol):
    """What `ContextQualityError` needs of a gate's result (`quality.GateResult` is one)."""

    @property
    def passed(self) -> bool:
        """Whether every applicable check passed."""
        ...


class ContextQualityError(ContextKitError):
    """An assembled request failed its quality gate; nothing was sent to the model.

    `result` is the gate's result (a `GateResult`): every check with its figure.
    """

    def __init__(self, message: str, *, result: _GateOutcome) -> None:
        """Record the gate's result.

        Args:
            message: Human-readable explanation (the failed checks).
            result: The gate's result.
        """
        super().__init__(message)
        self.result = result


class ContextQualityWarning(UserWarning):
    """An assembled request failed its quality gate, and the gate only warns."""


class BuildInputError(ContextKitError):
    """Input `contextkit build` cannot use: a missing folder, a bad history file, no documents."""


class LedgerLogError(ContextKitError, ValueError):
    """A ledger log (JSON lines) that cannot be read: the message names the file and line."""


class PlotUnavailableError(ContextKitError, ImportError):
    """A chart was asked for, but matplotlib is not installed (the ``plot`` extra)."""


class ModelSetupError(ContextKitError):
    """The requested model cannot be created; the message is one line for the user."""


class ModelSpecError(ModelSetupError):
    """`--model` names no provider `init_chat_model` knows: the argument is wrong."""


# Validation shared by every configuration: one wording for every bad value. The helpers below raise
# the errors above; they stay out of `__all__`.
T = TypeVar("T")


def check_count(name: str, value: object, *, minimum: int) -> None:
    """Refuse anything but an int (bools excluded) of at least `minimum`.

    Raises:
        ConfigError: Naming `name` and the value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"{name} must be an int >= {minimum}, got {value!r}."
        raise ConfigError(msg)


def check_fraction(
    name: str, value: float, *, low_open: bool = False, high_open: bool = False
) -> None:
    """Refuse anything but a number in [0, 1] (or the open ends asked for).

    Raises:
        ConfigError: Naming `name`, the interval and the value.
    """
    too_low = value <= 0 if low_open else value < 0
    too_high = value >= 1 if high_open else value > 1
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or too_low
        or too_high
    ):
        low, high = "(0" if low_open else "[0", "1)" if high_open else "1]"
        msg = f"{name} must be in {low}, {high}, got {value!r}."
        raise ConfigError(msg)


def from_known_fields(cls: type[T], data: Mapping[str, Any]) -> T:
    """Build the dataclass `cls` from `data`; an unknown key is an error that names it.

    Raises:
        ConfigError: On an unknown key (or, from `cls` itself, an invalid value).
    """
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        msg = f"unknown {cls.__name__} keys: {unknown}; known: {sorted(known)}."
        raise ConfigError(msg)
    return cls(**data)


def one_of(name: str, given: T | None, alias_name: str, alias: T | None) -> T | None:
    """The argument passed as `name` or as its documented alias, refusing both at once.

    Raises:
        ConfigError: When both are given and differ.
    """
    if given is not None and alias is not None and given is not alias:
        msg = f"pass {name}= once: {alias_name}= is its alias"
        raise ConfigError(msg)
    return given if given is not None else alias
