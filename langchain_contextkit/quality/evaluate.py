"""`evaluate`: run a set of cases against a context policy and get one table.

Per case the target's request is built (or a whole agent run), the model answers, a judge
scores it, and the tokens, gate result, latency and cache-read share are recorded. Judges
take LangSmith's and openevals' evaluator shape ``(inputs, outputs, reference)``, sync or
async, or a built-in: ``"exact"``, ``"contains"``, ``"regex"`` or a compiled pattern.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit.agent.middleware import LEDGER_KEY, ContextKitMiddleware
from langchain_contextkit.agent.plan import WindowAssembler
from langchain_contextkit.agent.window_budget import reported_usage
from langchain_contextkit.errors import ConfigError, check_count
from langchain_contextkit.quality.ablation import AblationCase
from langchain_contextkit.quality.eval_result import CaseResult, EvalResult
from langchain_contextkit.quality.gate import GateResult
from langchain_contextkit.retrieval._async import run_sync
from langchain_contextkit.retrieval.builder.runnable import ContextBuilder
from langchain_contextkit.tokens.count import count_message_tokens

if TYPE_CHECKING:
    import os

    from langchain_core.runnables import Runnable

    from langchain_contextkit.quality.gate import QualityGate

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "EvalCase",
    "EvalJudge",
    "JudgeScore",
    "JudgeSpec",
    "aevaluate",
    "evaluate",
    "judge_of",
]

DEFAULT_MAX_CONCURRENCY = 8
"""Cases in flight at once by default."""


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One question, its reference answer, and the conversation before it.

    Example:
        ```python
        from langchain_core.messages import AIMessage

        from langchain_contextkit import CallableSource, ContextBuilder, ContextConfig
        from langchain_contextkit.quality import EvalCase, evaluate
        from langchain_contextkit.testing import ScriptedChatModel

        builder = ContextBuilder(
            ContextConfig(max_tokens=400, source_ratios={"rag": 1.0}, min_chunk_tokens=4),
            sources=[CallableSource("rag", lambda q: ["Returns are free for 30 days."])],
        )
        model = ScriptedChatModel(
            respond=lambda m: AIMessage("30 days" if "30 days" in m[-1].text else "?")
        )
        cases = [EvalCase("How long are returns free?", "30 days", case_id="returns")]
        result = evaluate(builder, cases, "contains", model=model)
        print(result.mean_score, result.cases[0].over_budget)
        # 1.0 False
        ```
    """

    question: str
    reference: Any = None
    """What the judge compares the answer with (any value; built-ins read its text)."""
    history: Sequence[BaseMessage] = ()
    """The conversation before the question (not for a builder, which has no history)."""
    case_id: str | None = None
    """A name that pairs the case with the baseline's; default its position from 1."""


CaseLike = EvalCase | AblationCase | tuple[str, Any] | Mapping[str, Any]
"""A case: an `EvalCase`, an `AblationCase`, a ``(question, reference)`` pair, or a
LangSmith-style example ``{"inputs": {"question": ...}, "outputs": {...}}``."""

EvalTarget = ContextBuilder | WindowAssembler | ContextKitMiddleware | Any
"""A builder, an assembler, the middleware, or an agent (a runnable over messages)."""


async def aevaluate(
    target: EvalTarget,
    cases: Sequence[CaseLike],
    judge: JudgeSpec,
    *,
    model: Runnable[Any, Any] | None = None,
    baseline: EvalResult | str | os.PathLike[str] | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    gate: QualityGate | None = None,
    system_prompt: str | None = None,
) -> EvalResult:
    """Run every case against `target`, judge the answers, and measure each request.

    Args:
        target: A `ContextBuilder` (its flat prompt is sent as one human message), a
            `WindowAssembler` or `ContextKitMiddleware` (its assembled request is sent),
            or an agent (a runnable taking ``{"messages": [...]}``; each case runs in a
            thread of its own).
        cases: `EvalCase`s, `AblationCase`s, ``(question, reference)`` pairs or
            LangSmith-style example dicts.
        judge: ``"exact"``, ``"contains"``, ``"regex"``, a compiled pattern, or any
            ``(inputs, outputs, reference) -> float | bool | dict`` evaluator.
        model: What answers for a builder or an assembler; an agent has its own.
        baseline: An earlier result (or the path of its saved JSON) to compare with:
            `str(result)` then shows the drift and `result.assert_no_regression()`
            checks it.
        max_concurrency: At most this many cases run at once.
        gate: A `QualityGate` checked on every case's request (an agent's: on its last
            call's ledger; without one, the gate its middleware ran, if any).
        system_prompt: The system message of an assembler's requests.

    Returns:
        One `CaseResult` per case, in the order given.

    Raises:
        ConfigError: On no cases, a malformed case, a builder or assembler without a
            model, an agent with one, history for a builder, or `max_concurrency` < 1.
    """
    check_count("max_concurrency", max_concurrency, minimum=1)
    checked = [_case(case, index) for index, case in enumerate(cases, start=1)]
    if not checked:
        msg = "evaluate needs at least one case"
        raise ConfigError(msg)
    ids = [case.case_id for case in checked]
    if len(set(ids)) != len(ids):
        msg = "case ids must be unique: drift pairs cases by them"
        raise ConfigError(msg)
    runner = _runner(target, model, system_prompt, gate)
    if isinstance(runner, _BuilderRun) and any(case.history for case in checked):
        msg = "a ContextBuilder builds one flat prompt: cases with history need an assembler"
        raise ConfigError(msg)
    judge_name, score = judge_of(judge)
    base = _baseline(baseline)
    limit = asyncio.Semaphore(max_concurrency)

    async def one(case: EvalCase) -> CaseResult:
        async with limit:
            return await _judged(runner, case, score)

    results = await asyncio.gather(*(one(case) for case in checked))
    return EvalResult(
        target=type(target).__name__, judge=judge_name, cases=tuple(results), baseline=base
    )


def evaluate(
    target: EvalTarget,
    cases: Sequence[CaseLike],
    judge: JudgeSpec,
    *,
    model: Runnable[Any, Any] | None = None,
    baseline: EvalResult | str | os.PathLike[str] | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    gate: QualityGate | None = None,
    system_prompt: str | None = None,
) -> EvalResult:
    """Sync `aevaluate` (same arguments; the cases still run concurrently).

    Example:
        ```python
        from langchain_core.messages import AIMessage

        from langchain_contextkit import CallableSource, ContextBuilder, ContextConfig
        from langchain_contextkit.quality import evaluate
        from langchain_contextkit.testing import ScriptedChatModel


        def builder(max_tokens):  # one policy, two budgets
            config = ContextConfig(
                max_tokens=max_tokens, source_ratios={"rag": 1.0}, min_chunk_tokens=4
            )
            text = "Support opens at 9:00 on weekdays and closes at 18:00."
            return ContextBuilder(config, sources=[CallableSource("rag", lambda q: [text])])


        model = ScriptedChatModel(
            respond=lambda m: AIMessage("9:00" if "9:00" in m[-1].text else "I don't know")
        )
        cases = [("When does support open?", "9:00")]
        before = evaluate(builder(400), cases, "contains", model=model)
        after = evaluate(builder(30), cases, "contains", model=model, baseline=before)
        print(before.mean_score, after.mean_score, after.compare().passed)
        # 1.0 0.0 False
        ```
    """
    return run_sync(
        aevaluate(
            target,
            cases,
            judge,
            model=model,
            baseline=baseline,
            max_concurrency=max_concurrency,
            gate=gate,
            system_prompt=system_prompt,
        )
    )


# -- cases ------------------------------------------------------------------------------


def _case(case: object, index: int) -> EvalCase:
    if isinstance(case, EvalCase):
        return case if case.case_id is not None else _with_id(case, index)
    if isinstance(case, AblationCase):
        return EvalCase(case.question, case.expected, case.history, str(index))
    if isinstance(case, tuple) and len(case) == 2 and isinstance(case[0], str):  # noqa: PLR2004
        return EvalCase(case[0], case[1], (), str(index))
    if isinstance(case, Mapping) and "inputs" in case:
        inputs = case["inputs"]
        question = inputs.get("question") if isinstance(inputs, Mapping) else inputs
        if isinstance(question, str):
            reference = case.get("outputs", case.get("reference"))
            name = case.get("id")
            return EvalCase(question, reference, (), str(name) if name else str(index))
    msg = (
        "a case is an EvalCase, an AblationCase, a (question, reference) pair or "
        f'{{"inputs": {{"question": ...}}, "outputs": ...}}; case {index} is {case!r}'
    )
    raise ConfigError(msg)


def _with_id(case: EvalCase, index: int) -> EvalCase:
    return EvalCase(case.question, case.reference, case.history, str(index))


def _baseline(baseline: object) -> EvalResult | None:
    if baseline is None or isinstance(baseline, EvalResult):
        return baseline
    return EvalResult.from_json(str(baseline))


# -- one case ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Answered:
    """What a target did for one case, before judging."""

    answer: str
    tokens: int
    limit: int | None
    over_budget: bool
    calls: int
    gate: GateResult | None
    model_ms: float | None
    reported: int | None
    cache_read: int | None


async def _judged(runner: _Runner, case: EvalCase, score: ScoreAnswer) -> CaseResult:
    began = time.perf_counter()
    done = await runner.answer(case)
    latency_ms = (time.perf_counter() - began) * 1000
    judged = await score({"question": case.question}, {"answer": done.answer}, case.reference)
    return CaseResult(
        case_id=str(case.case_id),
        question=case.question,
        reference=case.reference,
        answer=done.answer,
        score=judged.score,
        key=judged.key,
        comment=judged.comment,
        tokens=done.tokens,
        limit=done.limit,
        over_budget=done.over_budget,
        calls=done.calls,
        gate=done.gate,
        latency_ms=round(latency_ms, 3),
        model_ms=None if done.model_ms is None else round(done.model_ms, 3),
        reported=done.reported,
        cache_read=done.cache_read,
    )


class _Runner:
    async def answer(self, case: EvalCase) -> _Answered:
        raise NotImplementedError


def _runner(
    target: object,
    model: Runnable[Any, Any] | None,
    system_prompt: str | None,
    gate: QualityGate | None,
) -> _Runner:
    if isinstance(target, ContextKitMiddleware):
        target = target.assembler
    if isinstance(target, (ContextBuilder, WindowAssembler)):
        if model is None:
            msg = f"evaluate needs model= to answer for a {type(target).__name__}"
            raise ConfigError(msg)
        if isinstance(target, ContextBuilder):
            return _BuilderRun(target, model, gate)
        system = SystemMessage(system_prompt) if system_prompt else None
        return _AssemblerRun(target, model, gate, system)
    if callable(getattr(target, "ainvoke", None)):
        if model is not None:
            msg = "an agent answers with its own model: leave model= out"
            raise ConfigError(msg)
        return _AgentRun(target, gate)
    msg = (
        "evaluate takes a ContextBuilder, a WindowAssembler, a ContextKitMiddleware or an "
        f"agent (a runnable over {{'messages': [...]}}), got {type(target).__name__}"
    )
    raise ConfigError(msg)


async def _timed_reply(model: Runnable[Any, Any], request: Any) -> tuple[Any, float]:  # noqa: ANN401
    began = time.perf_counter()
    reply = await model.ainvoke(request)
    return reply, (time.perf_counter() - began) * 1000


def _text(reply: object) -> str:
    return reply.text if isinstance(reply, BaseMessage) else str(reply)


@dataclass(frozen=True, slots=True)
class _BuilderRun(_Runner):
    builder: ContextBuilder
    model: Runnable[Any, Any]
    gate: QualityGate | None

    async def answer(self, case: EvalCase) -> _Answered:
        report = await self.builder.abuild_report(case.question)
        tokens = self.builder.token_counter(report.text)
        limit = self.builder.config.max_tokens
        over = report.block_tokens > report.budget or (limit is not None and tokens > limit)
        reply, model_ms = await _timed_reply(self.model, report.text)
        usage = reported_usage(reply if isinstance(reply, BaseMessage) else None)
        return _Answered(
            answer=_text(reply),
            tokens=tokens,
            limit=limit,
            over_budget=over,
            calls=1,
            gate=None if self.gate is None else self.gate.check(report),
            model_ms=model_ms,
            reported=None if usage is None else usage.input_tokens,
            cache_read=None if usage is None else usage.cache_read,
        )


@dataclass(frozen=True, slots=True)
class _AssemblerRun(_Runner):
    assembler: WindowAssembler
    model: Runnable[Any, Any]
    gate: QualityGate | None
    system: SystemMessage | None

    async def answer(self, case: EvalCase) -> _Answered:
        assembly = await self.assembler.aassemble(
            [*case.history, HumanMessage(case.question)],
            system_message=self.system,
            model=self.model,
        )
        messages = [*([self.system] if self.system else []), *assembly.messages]
        tokens = count_message_tokens(messages, self.assembler.counter)
        limit = assembly.ledger.window - assembly.ledger.output_reserve
        gate = None if self.gate is None else self.gate.check(assembly, messages=messages)
        reply, model_ms = await _timed_reply(self.model, messages)
        usage = reported_usage(reply if isinstance(reply, BaseMessage) else None)
        return _Answered(
            answer=_text(reply),
            tokens=tokens,
            limit=limit,
            over_budget=tokens > limit,
            calls=1,
            gate=gate,
            model_ms=model_ms,
            reported=None if usage is None else usage.input_tokens,
            cache_read=None if usage is None else usage.cache_read,
        )


@dataclass(frozen=True, slots=True)
class _AgentRun(_Runner):
    agent: Any
    gate: QualityGate | None

    async def answer(self, case: EvalCase) -> _Answered:
        # A thread of its own per case: no case sees another's conversation.
        thread = f"contextkit-evaluate-{uuid.uuid4().hex}-{case.case_id}"
        messages = [*case.history, HumanMessage(case.question)]
        state = await self.agent.ainvoke(
            {"messages": messages}, {"configurable": {"thread_id": thread}}
        )
        ledgers = [e for e in (state.get(LEDGER_KEY) or []) if isinstance(e, Mapping)]
        reply = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
        answer = "" if reply is None else reply.text
        if not ledgers:  # an agent without the middleware: only what went in is known
            return _Answered(
                answer=answer,
                tokens=count_message_tokens(messages),
                limit=None,
                over_budget=False,
                calls=0,
                gate=None,
                model_ms=None,
                reported=None,
                cache_read=None,
            )
        return _from_ledgers(answer, ledgers, self.gate)


def _from_ledgers(
    answer: str, ledgers: Sequence[Mapping[str, Any]], gate: QualityGate | None
) -> _Answered:
    """A case's figures from the call ledgers of its run (one per model call)."""
    prompts = [
        _int(e.get("window")) - _int(e.get("free")) - _int(e.get("output_reserve")) for e in ledgers
    ]
    limits = [_int(e.get("window")) - _int(e.get("output_reserve")) for e in ledgers]
    sizes = [max(p, _int(e.get("reported"))) for p, e in zip(prompts, ledgers, strict=True)]
    over = any(size > room for size, room in zip(sizes, limits, strict=True))
    last = ledgers[-1]
    if gate is not None:
        result: GateResult | None = gate.check(dict(last))
    elif isinstance(last.get("gate"), Mapping):
        result = GateResult.from_dict(dict(last["gate"]))
    else:
        result = None
    timed = [float(e["model_ms"]) for e in ledgers if isinstance(e.get("model_ms"), (int, float))]
    reported = [e for e in ledgers if _int(e.get("reported")) > 0]
    peak = max(range(len(prompts)), key=prompts.__getitem__)
    return _Answered(
        answer=answer,
        tokens=prompts[peak],
        limit=limits[peak],
        over_budget=over,
        calls=len(ledgers),
        gate=result,
        model_ms=sum(timed) if timed else None,
        reported=sum(_int(e.get("reported")) for e in reported) if reported else None,
        cache_read=sum(_int(e.get("cache_read")) for e in reported) if reported else None,
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
