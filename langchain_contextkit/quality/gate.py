"""`QualityGate`: assert what a request must (and must not) hold before a model reads it.

A gate is a set of optional thresholds (request tokens, evidence items, required facts,
redundancy between kept items, the retrieval block's share of the window). `check`
evaluates it on a `ContextReport`, a `WindowAssembly`, a `CallLedger` with its request
messages, or any message list, and returns a `GateResult` that lists every check with
its figure. A check whose data the target does not carry (evidence items of a bare
message list, say) is *not applicable*: listed as such, never silently passed.

Three ways to use it: `assert_context_quality` in a test suite; the `quality_gate=`
option of `ContextKitMiddleware` and `context_node` (every assembled request checked,
the result kept in the call's ledger); and `GateResult.to_dict()` for logs and reports.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langchain_core.messages import BaseMessage

from langchain_contextkit.agent.ledger import CallLedger
from langchain_contextkit.agent.plan import WindowAssembly
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval.builder.report import ContextReport
from langchain_contextkit.tokens.count import TokenCounter, count_message_tokens, count_tokens

if TYPE_CHECKING:
    from langchain_contextkit.retrieval.result import FloatArray, RetrievalResult

__all__ = ["Fact", "Figure", "GateCheck", "GateResult", "QualityGate", "assert_context_quality"]

Fact = str | re.Pattern[str]
"""A required fact: a literal substring (case-sensitive) or a compiled pattern (searched)."""


@dataclass(frozen=True, slots=True)
class _Evidence:
    """What a target carries, normalised (None: the target lacks it, with why)."""

    text: str | None
    tokens: int | None
    tokens_how: str
    evidence: int | None
    items: tuple[RetrievalResult, ...] | None
    share: float | None
    share_how: str
    why_not: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class QualityGate:
    """Thresholds a request must meet; every one optional (unset: not checked).

    `check(target)` returns a `GateResult`; `assert_context_quality` raises on a failure
    (for tests); ``ContextKitMiddleware(quality_gate=..., on_gate_fail=...)`` and
    ``context_node(quality_gate=...)`` check every assembled request and keep the result
    in the call's ledger.

    Example:
        ```python
        import re

        from langchain_core.messages import HumanMessage

        from langchain_contextkit.quality import QualityGate

        gate = QualityGate(
            max_request_tokens=200,
            required_facts=["order 1042", re.compile(r"ships? (today|tomorrow)")],
        )
        request = [HumanMessage("Order 1042 ships tomorrow.")]
        result = gate.check(request)
        print(result.passed, result["required_facts"].detail)
        # False missing: 'order 1042'
        print(gate.check([HumanMessage("order 1042 ships today")]).passed)
        # True
        ```
    """

    max_request_tokens: int | None = None
    """The request (system prompt and tool schemas included when the target knows them)
    may take at most this many tokens."""

    min_evidence: int | None = None
    """At least this many items kept in the retrieval block."""

    required_facts: Sequence[Fact] = ()
    """Strings (literal, case-sensitive) or compiled patterns the request text must hold."""

    max_redundancy: float | None = None
    """The most similar pair of kept items may be at most this similar (0 to 1): cosine of
    their embeddings when every kept item carries one, else token-shingle Jaccard."""

    max_retrieval_share: float | None = None
    """The retrieval block may take at most this share of the model's window (0 to 1)."""

    strict: bool = False
    """A check the target lacks the data for fails, instead of being not applicable."""

    token_counter: TokenCounter = count_tokens
    """Counts the text of targets that carry no ledger (a report, a message list)."""

    def __post_init__(self) -> None:
        """Check the thresholds.

        Raises:
            ConfigError: On a negative count, a share outside 0..1, or a fact that is
                neither a string nor a compiled pattern.
        """
        for name in ("max_request_tokens", "min_evidence"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                msg = f"{name} must be an int >= 0 or None, got {value!r}"
                raise ConfigError(msg)
        for name in ("max_redundancy", "max_retrieval_share"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value <= 1
            ):
                msg = f"{name} must be a number from 0 to 1 or None, got {value!r}"
                raise ConfigError(msg)
        facts = (
            (self.required_facts,)
            if isinstance(self.required_facts, (str, re.Pattern))
            else tuple(self.required_facts)
        )
        given: tuple[object, ...] = facts  # checked at run time: callers are not always typed
        for fact in given:
            if not isinstance(fact, (str, re.Pattern)):
                msg = f"required_facts take strings or re.compile(...) patterns, got {fact!r}"
                raise ConfigError(msg)
        object.__setattr__(self, "required_facts", facts)

    def check(self, target: object, *, messages: Sequence[BaseMessage] | None = None) -> GateResult:
        """Evaluate every set threshold on `target`.

        Args:
            target: A `ContextReport` (its text; evidence and redundancy from its kept
                items), a `WindowAssembly` (everything: its ledger, its block's items,
                its messages), a `CallLedger` or its `to_dict()` (as stored in state
                and ledger files: tokens and retrieval share; pass `messages` for the
                facts), or a list of messages (tokens and facts).
            messages: The full request, when the target is a ledger or an assembly
                whose system message is sent beside it: its text is searched for the
                required facts.

        Returns:
            Every check, in the order of the thresholds above.

        Raises:
            TypeError: When `target` is none of the above.
        """
        seen = self._evidence(target, messages)
        checks: list[GateCheck] = []
        if self.max_request_tokens is not None:
            checks.append(self._tokens(seen, self.max_request_tokens))
        if self.min_evidence is not None:
            checks.append(self._min_evidence(seen, self.min_evidence))
        if self.required_facts:
            checks.append(self._facts(seen))
        if self.max_redundancy is not None:
            checks.append(self._redundancy(seen, self.max_redundancy))
        if self.max_retrieval_share is not None:
            checks.append(self._share(seen, self.max_retrieval_share))
        if self.strict:
            checks = [
                dataclasses.replace(c, passed=False, detail=f"not applicable: {c.detail}")
                if c.passed is None
                else c
                for c in checks
            ]
        return GateResult(passed=all(c.passed is not False for c in checks), checks=tuple(checks))

    # -- reading the target ---------------------------------------------------------------

    def _evidence(self, target: object, messages: Sequence[BaseMessage] | None) -> _Evidence:
        text = None if messages is None else _text(messages)
        if isinstance(target, Mapping) and "window" in target and "retrieval" in target:
            target = _ledger_of(target)
        if isinstance(target, ContextReport):
            kept = sum(s.kept for s in target.sources)
            items = target.items if len(target.items) == kept else None
            return _Evidence(
                text=target.text if text is None else text,
                tokens=self.token_counter(target.text),
                tokens_how="the report's text, counted",
                evidence=kept,
                items=items,
                share=None,
                share_how="",
                why_not={
                    "items": "the report does not carry its kept items",
                    "share": "a ContextReport does not know the model's window",
                },
            )
        if isinstance(target, WindowAssembly):
            ledger = target.ledger
            items = target.block.items if target.block is not None else ()
            return _Evidence(
                text=_text(target.messages) if text is None else text,
                tokens=ledger.prompt,
                tokens_how="the call's ledger",
                evidence=len(items),
                items=items,
                share=ledger.retrieval / ledger.window if ledger.window else 0.0,
                share_how=f"{ledger.retrieval} of a {ledger.window}-token window",
            )
        if isinstance(target, CallLedger):
            return _Evidence(
                text=text,
                tokens=target.prompt,
                tokens_how="the call's ledger",
                evidence=None,
                items=None,
                share=target.retrieval / target.window if target.window else 0.0,
                share_how=f"{target.retrieval} of a {target.window}-token window",
                why_not={
                    "text": "a CallLedger holds no text: pass messages=",
                    "evidence": "a CallLedger has no kept items",
                    "items": "a CallLedger has no kept items",
                },
            )
        if isinstance(target, Sequence) and all(isinstance(m, BaseMessage) for m in target):
            sent = list(target) if messages is None else list(messages)
            return _Evidence(
                text=_text(sent),
                tokens=count_message_tokens(sent, self.token_counter),
                tokens_how="the messages, counted",
                evidence=None,
                items=None,
                share=None,
                share_how="",
                why_not={
                    "evidence": "a message list has no kept items",
                    "items": "a message list has no kept items",
                    "share": "a message list does not know the model's window",
                },
            )
        msg = (
            "QualityGate.check takes a ContextReport, a WindowAssembly, a CallLedger or a "
            f"list of messages, got {type(target).__name__}"
        )
        raise TypeError(msg)

    # -- the checks -----------------------------------------------------------------------

    @staticmethod
    def _tokens(seen: _Evidence, limit: int) -> GateCheck:
        name = "max_request_tokens"
        if seen.tokens is None:  # pragma: no cover - every target has a size
            return GateCheck(name, None, None, limit, "the target has no size")
        return GateCheck(name, seen.tokens <= limit, seen.tokens, limit, seen.tokens_how)

    @staticmethod
    def _min_evidence(seen: _Evidence, minimum: int) -> GateCheck:
        name = "min_evidence"
        if seen.evidence is None:
            return GateCheck(name, None, None, minimum, seen.why_not["evidence"])
        detail = "items kept in the retrieval block"
        return GateCheck(name, seen.evidence >= minimum, seen.evidence, minimum, detail)

    def _facts(self, seen: _Evidence) -> GateCheck:
        name = "required_facts"
        facts = tuple(self.required_facts)
        if seen.text is None:
            return GateCheck(name, None, None, len(facts), seen.why_not["text"])
        text = seen.text
        missing = [fact for fact in facts if not _holds(text, fact)]
        present = len(facts) - len(missing)
        detail = (
            "missing: " + ", ".join(_fact_name(f) for f in missing) if missing else "all present"
        )
        return GateCheck(name, not missing, present, len(facts), detail)

    @staticmethod
    def _redundancy(seen: _Evidence, limit: float) -> GateCheck:
        name = "max_redundancy"
        if seen.items is None:
            return GateCheck(name, None, None, limit, seen.why_not["items"])
        found = redundancy(seen.items)
        how = (
            "cosine of embeddings"
            if found.method == "cosine"
            else f"token-shingle Jaccard ({SHINGLE_SIZE}-token shingles)"
        )
        if found.pair is None:
            detail = f"{how}; fewer than two kept items"
        else:
            i, j = found.pair
            a, b = seen.items[i], seen.items[j]
            detail = f"{how}; most similar: items {i + 1} and {j + 1} ({a.source}, {b.source})"
        value = found.value
        passed = value <= limit or math.isclose(value, limit, abs_tol=1e-12)
        return GateCheck(name, passed, value, limit, detail)

    @staticmethod
    def _share(seen: _Evidence, limit: float) -> GateCheck:
        name = "max_retrieval_share"
        if seen.share is None:
            return GateCheck(name, None, None, limit, seen.why_not["share"])
        return GateCheck(name, seen.share <= limit, seen.share, limit, seen.share_how)


_LEDGER_FIELDS = frozenset(f.name for f in dataclasses.fields(CallLedger))


def _ledger_of(data: Mapping[str, Any]) -> CallLedger:
    """A stored ledger (`CallLedger.to_dict()`, maybe with more keys) as a `CallLedger`.

    Raises:
        TypeError: When a part of the ledger is missing.
    """
    known = {key: value for key, value in data.items() if key in _LEDGER_FIELDS}
    try:
        return CallLedger(**known)
    except TypeError as error:
        msg = f"a stored ledger needs every part of CallLedger: {error}"
        raise TypeError(msg) from error


def _text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(m.text for m in messages)


def _holds(text: str, fact: Fact) -> bool:
    if isinstance(fact, str):
        return fact in text
    return fact.search(text) is not None


def _fact_name(fact: Fact) -> str:
    return repr(fact) if isinstance(fact, str) else f"/{fact.pattern}/"


def assert_context_quality(
    target: object,
    gate: QualityGate | None = None,
    *,
    messages: Sequence[BaseMessage] | None = None,
    **thresholds: Any,  # noqa: ANN401 - QualityGate's fields
) -> GateResult:
    """Assert that `target` passes a quality gate: for a test suite (pytest or any).

    Args:
        target: What `QualityGate.check` takes (a report, an assembly, a ledger, messages).
        gate: The gate; `thresholds` override its fields (or build one when None).
        messages: The full request, for a ledger or an assembly (see `QualityGate.check`).
        **thresholds: `QualityGate` fields, e.g. ``max_request_tokens=4000``.

    Returns:
        The result, when it passed.

    Raises:
        AssertionError: When a check failed: one line per failed check with its figure
            and threshold, then the whole result.

    Example:
        ```python
        from langchain_contextkit import CallableSource, ContextBuilder, ContextConfig
        from langchain_contextkit.quality import assert_context_quality

        builder = ContextBuilder(
            ContextConfig(max_tokens=2000),
            sources=[CallableSource("rag", lambda q: ["Order 1042 ships tomorrow."])],
        )
        report = builder.build_report("when does order 1042 ship?")
        assert_context_quality(report, min_evidence=1, required_facts=["ships tomorrow"])
        try:
            assert_context_quality(report, required_facts=["order 1043"])
        except AssertionError as error:
            print(str(error).splitlines()[1])
        # - required_facts: 0 of 1 present; missing: 'order 1043'
        ```
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not this one
    if gate is None:
        gate = QualityGate(**thresholds)
    elif thresholds:
        gate = dataclasses.replace(gate, **thresholds)
    result = gate.check(target, messages=messages)
    if not result.passed:
        lines = [f"context quality gate failed ({len(result.failed)} of {len(result.checks)}):"]
        lines += result.failure_lines()
        lines += ["", str(result)]
        raise AssertionError("\n".join(lines))
    return result


SHINGLE_SIZE = 3
"""Tokens per shingle of the text similarity."""

# A CJK character is a token of its own (those scripts put no spaces between words);
# anything else is a run of letters and digits.
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+")


@dataclass(frozen=True, slots=True)
class Redundancy:
    """The most similar pair of kept items, and how similarity was measured."""

    value: float
    """The largest pairwise similarity (0.0 with fewer than two items)."""
    method: Literal["cosine", "shingles"]
    """``"cosine"`` of embeddings (every item had one) or ``"shingles"`` (Jaccard)."""
    pair: tuple[int, int] | None
    """Positions of the most similar pair (None with fewer than two items)."""


def shingles(text: str, size: int = SHINGLE_SIZE) -> frozenset[tuple[str, ...]]:
    """The set of `size`-token shingles of `text` (lower-cased; one shingle if shorter)."""
    tokens = _TOKEN.findall(text.lower())
    if len(tokens) <= size:
        return frozenset([tuple(tokens)]) if tokens else frozenset()
    return frozenset(tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1))


def _jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _embeddings(items: Sequence[RetrievalResult]) -> FloatArray | None:
    """The items' embeddings as rows of unit vectors, when every item has one of one size."""
    vectors = [item.embedding for item in items]
    if any(v is None for v in vectors):
        return None
    rows = [np.asarray(v, dtype=float).ravel() for v in vectors]
    if len({row.size for row in rows}) != 1 or rows[0].size == 0:
        return None
    matrix: FloatArray = np.vstack(rows)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: FloatArray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


def redundancy(items: Sequence[RetrievalResult]) -> Redundancy:
    """The largest pairwise similarity between `items`.

    Cosine of the embeddings when every item carries one (of one size), else the
    Jaccard similarity of their token shingles (`shingles`).

    Example:
        ```python
        from langchain_contextkit import RetrievalResult
        from langchain_contextkit.quality.gate import redundancy

        items = [
            RetrievalResult("Refunds within 30 days.", 0.9, "rag", embedding=[1.0, 0.0]),
            RetrievalResult("Refunds are allowed for 30 days.", 0.8, "rag", embedding=[1.0, 0.1]),
        ]
        found = redundancy(items)
        print(found.method, round(found.value, 3), found.pair)
        # cosine 0.995 (0, 1)
        ```
    """
    if len(items) < 2:  # noqa: PLR2004 - a pair
        embedded = bool(items) and _embeddings(items) is not None
        return Redundancy(0.0, "cosine" if embedded else "shingles", None)
    unit = _embeddings(items)
    if unit is not None:
        gram = unit @ unit.T
        np.fill_diagonal(gram, -np.inf)
        i, j = divmod(int(np.argmax(gram)), len(items))
        return Redundancy(float(gram[i, j]), "cosine", (min(i, j), max(i, j)))
    sets = [shingles(item.content) for item in items]
    best, pair = -1.0, (0, 1)
    for i, j in combinations(range(len(items)), 2):
        value = _jaccard(sets[i], sets[j])
        if value > best:
            best, pair = value, (i, j)
    return Redundancy(best, "shingles", pair)


Figure = int | float
"""A check's measured figure or threshold."""


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One check of a gate: its figure against its threshold."""

    name: str
    """The threshold's name (`max_request_tokens`, `min_evidence`, ...)."""
    passed: bool | None
    """True or False; None when the target lacks the data (not applicable)."""
    figure: Figure | None
    """What was measured (None when not applicable)."""
    threshold: Figure
    """The gate's threshold (for `required_facts`: how many facts are required)."""
    detail: str
    """How the figure was measured, what is missing, or why the check does not apply."""

    @property
    def applicable(self) -> bool:
        """Whether the target carried the data this check needs."""
        return self.passed is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "name": self.name,
            "passed": self.passed,
            "figure": self.figure,
            "threshold": self.threshold,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        """One line: status, name, figure against threshold, detail."""
        status = {True: "pass", False: "FAIL", None: "n/a "}[self.passed]
        figure = "-" if self.figure is None else _shown(self.figure)
        return (
            f"{status}  {self.name:20} {figure:>8} {_RELATION.get(self.name, 'vs')} "
            f"{_shown(self.threshold):<8} {self.detail}"
        ).rstrip()


@dataclass(frozen=True, slots=True)
class GateResult:
    """A gate's verdict: passed when no applicable check failed.

    `str(result)` is a readable table; `to_dict()` plain JSON data (what a call's ledger
    stores under ``gate``); `GateResult.from_dict` reads it back.

    Example:
        ```python
        from langchain_core.messages import HumanMessage

        from langchain_contextkit.quality import GateResult, QualityGate

        gate = QualityGate(max_request_tokens=5, min_evidence=1)
        result = gate.check([HumanMessage("a question far too long for five tokens")])
        print(result)
        # quality gate FAILED (1 failed): 2 checks, 1 not applicable
        #   FAIL  max_request_tokens         18 <= 5        the messages, counted
        #   n/a   min_evidence                - >= 1        a message list has no kept items
        stored = result.to_dict()  # what a call's ledger keeps under "gate"
        assert GateResult.from_dict(stored) == result
        print([check.name for check in result.failed])
        # ['max_request_tokens']
        ```
    """

    passed: bool
    checks: tuple[GateCheck, ...]

    @property
    def failed(self) -> tuple[GateCheck, ...]:
        """The checks that failed."""
        return tuple(c for c in self.checks if c.passed is False)

    @property
    def not_applicable(self) -> tuple[GateCheck, ...]:
        """The checks the target lacked the data for."""
        return tuple(c for c in self.checks if c.passed is None)

    def __getitem__(self, name: str) -> GateCheck:
        """The check named `name`.

        Raises:
            KeyError: When the gate has no such check.
        """
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data: ``{"passed": ..., "checks": [{name, passed, figure, ...}]}``."""
        return {"passed": self.passed, "checks": [c.to_dict() for c in self.checks]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateResult:
        """Read back what `to_dict` wrote (for example from a call's ledger)."""
        checks = tuple(
            GateCheck(
                name=c["name"],
                passed=c["passed"],
                figure=c["figure"],
                threshold=c["threshold"],
                detail=c["detail"],
            )
            for c in data.get("checks", [])
        )
        return cls(passed=bool(data["passed"]), checks=checks)

    def failure_lines(self) -> list[str]:
        """One line per failed check: its name, figure, threshold and detail."""
        return [_failure_line(check) for check in self.failed]

    def __str__(self) -> str:
        """A header with the verdict, then one line per check."""
        verdict = "passed" if self.passed else f"FAILED ({len(self.failed)} failed)"
        extra = f", {len(self.not_applicable)} not applicable" if self.not_applicable else ""
        lines = [f"quality gate {verdict}: {len(self.checks)} checks{extra}"]
        lines += [f"  {check}" for check in self.checks]
        return "\n".join(lines)


_RELATION = {
    "max_request_tokens": "<=",
    "min_evidence": ">=",
    "required_facts": "of",
    "max_redundancy": "<=",
    "max_retrieval_share": "<=",
}


def _shown(value: Figure) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3f}"
    return str(int(value)) if isinstance(value, float) else str(value)


def _failure_line(check: GateCheck) -> str:
    figure = "-" if check.figure is None else _shown(check.figure)
    if check.name == "required_facts":
        return f"- {check.name}: {figure} of {_shown(check.threshold)} present; {check.detail}"
    relation = _RELATION.get(check.name, "vs")
    return (
        f"- {check.name}: {figure} (must be {relation} {_shown(check.threshold)}); {check.detail}"
    )
