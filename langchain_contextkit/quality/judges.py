"""Judges for `evaluate`: the LangSmith / openevals evaluator shape, and three built-ins.

A judge scores one answer: ``(inputs, outputs, reference) -> float | bool | dict``, sync
or async. `inputs` is ``{"question": ...}``, `outputs` is ``{"answer": ...}`` and
`reference` is the case's reference as given. A dict result is LangSmith's feedback
shape, ``{"key": ..., "score": ..., "comment": ...}``, the one openevals evaluators
return. A callable whose parameters are named the way LangSmith names them (``inputs``,
``outputs``, ``reference_outputs``; ``reference`` too), or that takes ``**kwargs`` as
openevals' evaluators do, is called with keywords; any other with three positional
arguments. So a user's existing evaluators plug in without LangSmith.

The built-ins compare the answer with the reference (its ``"answer"`` when the
reference is a dict): ``"exact"`` (equal, spaces trimmed), ``"contains"`` (the reference
occurs in the answer), ``"regex"`` (the reference is a pattern the answer matches), and a
compiled pattern (the answer matches it, whatever the reference).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain_contextkit.errors import ConfigError

__all__ = ["EvalJudge", "JudgeScore", "JudgeSpec", "judge_of"]

EvalJudge = Callable[..., Any]
"""``(inputs, outputs, reference) -> float | bool | dict`` (or an awaitable of one)."""

JudgeSpec = EvalJudge | Literal["exact", "contains", "regex"] | re.Pattern[str]
"""What `evaluate`'s `judge=` takes: a judge, a built-in's name, or a pattern."""

_KEYWORDS = frozenset({"inputs", "outputs", "reference_outputs", "reference"})


@dataclass(frozen=True, slots=True)
class JudgeScore:
    """One judged answer: the feedback key, the score and the judge's comment."""

    key: str
    score: float
    comment: str | None = None


ScoreAnswer = Callable[[Mapping[str, Any], Mapping[str, Any], Any], Awaitable[JudgeScore]]
"""A judge normalised: always async, always a `JudgeScore`."""


def judge_of(judge: object) -> tuple[str, ScoreAnswer]:
    """The judge's name and its normalised scorer.

    Raises:
        ConfigError: On an unknown built-in name, or a judge that is not callable.
    """
    if isinstance(judge, str):
        if judge not in _BUILT_IN:
            msg = f"judge must be one of {sorted(_BUILT_IN)} or a callable, got {judge!r}"
            raise ConfigError(msg)
        return judge, _scorer(judge, _BUILT_IN[judge], keywords=None)
    if isinstance(judge, re.Pattern):
        pattern = judge

        def matches(_inputs: Any, outputs: Mapping[str, Any], _reference: Any) -> bool:  # noqa: ANN401
            return pattern.search(str(outputs.get("answer", ""))) is not None

        return f"regex {pattern.pattern!r}", _scorer("regex", matches, keywords=None)
    if callable(judge):
        name = str(getattr(judge, "__name__", type(judge).__name__))
        return name, _scorer(name, judge, keywords=_keywords(judge))
    msg = f"judge must be a callable, a pattern or a name, got {type(judge).__name__}"
    raise ConfigError(msg)


def _keywords(judge: Callable[..., Any]) -> dict[str, str] | None:
    """How to call `judge` with keywords (ours -> its names), or None for positional."""
    try:
        parameters = inspect.signature(judge).parameters
    except (TypeError, ValueError):  # a builtin without a signature: positional
        return None
    names = set(parameters)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if not names & _KEYWORDS and not takes_any:
        return None
    mapping = {"inputs": "inputs", "outputs": "outputs"}
    # LangSmith's and openevals' name first; ours when that is the one it declares.
    mapping["reference"] = "reference" if "reference" in names else "reference_outputs"
    if not takes_any:
        mapping = {ours: theirs for ours, theirs in mapping.items() if theirs in names}
    return mapping


def _scorer(
    name: str, judge: Callable[..., Any], *, keywords: dict[str, str] | None
) -> ScoreAnswer:
    async def score(
        inputs: Mapping[str, Any],
        outputs: Mapping[str, Any],
        reference: Any,  # noqa: ANN401 - any reference
    ) -> JudgeScore:
        if keywords is None:
            value = judge(inputs, outputs, reference)
        else:
            given = {"inputs": inputs, "outputs": outputs, "reference": reference}
            value = judge(**{theirs: given[ours] for ours, theirs in keywords.items()})
        if inspect.isawaitable(value):
            value = await value
        return _as_score(name, value)

    return score


def _as_score(name: str, value: object) -> JudgeScore:
    """A judge's return value as a `JudgeScore` (a number, a bool, or a feedback dict)."""
    comment = None
    key = name
    if isinstance(value, Mapping):
        key = str(value.get("key") or name)
        comment = None if value.get("comment") is None else str(value["comment"])
        value = value.get("score")
    if isinstance(value, (bool, int, float)):
        return JudgeScore(key, float(value), comment)
    msg = (
        f"judge {name!r} returned {value!r}: a judge returns a number, a bool, or a dict "
        'with a numeric "score"'
    )
    raise TypeError(msg)


def _expected(reference: Any) -> str:  # noqa: ANN401 - any reference
    if isinstance(reference, Mapping):
        return str(reference.get("answer", ""))
    return "" if reference is None else str(reference)


def _exact(_inputs: Any, outputs: Mapping[str, Any], reference: Any) -> bool:  # noqa: ANN401
    return str(outputs.get("answer", "")).strip() == _expected(reference).strip()


def _contains(_inputs: Any, outputs: Mapping[str, Any], reference: Any) -> bool:  # noqa: ANN401
    return _expected(reference) in str(outputs.get("answer", ""))


def _regex(_inputs: Any, outputs: Mapping[str, Any], reference: Any) -> bool:  # noqa: ANN401
    pattern = reference if isinstance(reference, re.Pattern) else re.compile(_expected(reference))
    return pattern.search(str(outputs.get("answer", ""))) is not None


_BUILT_IN: dict[str, Callable[..., Any]] = {
    "exact": _exact,
    "contains": _contains,
    "regex": _regex,
}
