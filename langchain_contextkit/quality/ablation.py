"""Ablation: what each part of the context is worth to the answers.

`aablate` (and its sync twin `ablate`) runs every case with the full context and once
with each component removed in turn, asks the model, scores each answer with a judge,
and reports per component the mean score drop and the tokens saved, naming the most
essential one. The components are each source (``source:<name>``; the notes of a
`note_store=` are ``source:notes``), the whole retrieval block (``retrieval``) and, for
an assembler, the running summary's recap (``recap``).

A judge is ``"exact"`` (the answer equals the expected text, spaces trimmed),
``"contains"`` (the expected text occurs in the answer), ``"regex"`` (the expected
value is a pattern the answer must match), a compiled pattern, or any callable
``(answer, expected) -> float`` (sync or async; an LLM judge is one such callable).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit.agent.middleware import ContextKitMiddleware
from langchain_contextkit.agent.plan import RETRIEVAL_ID, WindowAssembler
from langchain_contextkit.compaction.compactor import RECAP_ID_PREFIX
from langchain_contextkit.errors import ConfigError, check_count
from langchain_contextkit.retrieval._async import run_sync
from langchain_contextkit.retrieval.builder.runnable import ContextBuilder
from langchain_contextkit.tokens.count import count_message_tokens

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable

__all__ = [
    "AblationCase",
    "AblationReport",
    "AblationTarget",
    "ComponentScore",
    "Judge",
    "JudgeLike",
    "aablate",
    "ablate",
]

Judge = Callable[[str, Any], "float | bool | Awaitable[float | bool]"]
"""Scores an answer against the expected value: 0.0 (wrong) to 1.0 (right), or a bool."""

JudgeLike = Judge | Literal["exact", "contains", "regex"] | re.Pattern[str]
"""What `judge=` takes: a `Judge`, the name of a built-in one, or a pattern to match."""

AblationTarget = ContextBuilder | WindowAssembler | ContextKitMiddleware
"""What can be ablated: a builder's flat prompt, or an assembler's (a middleware's) request."""

RETRIEVAL = "retrieval"
RECAP = "recap"
_SOURCE = "source:"


@dataclass(frozen=True, slots=True)
class AblationCase:
    """One question, the answer it expects, and (for an assembler) the history before it.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage

        from langchain_contextkit import HistoryCompactor, WindowAssembler
        from langchain_contextkit.quality import AblationCase, ablate
        from langchain_contextkit.testing import ScriptedChatModel

        history = [HumanMessage("My badge number is 4471."), AIMessage("Noted.")]
        for i in range(6):
            history += [HumanMessage(f"Ticket {i}: printer {i} jams again."), AIMessage("Logged.")]
        assembler = WindowAssembler(
            window=2000, compactor=HistoryCompactor(keep_recent=2, trigger_tokens=100)
        )


        def answer(messages):  # right only when the badge number reached the model
            return AIMessage("4471" if any("4471" in m.text for m in messages) else "?")


        case = AblationCase("What is my badge number?", "4471", history=history)
        report = ablate(assembler, [case], "exact", model=ScriptedChatModel(respond=answer))
        print(report.essential, report["recap"].tokens_saved > 0)
        # recap True
        ```
    """

    question: str
    expected: Any = None
    """What the judge compares the answer with."""
    history: Sequence[BaseMessage] = ()
    """The conversation before the question (assembler targets only; it may compact)."""


@dataclass(frozen=True, slots=True)
class ComponentScore:
    """What removing one component did, averaged over the cases."""

    component: str
    score: float
    """Mean score of the answers without the component."""
    drop: float
    """Full-context mean score minus `score` (positive: the component helps)."""
    tokens_saved: float
    """Mean tokens the request was smaller without the component."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "component": self.component,
            "score": self.score,
            "drop": self.drop,
            "tokens_saved": self.tokens_saved,
        }


@dataclass(frozen=True, slots=True)
class AblationReport:
    """Per component: the score drop and the tokens saved; `essential` the largest drop."""

    cases: int
    full_score: float
    """Mean score with the full context."""
    full_tokens: float
    """Mean tokens of the full request."""
    components: tuple[ComponentScore, ...]
    essential: str | None
    """The component whose removal lowered the score most (None when none lowered it)."""
    scores: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Each case's score, under ``"full"`` and under each component's name."""

    def __getitem__(self, component: str) -> ComponentScore:
        """The line of `component`.

        Raises:
            KeyError: When no such component was ablated.
        """
        for line in self.components:
            if line.component == component:
                return line
        raise KeyError(component)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "cases": self.cases,
            "full_score": self.full_score,
            "full_tokens": self.full_tokens,
            "components": [c.to_dict() for c in self.components],
            "essential": self.essential,
            "scores": {name: list(values) for name, values in self.scores.items()},
        }

    def __str__(self) -> str:
        """A table: one line per component, the most essential named below it."""
        header = f"{'without':24} {'score':>7} {'drop':>7} {'tokens saved':>13}"
        title = (
            f"ablation over {self.cases} case(s): full context scores "
            f"{self.full_score:.3f} at {self.full_tokens:.0f} tokens"
        )
        lines = [
            title,
            header,
            "-" * len(header),
        ]
        lines += [
            f"{c.component:24} {c.score:7.3f} {c.drop:+7.3f} {c.tokens_saved:13.1f}"
            for c in self.components
        ]
        if self.essential is None:
            lines.append("most essential: none (no removal lowered the score)")
        else:
            drop = self[self.essential].drop
            lines.append(f"most essential: {self.essential} (score drops by {drop:.3f})")
        return "\n".join(lines)


async def aablate(
    target: AblationTarget,
    cases: Sequence[AblationCase | tuple[str, Any]],
    judge: JudgeLike,
    *,
    model: Runnable[Any, Any],
    components: Sequence[str] | None = None,
    system_prompt: str | None = None,
    max_concurrency: int = 4,
) -> AblationReport:
    """Score every case with the full context and with each component removed in turn.

    Args:
        target: A `ContextBuilder` (its flat prompt is sent as one human message) or a
            `WindowAssembler` / `ContextKitMiddleware` (its assembled request is sent).
            A removed source is left out of the build (the others may borrow its
            quota); a removed block or recap is left out of the assembled request.
        cases: `AblationCase`s, or ``(question, expected)`` pairs.
        judge: Scores each answer (see the module: ``"exact"``, ``"contains"``,
            ``"regex"``, a pattern, or a callable, sync or async).
        model: What answers: any chat model (or Runnable from messages to a message).
        components: The components to remove (default all: ``source:<name>`` for each
            source, ``retrieval``, and ``recap`` for an assembler).
        system_prompt: The system message of an assembler's requests (a builder uses
            its own `system_prompt`).
        max_concurrency: At most this many cases run (build, model call, judge) at once.

    Returns:
        The report: per component the mean score drop and tokens saved.

    Raises:
        ConfigError: On no cases, an unknown component, a case with history for a
            builder, or `max_concurrency` < 1.

    Example:
        ```python
        from langchain_core.messages import AIMessage

        from langchain_contextkit import CallableSource, ContextBuilder, ContextConfig
        from langchain_contextkit.quality import ablate
        from langchain_contextkit.testing import ScriptedChatModel

        builder = ContextBuilder(
            ContextConfig(max_tokens=2000, source_ratios={"rag": 0.5, "memory": 0.5}),
            sources=[
                CallableSource("rag", lambda q: ["Order 1042 ships on Friday."]),
                CallableSource("memory", lambda q: ["The user prefers short answers."]),
            ],
        )


        def answer(messages):
            return AIMessage("Friday" if "Friday" in messages[-1].text else "I don't know")


        model = ScriptedChatModel(respond=answer)
        report = ablate(builder, [("When does order 1042 ship?", "Friday")], "exact", model=model)
        print(report.essential, report["source:memory"].drop)
        # source:rag 0.0
        ```
    """
    check_count("max_concurrency", max_concurrency, minimum=1)
    checked = [_case(case) for case in cases]
    if not checked:
        msg = "ablate needs at least one case"
        raise ConfigError(msg)
    run = _Runner.of(target, model, system_prompt)
    if run.is_builder and any(case.history for case in checked):
        msg = "a ContextBuilder builds one flat prompt: cases with history need a WindowAssembler"
        raise ConfigError(msg)
    chosen = run.components() if components is None else list(components)
    unknown = sorted(set(chosen) - set(run.components()))
    if unknown:
        msg = f"unknown components {unknown}: this target has {run.components()}"
        raise ConfigError(msg)
    scorer = _judge_of(judge)
    limit = asyncio.Semaphore(max_concurrency)

    async def one(case: AblationCase, component: str | None) -> tuple[float, int]:
        async with limit:
            request, tokens = await run.request(case, component)
            reply = await model.ainvoke(request)
            answer = reply.text if isinstance(reply, BaseMessage) else str(reply)
            return await scorer(answer, case.expected), tokens

    variants: list[str | None] = [None, *chosen]
    runs = await asyncio.gather(*(one(case, v) for case in checked for v in variants))
    width = len(variants)
    per_case = [runs[i * width : (i + 1) * width] for i in range(len(checked))]
    full_scores = tuple(row[0][0] for row in per_case)
    full_score = _mean(full_scores)
    lines = []
    scores: dict[str, tuple[float, ...]] = {"full": full_scores}
    for k, component in enumerate(chosen, start=1):
        without = tuple(row[k][0] for row in per_case)
        saved = _mean([row[0][1] - row[k][1] for row in per_case])
        scores[component] = without
        lines.append(ComponentScore(component, _mean(without), full_score - _mean(without), saved))
    best = max(lines, key=lambda line: line.drop, default=None)
    return AblationReport(
        cases=len(checked),
        full_score=full_score,
        full_tokens=_mean([row[0][1] for row in per_case]),
        components=tuple(lines),
        essential=best.component if best is not None and best.drop > 0 else None,
        scores=scores,
    )


def ablate(
    target: AblationTarget,
    cases: Sequence[AblationCase | tuple[str, Any]],
    judge: JudgeLike,
    *,
    model: Runnable[Any, Any],
    components: Sequence[str] | None = None,
    system_prompt: str | None = None,
    max_concurrency: int = 4,
) -> AblationReport:
    """Sync `aablate` (same arguments; the cases still run concurrently).

    Example:
        ```python
        from langchain_core.messages import AIMessage

        from langchain_contextkit import CallableSource, ContextBuilder, ContextConfig
        from langchain_contextkit.quality import ablate
        from langchain_contextkit.testing import ScriptedChatModel

        builder = ContextBuilder(
            ContextConfig(max_tokens=2000),
            sources=[CallableSource("rag", lambda q: ["The office opens at 9:00."])],
        )
        model = ScriptedChatModel(
            respond=lambda m: AIMessage("9:00" if "9:00" in m[-1].text else "?")
        )
        report = ablate(builder, [("When do you open?", "9:00")], "contains", model=model)
        print(report)
        # ablation over 1 case(s): full context scores 1.000 at 24 tokens
        # without                    score    drop  tokens saved
        # ------------------------------------------------------
        # source:rag                 0.000  +1.000          14.0
        # retrieval                  0.000  +1.000          14.0
        # most essential: source:rag (score drops by 1.000)
        ```
    """
    return run_sync(
        aablate(
            target,
            cases,
            judge,
            model=model,
            components=components,
            system_prompt=system_prompt,
            max_concurrency=max_concurrency,
        )
    )


# -- targets ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Runner:
    """Builds one case's request with the full context or one component removed."""

    builder: ContextBuilder | None
    assembler: WindowAssembler | None
    model: Runnable[Any, Any]
    system: SystemMessage | None

    @classmethod
    def of(cls, target: object, model: Runnable[Any, Any], system_prompt: str | None) -> _Runner:
        system = SystemMessage(system_prompt) if system_prompt else None
        if isinstance(target, ContextBuilder):
            return cls(target, None, model, None)
        if isinstance(target, ContextKitMiddleware):
            target = target.assembler
        if isinstance(target, WindowAssembler):
            return cls(None, target, model, system)
        msg = (
            "ablate takes a ContextBuilder, a WindowAssembler or a ContextKitMiddleware, "
            f"got {type(target).__name__}"
        )
        raise ConfigError(msg)

    @property
    def is_builder(self) -> bool:
        return self.builder is not None

    def components(self) -> list[str]:
        if self.builder is not None:
            return [*(_SOURCE + s.name for s in self.builder.sources), RETRIEVAL]
        assert self.assembler is not None  # noqa: S101 - one of the two is set
        return [*(_SOURCE + s.name for s in self.assembler.sources), RETRIEVAL, RECAP]

    async def request(
        self, case: AblationCase, component: str | None
    ) -> tuple[str | list[BaseMessage], int]:
        """The request to send, and its tokens as the target counts them."""
        if self.builder is not None:
            builder = self.builder
            report = await builder.abuild_report(
                case.question, sources=_kept_sources(builder.sources, component)
            )
            return report.text, builder.token_counter(report.text)
        assert self.assembler is not None  # noqa: S101 - one of the two is set
        assembler = _without_source(self.assembler, component)
        assembly = await assembler.aassemble(
            [*case.history, HumanMessage(case.question)],
            system_message=self.system,
            model=self.model,
        )
        messages = [*([self.system] if self.system else []), *assembly.messages]
        if component == RETRIEVAL:
            messages = [m for m in messages if m.id != RETRIEVAL_ID]
        elif component == RECAP:
            messages = [m for m in messages if not str(m.id or "").startswith(RECAP_ID_PREFIX)]
        return messages, count_message_tokens(messages, self.assembler.counter)


def _kept_sources(sources: Sequence[Any], component: str | None) -> list[Any]:
    if component == RETRIEVAL:
        return []
    return [s for s in sources if component != _SOURCE + s.name]


def _without_source(assembler: WindowAssembler, component: str | None) -> WindowAssembler:
    """The assembler with one source left out (itself for any other component).

    Its builder keeps the same budget and ratios, so the other sources may borrow the
    removed one's quota, as they would in a build without it.
    """
    if component is None or not component.startswith(_SOURCE) or assembler.builder is None:
        return assembler
    kept = _kept_sources(assembler.sources, component)
    variant = copy.copy(assembler)
    variant.sources = kept
    variant.builder = assembler.builder.model_copy(update={"sources": tuple(kept)})
    return variant


# -- judges -----------------------------------------------------------------------------


def _case(case: object) -> AblationCase:
    if isinstance(case, AblationCase):
        return case
    if isinstance(case, tuple) and len(case) == 2 and isinstance(case[0], str):  # noqa: PLR2004
        return AblationCase(case[0], case[1])
    msg = f"a case is an AblationCase or a (question, expected) pair, got {case!r}"
    raise ConfigError(msg)


def _exact(answer: str, expected: Any) -> float:  # noqa: ANN401 - any expected value
    return float(answer.strip() == str(expected).strip())


def _contains(answer: str, expected: Any) -> float:  # noqa: ANN401
    return float(str(expected) in answer)


def _regex(answer: str, expected: Any) -> float:  # noqa: ANN401
    pattern = expected if isinstance(expected, re.Pattern) else re.compile(str(expected))
    return float(pattern.search(answer) is not None)


_BUILT_IN: dict[str, Judge] = {"exact": _exact, "contains": _contains, "regex": _regex}


def _judge_of(judge: object) -> Callable[[str, Any], Awaitable[float]]:
    """Any `JudgeLike` as one async scorer returning a float."""
    if isinstance(judge, str):
        if judge not in _BUILT_IN:
            msg = f"judge must be one of {sorted(_BUILT_IN)} or a callable, got {judge!r}"
            raise ConfigError(msg)
        chosen: Callable[[str, Any], Any] = _BUILT_IN[judge]
    elif isinstance(judge, re.Pattern):
        pattern = judge
        chosen = lambda answer, _expected: float(pattern.search(answer) is not None)  # noqa: E731
    elif callable(judge):
        chosen = judge
    else:
        msg = f"judge must be a callable, a pattern or a name, got {type(judge).__name__}"
        raise ConfigError(msg)

    async def score(answer: str, expected: Any) -> float:  # noqa: ANN401
        value = chosen(answer, expected)
        if inspect.isawaitable(value):
            value = await value
        return float(value)

    return score


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
