"""Trajectory reducers: trim an agent's own working trajectory, per paradigm.

A generic summary breaks a paradigm: it strips a reflection loop's past critiques or a
plan's exact step numbers. Each reducer here knows what its paradigm cannot lose and
keeps it verbatim, summarises only the rest, and raises `ContextWindowExceeded` when what
must be kept already exceeds the budget, never truncating silently:

- `reduce_agent`: a tool-call loop (messages). Recent units (an AI message with its tool
  results) stay verbatim, the task stays, failed tool results stay visible while they
  fit; older units fold into one summary entry.
- `reduce_plan`: a plan-and-execute trajectory (`PlanTrajectory`). The goal, every step's
  number, description and status survive; recent results stay verbatim; older results
  are summarised, and every number, date, identifier and conclusion they stated is
  checked against the summary and re-inserted as a key fact when it went missing.
- `reduce_reflection`: draft/critique rounds (`ReflectionTrajectory`). The latest draft
  and a deduplicated list of every critique point survive; superseded drafts go.

All three are async (as the seed specifies), take the trajectory, a token `budget` (from
`WindowBudget.trajectory_budget`), an optional async `summarize(text, instruction)`
callback (default: the extractive summariser) and a `counter`. Sync callers (a plain sync
`StateGraph` node) use `reduce_agent_sync`, `reduce_plan_sync` and
`reduce_reflection_sync`: the same arguments, the same result, no `asyncio.run` of their
own (safe inside a running event loop too).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import re
from collections import Counter
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit._async import run_sync
from langchain_contextkit._checks import check_count, from_known_fields
from langchain_contextkit._chunked_summary import SAFETY, fitted_requests, run_async
from langchain_contextkit.budget import model_limits
from langchain_contextkit.errors import ContextWindowExceeded
from langchain_contextkit.facts import FactIndex, normalised
from langchain_contextkit.messages import find_message_problems, split_system, unit_starts
from langchain_contextkit.prompts import Fidelity, PromptRegistry
from langchain_contextkit.summarizers import (
    ASummarize,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarize,
    check_fidelity,
    compose_extension,
    render_transcript,
)
from langchain_contextkit.tokens import (
    TokenCounter,
    count_message_tokens,
    count_tokens,
    truncate_to_tokens,
)
from langchain_contextkit.trajectories import PlanStep, PlanTrajectory, ReflectionTrajectory

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from langchain_core.embeddings import Embeddings

__all__ = [
    "REDUCERS",
    "ReducerConfig",
    "SummarizerLike",
    "reduce_agent",
    "reduce_agent_sync",
    "reduce_plan",
    "reduce_plan_sync",
    "reduce_reflection",
    "reduce_reflection_sync",
    "tokens_of",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReducerConfig:
    """How much recent text the reducers keep verbatim (seed 002's table).

    The trajectory's token budget is not here: it comes from the window ledger
    (`WindowBudget.trajectory_budget`), so the parts can never add up past the window.

    Example:
        ```python
        from langchain_contextkit.reducers import ReducerConfig

        cfg = ReducerConfig()
        assert (cfg.agent_keep_recent_steps, cfg.plan_keep_recent) == (3, 3)
        assert ReducerConfig.from_dict(cfg.to_dict()) == cfg
        ```
    """

    agent_keep_recent_steps: int = 3
    """Tool-loop units (an AI message with its tool results) kept verbatim at the end."""

    plan_keep_recent: int = 3
    """Plan step results kept verbatim at the end."""

    fidelity: Fidelity = "medium"
    """What a summary of older steps keeps: ``"high"`` details and exact wording,
    ``"medium"`` every key fact and conclusion, ``"low"`` only conclusions and key
    numbers (a summary that does not fit its room steps down a tier first)."""

    def __post_init__(self) -> None:
        """Validate the knobs."""
        check_fidelity(self.fidelity)
        for name in ("agent_keep_recent_steps", "plan_keep_recent"):
            check_count(name, getattr(self, name), minimum=0)

    def to_dict(self) -> dict[str, Any]:
        """The knobs as a plain dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReducerConfig:
        """Build from a dict; an unknown key is an error that names it.

        Raises:
            ConfigError: On an unknown key or an invalid value.
        """
        return from_known_fields(cls, data)


def tokens_of(*texts: str, counter: TokenCounter = count_tokens) -> int:
    """Estimate the total tokens of several texts.

    Example:
        ```python
        from langchain_contextkit.reducers import tokens_of

        assert tokens_of("hello world", "你好世界") == 7
        ```
    """
    return sum(counter(text) for text in texts)


SummarizerLike = ASummarize | Summarize | LLMSummarizer | ExtractiveSummarizer
"""An async or sync `summarize(text, instruction) -> str`, or a summariser object."""


def _extractive(
    room: int, counter: TokenCounter, registry: PromptRegistry, fidelity: Fidelity
) -> ExtractiveSummarizer:
    return ExtractiveSummarizer(
        max_tokens=max(1, room), counter=counter, prompts=registry, fidelity=fidelity
    )


def _as_async(
    summarize: SummarizerLike | None,
    room: int,
    counter: TokenCounter,
    registry: PromptRegistry,
    fidelity: Fidelity,
) -> ASummarize:
    """Turn whatever the caller gave into an async callback (extractive when None)."""
    if summarize is None:
        return _extractive(room, counter, registry, fidelity).asummarize
    if isinstance(summarize, (LLMSummarizer, ExtractiveSummarizer)):
        return summarize.asummarize
    function = summarize

    async def call(text: str, instruction: str) -> str:
        result = function(text, instruction)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, str) else ""

    return call


def _fits(text: str, instruction: str, room: int, window: int, counter: TokenCounter) -> bool:
    """Whether one summariser request (text, instruction, the answer) fits `window`."""
    return counter(text) + counter(instruction) + room + 64 <= int(window * (1 - SAFETY))


async def _summary_within(
    summarize: SummarizerLike | None,
    text: str,
    instruction: str,
    room: int,
    counter: TokenCounter,
    *,
    registry: PromptRegistry,
    fidelity: Fidelity,
) -> str:
    """Summarise `text` into at most `room` tokens.

    The extractive summary steps in when the summariser fails or returns nothing; when
    that finds nothing either (no sentence carries a fact), the text itself, cut to the
    room, is the summary: lossy but real, never a placeholder and never an error.
    """
    if room < 1:
        return ""
    try:
        llm = summarize if isinstance(summarize, LLMSummarizer) else None
        window = None if llm is None else model_limits(llm.llm)[0]
        if (
            llm is not None
            and window is not None
            and not _fits(text, instruction, room, window, counter)
        ):
            # Too long for the model's own window: summarised in chunks, then merged.
            requests = fitted_requests(
                text.split("\n"),
                None,
                window=window,
                cap=room,
                prompts=llm.prompts,
                counter=counter,
                fidelity=fidelity,
            )
            summary = await run_async(requests, llm.asummarize)
        else:
            summary = await _as_async(summarize, room, counter, registry, fidelity)(
                text, instruction
            )
    except Exception as exc:  # noqa: BLE001 - a failing summariser must never cost data
        logger.warning(
            "summariser failed (%s: %s); using the extractive one", type(exc).__name__, exc
        )
        summary = ""
    if not summary.strip() and summarize is not None:
        summary = _extractive(room, counter, registry, fidelity)(text, instruction)
    if not summary.strip():
        summary = text
    summary = truncate_to_tokens(summary.strip(), room, counter)
    return summary if any(ch.isalnum() for ch in summary) else ""


def _exceeded(*, what: str, required: int, budget: int) -> ContextWindowExceeded:
    msg = f"{what} takes {required} tokens, more than the trajectory budget of {budget}"
    return ContextWindowExceeded(msg, required=required, budget=budget)


def _check_budget(budget: int) -> None:
    check_count("budget", budget, minimum=0)


# -- the tool loop ------------------------------------------------------------------------


async def reduce_agent(
    messages: Sequence[BaseMessage],
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    keep_recent_steps: int = 3,
    prompts: PromptRegistry | None = None,
    fidelity: Fidelity = "medium",
) -> list[BaseMessage]:
    """Fit a tool-call loop into `budget` tokens without breaking it.

    Kept verbatim: the leading system messages, the task (the first message when it is a
    human one), and the last `keep_recent_steps` tool steps (an AI message with its tool
    results) with everything after them. Older units fold into one summary entry, placed
    right after the task (an AI message there; a system message when nothing but system
    messages precede it). Failed tool steps (a `ToolMessage` with ``status="error"``) stay
    visible too, newest first, as long as the budget holds them: the model must not repeat
    a mistake it can no longer see.

    Args:
        messages: The trajectory.
        budget: Tokens it may take (`count_message_tokens` with `counter`).
        summarize: Async or sync `summarize(text, instruction)`, or a summariser object;
            default the extractive summariser. A failure falls back to it.
        counter: Counts the tokens of one string.
        keep_recent_steps: Tool steps kept verbatim at the end (`ReducerConfig`).
        prompts: The summary instruction and heading (language).
        fidelity: What the summary of older steps keeps (`ReducerConfig.fidelity`).

    Returns:
        The reduced list (the input's messages when it already fits); it passes
        `find_message_problems` whenever the input did.

    Raises:
        ContextWindowExceeded: When what must stay verbatim already exceeds `budget`.

    Example:
        ```python
        import asyncio

        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit import count_message_tokens
        from langchain_contextkit.reducers import reduce_agent

        messages = [HumanMessage("Find the cheapest flight to Oslo.")]
        for day in range(1, 9):
            call = {"name": "search", "args": {"day": day}, "id": f"c{day}"}
            messages += [
                AIMessage("", tool_calls=[call]),
                ToolMessage(
                    f"Day {day}: cheapest fare {300 + 7 * day} EUR. " * 5, tool_call_id=f"c{day}"
                ),
            ]
        reduced = asyncio.run(reduce_agent(messages, budget=450, keep_recent_steps=2))
        assert count_message_tokens(reduced) <= 450
        print([m.type for m in reduced])
        # ['human', 'ai', 'ai', 'tool', 'ai', 'tool']
        ```
    """
    _check_budget(budget)
    check_fidelity(fidelity)
    if count_message_tokens(messages, counter) <= budget:
        return list(messages)
    registry = prompts or PromptRegistry()
    system, rest = split_system(messages)
    units = _units(rest)
    task = units[:1] if units and isinstance(units[0][0], HumanMessage) else []
    first_recent = _recent_start(units, keep_recent_steps, floor=len(task))
    middle = units[len(task) : first_recent]
    kept_head = [*system, *_flat(task)]
    recent = _flat(units[first_recent:])
    costs = {id(u): _unit_cost(u, counter) for u in middle}
    entry_overhead = _entry_cost(registry, counter)
    must = count_message_tokens([*kept_head, *recent], counter) + entry_overhead
    if not middle or must > budget:
        raise _exceeded(
            what="the system prompt, task and recent steps", required=must, budget=budget
        )

    # Pin failed steps, newest first, while a summary of at least _MIN_ROOM still fits.
    pinned: set[int] = set()
    spare = budget - must - _MIN_ROOM
    for unit in reversed(middle):
        if _is_error_unit(unit) and costs[id(unit)] <= spare:
            pinned.add(id(unit))
            spare -= costs[id(unit)]
    folded = [u for u in middle if id(u) not in pinned]
    room = budget - must - sum(costs[i] for i in pinned)
    text = render_transcript(_flat(folded))
    instruction = registry.summary_instruction(max_tokens=room, fidelity=fidelity)
    pins = _flat([u for u in middle if id(u) in pinned])
    for _ in range(_ENTRY_ROUNDS):
        summary = await _summary_within(
            summarize, text, instruction, room, counter, registry=registry, fidelity=fidelity
        )
        if not summary:
            break
        content = f"{registry.heading('recap')} {summary}"
        entry: BaseMessage = AIMessage(content) if task else SystemMessage(content)
        reduced = [*kept_head, entry, *pins, *recent]
        # An estimate is not additive where the heading meets the summary: check the whole.
        excess = count_message_tokens(reduced, counter) - budget
        if excess <= 0:
            _no_new_problems(messages, reduced)
            return reduced
        room -= excess
        if room < 1:
            break
    raise _exceeded(
        what="the kept part with room for a summary of the older steps",
        required=must,
        budget=budget,
    )


_MIN_ROOM = 16  # the smallest summary worth writing; below it, pins give way
_ENTRY_ROUNDS = 3  # the summary is redone smaller when the joined entry runs a token over


def _units(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    starts = unit_starts(messages)
    ends = [*starts[1:], len(messages)]
    return [list(messages[a:b]) for a, b in zip(starts, ends, strict=True)]


def _flat(units: Sequence[Sequence[BaseMessage]]) -> list[BaseMessage]:
    return [message for unit in units for message in unit]


def _is_tool_step(unit: Sequence[BaseMessage]) -> bool:
    head = unit[0]
    return isinstance(head, AIMessage) and bool(head.tool_calls)


def _is_error_unit(unit: Sequence[BaseMessage]) -> bool:
    return any(isinstance(m, ToolMessage) and m.status == "error" for m in unit)


def _recent_start(units: Sequence[Sequence[BaseMessage]], steps: int, *, floor: int) -> int:
    """Index of the first unit kept verbatim: `steps` tool steps from the end."""
    if steps == 0:
        # Even with no tool step kept, the last unit is the model's current footing.
        return max(floor, len(units) - 1)
    seen = 0
    for index in range(len(units) - 1, floor - 1, -1):
        if _is_tool_step(units[index]):
            seen += 1
            if seen == steps:
                return index
    return floor


def _unit_cost(unit: Sequence[BaseMessage], counter: TokenCounter) -> int:
    return count_message_tokens(unit, counter, reply_priming=False)


def _entry_cost(registry: PromptRegistry, counter: TokenCounter) -> int:
    """Tokens of an empty summary entry (message overhead plus heading)."""
    return count_message_tokens(
        [AIMessage(registry.heading("recap") + " ")], counter, reply_priming=False
    )


def _no_new_problems(before: Sequence[BaseMessage], after: Sequence[BaseMessage]) -> None:
    new = Counter(p.code for p in find_message_problems(after)) - Counter(
        p.code for p in find_message_problems(before)
    )
    if new:  # pragma: no cover - a bug here, not a user error
        msg = f"reduction produced an invalid message list: {new}"
        raise AssertionError(msg)


# -- plan and execute ---------------------------------------------------------------------


async def reduce_plan(
    steps: PlanTrajectory,
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    keep_recent: int = 3,
    prompts: PromptRegistry | None = None,
    fidelity: Fidelity = "medium",
) -> PlanTrajectory:
    """Fit a plan-and-execute trajectory into `budget` tokens, keeping the plan intact.

    The goal and every step's number, description and status always survive. The last
    `keep_recent` step results stay verbatim; older results are summarised (extending an
    earlier summary), and every number, date, identifier and conclusion they stated is
    checked against the summary: what it dropped is re-inserted as a key fact.

    Args:
        steps: The trajectory (`PlanTrajectory`).
        budget: Tokens its rendering may take (measured with `counter`).
        summarize: Async or sync `summarize(text, instruction)`, or a summariser object;
            default the extractive summariser. A failure falls back to it.
        counter: Counts the tokens of one string.
        keep_recent: Step results kept verbatim (`ReducerConfig.plan_keep_recent`).
        prompts: The summary instruction (language).
        fidelity: What the summary of older results keeps (`ReducerConfig.fidelity`); the
            key facts it loses come back in the list at any tier.

    Returns:
        The reduced trajectory (`steps` itself when it already fits).

    Raises:
        ContextWindowExceeded: When the plan, the recent results and the key facts alone
            exceed `budget`.

    Example:
        ```python
        import asyncio

        from langchain_contextkit.reducers import reduce_plan
        from langchain_contextkit.trajectories import PlanStep, PlanTrajectory

        plan = PlanTrajectory(
            goal="Audit the servers",
            steps=[
                PlanStep(
                    number=n,
                    description=f"Check host web-{n}",
                    status="done",
                    result=f"web-{n}: disk at {60 + n}%, uptime {n * 3} days. All services up. "
                    * 3,
                )
                for n in range(1, 9)
            ],
        )
        reduced = asyncio.run(reduce_plan(plan, budget=400, keep_recent=2))
        assert [s.number for s in reduced.steps] == list(range(1, 9))
        assert all(f"{60 + n}%" in reduced.render() for n in range(1, 9))
        print(sum(s.summarized for s in reduced.steps), "results summarised")
        # 6 results summarised
        ```
    """
    _check_budget(budget)
    check_fidelity(fidelity)
    if counter(steps.render()) <= budget:
        return steps
    with_result = [i for i, s in enumerate(steps.steps) if s.result is not None]
    fold = set(with_result[: max(0, len(with_result) - keep_recent)])
    if not fold:
        raise _exceeded(
            what="the plan with its recent results", required=counter(steps.render()), budget=budget
        )
    folded_steps = tuple(
        s.model_copy(update={"result": None, "summarized": True}) if i in fold else s
        for i, s in enumerate(steps.steps)
    )
    skeleton = steps.model_copy(update={"steps": folded_steps, "summary": None})
    folded = [s for i, s in enumerate(steps.steps) if i in fold]
    source = "\n".join(f"Step {s.number}: {s.result}" for s in folded)
    registry = prompts or PromptRegistry()
    if steps.summary:
        text = compose_extension(steps.summary, source)
        instruction_of = registry.extend_instruction
    else:
        text, instruction_of = source, registry.summary_instruction

    def fitted(summary: str, facts: Sequence[str]) -> PlanTrajectory:
        return skeleton.model_copy(update={"summary": summary or None, "key_facts": tuple(facts)})

    floor = counter(fitted("", steps.key_facts).render())
    if floor > budget:
        raise _exceeded(
            what="the plan, recent results and key facts", required=floor, budget=budget
        )
    room = budget - floor
    instruction = instruction_of(max_tokens=room, fidelity=fidelity)
    summary = await _summary_within(
        summarize, text, instruction, room, counter, registry=registry, fidelity=fidelity
    )
    # Re-insert what the summary dropped. A longer fact list leaves less room for the
    # summary; a cut summary drops more facts. So when the two do not fit together, the
    # summary is redone smaller, extractively (whole fact-bearing sentences, no further
    # model call), and the facts it cannot hold join the list.
    for _ in range(_FACT_ROUNDS):
        result = fitted(summary, _key_facts(steps, folded, summary))
        excess = counter(result.render()) - budget
        if excess <= 0:
            return result
        # The facts a shorter summary drops come back in the list and cost about as much
        # again as the summary saved: shrink by twice the excess to converge in a few rounds.
        smaller = counter(summary) - 2 * excess - 1
        if smaller < 1:
            break
        summary = _extractive(smaller, counter, registry, fidelity)(text)
    result = fitted("", _key_facts(steps, folded, ""))
    required = counter(result.render())
    if required > budget:
        raise _exceeded(
            what="the plan, recent results and key facts", required=required, budget=budget
        )
    return result


def _key_facts(trajectory: PlanTrajectory, folded: Sequence[PlanStep], summary: str) -> list[str]:
    """Earlier key facts, plus the facts of folded results that `summary` lost.

    Grouped per step ("step 3: web-3, 63%"), so a bare number keeps its context.
    """
    facts = list(trajectory.key_facts)
    # Our own "Step N:" labels must not count as keeping a result's number N.
    index = FactIndex("\n".join([_STEP_LABEL.sub("", summary), *facts]))
    if trajectory.summary:
        lost = index.missing(_STEP_LABEL.sub("", trajectory.summary))
        if lost:
            facts.append("earlier: " + ", ".join(lost))
    for step in folded:
        lost = index.missing(step.result or "")
        if lost:
            facts.append(f"step {step.number}: " + ", ".join(lost))
    return facts


# Each round shrinks the summary by the last excess, and the facts it then drops cost a
# little more, so a round rarely lands exactly; rounds are extractive (no model call), so
# eight are cheap and, measured on number-heavy plans, enough to converge.
_FACT_ROUNDS = 8
_STEP_LABEL = re.compile(r"(?m)^(?:- )?Step \d+: ")


# -- reflection ---------------------------------------------------------------------------


async def reduce_reflection(
    rounds: ReflectionTrajectory,
    budget: int,
    summarize: SummarizerLike | None = None,  # noqa: ARG001 - the reducers share one signature
    *,
    counter: TokenCounter = count_tokens,
    embeddings: Embeddings | None = None,
    similarity_threshold: float = 0.9,
) -> ReflectionTrajectory:
    """Fit a reflection loop into `budget` tokens: latest draft plus every lesson learnt.

    Superseded drafts go; every critique point ever raised stays, near-duplicates merged
    (same words in the same order, ignoring case and punctuation; or, with `embeddings`, cosine
    similarity >= `similarity_threshold`), first wording kept. Nothing is summarised, so
    `summarize` is accepted only for the common reducer signature.

    Args:
        rounds: The trajectory (`ReflectionTrajectory`).
        budget: Tokens its rendering may take (measured with `counter`).
        summarize: Unused (the shared signature).
        counter: Counts the tokens of one string.
        embeddings: Merges paraphrased critique points when given.
        similarity_threshold: Cosine similarity at which two points count as one.

    Returns:
        The reduced trajectory (`rounds` itself when it already fits).

    Raises:
        ContextWindowExceeded: When the task, the latest draft and the distinct critique
            points alone exceed `budget`.

    Example:
        ```python
        import asyncio

        from langchain_contextkit.reducers import reduce_reflection
        from langchain_contextkit.trajectories import ReflectionRound, ReflectionTrajectory

        loop = ReflectionTrajectory(
            task="Summarise the Q3 report",
            rounds=[
                ReflectionRound(
                    draft="Draft one. " * 40, critique=["Mention revenue.", "Too long."]
                ),
                ReflectionRound(draft="Draft two. " * 40, critique=["too long!", "Cite page 4."]),
                ReflectionRound(draft="Final draft: revenue up 12%, see page 4."),
            ],
        )
        reduced = asyncio.run(reduce_reflection(loop, budget=60))
        print(reduced.render())
        # Task: Summarise the Q3 report
        # Critique points so far:
        # - Mention revenue.
        # - Too long.
        # - Cite page 4.
        # Latest draft (round 3):
        # Final draft: revenue up 12%, see page 4.
        ```
    """
    _check_budget(budget)
    if counter(rounds.render()) <= budget or len(rounds.rounds) <= 1:
        if counter(rounds.render()) > budget:
            raise _exceeded(
                what="the task, latest draft and critique points",
                required=counter(rounds.render()),
                budget=budget,
            )
        return rounds
    folded_points = [*rounds.critique_points]
    for round_ in rounds.rounds[:-1]:
        folded_points.extend(round_.critique)
    latest = rounds.rounds[-1]
    kept_points = await _distinct_points(
        folded_points, latest.critique, embeddings, similarity_threshold
    )
    reduced = ReflectionTrajectory(
        task=rounds.task,
        rounds=(latest.model_copy(update={"critique": tuple(kept_points[1])}),),
        critique_points=tuple(kept_points[0]),
        folded_rounds=rounds.folded_rounds + len(rounds.rounds) - 1,
    )
    required = counter(reduced.render())
    if required > budget:
        raise _exceeded(
            what="the task, latest draft and critique points", required=required, budget=budget
        )
    return reduced


async def _distinct_points(
    folded: Sequence[str],
    latest: Sequence[str],
    embeddings: Embeddings | None,
    threshold: float,
) -> tuple[list[str], list[str]]:
    """Drop repeated points: from the folded ones, and latest ones already raised before."""
    points = [*folded, *latest]
    keep = [True] * len(points)
    # Same words in the same order, ignoring case and punctuation: "Use 2 spaces, not 4"
    # and "Use 4 spaces, not 2" are different instructions and both stay.
    keys = [normalised(p) for p in points]
    first_of: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key in first_of:
            keep[i] = False
        else:
            first_of[key] = i
    if embeddings is not None and len(points) > 1:
        vectors = np.asarray(await embeddings.aembed_documents(list(points)), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        similar = unit @ unit.T >= threshold
        for i in range(len(points)):
            if keep[i] and bool(similar[i, :i][np.asarray(keep[:i], dtype=bool)].any()):
                keep[i] = False
    split = len(folded)
    return (
        [p for p, k in zip(points[:split], keep[:split], strict=True) if k],
        [p for p, k in zip(points[split:], keep[split:], strict=True) if k],
    )


def reduce_agent_sync(
    messages: Sequence[BaseMessage],
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    keep_recent_steps: int = 3,
    prompts: PromptRegistry | None = None,
    fidelity: Fidelity = "medium",
) -> list[BaseMessage]:
    """`reduce_agent` for sync callers (same arguments, same result).

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit.reducers import reduce_agent_sync

        messages = [HumanMessage("Find the cheapest fare.")]
        for day in range(6):
            call = {"name": "search", "args": {"day": day}, "id": f"c{day}"}
            messages += [
                AIMessage("", tool_calls=[call]),
                ToolMessage(f"Day {day}: fare {300 + day} EUR. " * 8, tool_call_id=f"c{day}"),
            ]
        print(len(reduce_agent_sync(messages, budget=300, keep_recent_steps=1)) < len(messages))
        # True
        ```
    """
    return run_sync(
        reduce_agent(
            messages,
            budget,
            summarize,
            counter=counter,
            keep_recent_steps=keep_recent_steps,
            prompts=prompts,
            fidelity=fidelity,
        )
    )


def reduce_plan_sync(
    steps: PlanTrajectory,
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    keep_recent: int = 3,
    prompts: PromptRegistry | None = None,
    fidelity: Fidelity = "medium",
) -> PlanTrajectory:
    """`reduce_plan` for sync callers (same arguments, same result)."""
    return run_sync(
        reduce_plan(
            steps,
            budget,
            summarize,
            counter=counter,
            keep_recent=keep_recent,
            prompts=prompts,
            fidelity=fidelity,
        )
    )


def reduce_reflection_sync(
    rounds: ReflectionTrajectory,
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    embeddings: Embeddings | None = None,
    similarity_threshold: float = 0.9,
) -> ReflectionTrajectory:
    """`reduce_reflection` for sync callers (same arguments, same result)."""
    return run_sync(
        reduce_reflection(
            rounds,
            budget,
            summarize,
            counter=counter,
            embeddings=embeddings,
            similarity_threshold=similarity_threshold,
        )
    )


REDUCERS: Mapping[str, Callable[..., Awaitable[Any]]] = MappingProxyType(
    {"agent": reduce_agent, "plan": reduce_plan, "reflection": reduce_reflection}
)
"""The reducer of each paradigm, by name."""
