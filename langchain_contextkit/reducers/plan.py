"""`reduce_plan`: reduce a plan-and-execute trajectory, every step's number and status kept.

The goal and every step's number, description and status survive; recent results stay
verbatim; older results are summarised, and every number, date, identifier and conclusion
they stated is checked against the summary and re-inserted as a key fact when it went
missing. `reduce_plan_sync` is the same call for sync code.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from langchain_contextkit.compaction.facts import FactIndex
from langchain_contextkit.compaction.summarizers import check_fidelity, compose_extension
from langchain_contextkit.prompts import Fidelity, PromptRegistry
from langchain_contextkit.reducers.base import (
    SummarizerLike,
    SummaryCall,
    _check_budget,
    _exceeded,
    _extractive,
    arun_steps,
    run_steps,
    summary_within,
)
from langchain_contextkit.tokens.count import (
    TokenCounter,
    count_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

    from langchain_contextkit.reducers.trajectories import (
        PlanStep,
        PlanTrajectory,
    )


__all__ = ["reduce_plan", "reduce_plan_sync"]


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

        from langchain_contextkit.reducers.plan import reduce_plan
        from langchain_contextkit.reducers.trajectories import PlanStep, PlanTrajectory

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
    return await arun_steps(
        _reduce_plan(
            steps,
            budget,
            summarize,
            counter=counter,
            keep_recent=keep_recent,
            prompts=prompts,
            fidelity=fidelity,
        )
    )


def _reduce_plan(
    steps: PlanTrajectory,
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    keep_recent: int = 3,
    prompts: PromptRegistry | None = None,
    fidelity: Fidelity = "medium",
) -> Generator[SummaryCall, Any, PlanTrajectory]:
    """`reduce_plan` as a generator of the summaries it needs (`run_steps` drives it)."""
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
    summary = yield from summary_within(
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
    return run_steps(
        _reduce_plan(
            steps,
            budget,
            summarize,
            counter=counter,
            keep_recent=keep_recent,
            prompts=prompts,
            fidelity=fidelity,
        )
    )
