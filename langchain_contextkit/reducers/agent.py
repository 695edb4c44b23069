"""`reduce_agent`: reduce a tool-call loop's messages to a token budget.

Recent units (an AI message with its tool results) stay verbatim, the task stays, failed
tool results stay visible while they fit; older units fold into one summary entry. Every
tool call keeps its results, so the list stays one a provider accepts.
`reduce_agent_sync` is the same call for sync code (safe inside a running event loop).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit.compaction.summarizers import check_fidelity, render_transcript
from langchain_contextkit.messages.lists import (
    find_message_problems,
    has_tool_calls,
    repair_messages,
    split_system,
    unit_starts,
)
from langchain_contextkit.prompts import Fidelity, PromptRegistry
from langchain_contextkit.reducers.base import (
    SummarizerLike,
    SummaryCall,
    _check_budget,
    _exceeded,
    arun_steps,
    run_steps,
    summary_within,
)
from langchain_contextkit.tokens.count import (
    TokenCounter,
    count_message_tokens,
    count_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence


__all__ = ["reduce_agent", "reduce_agent_sync"]

logger = logging.getLogger(__name__)


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
        from langchain_contextkit.reducers.agent import reduce_agent

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
    return await arun_steps(
        _reduce_agent(
            messages,
            budget,
            summarize,
            counter=counter,
            keep_recent_steps=keep_recent_steps,
            prompts=prompts,
            fidelity=fidelity,
        )
    )


def _reduce_agent(
    messages: Sequence[BaseMessage],
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    keep_recent_steps: int = 3,
    prompts: PromptRegistry | None = None,
    fidelity: Fidelity = "medium",
) -> Generator[SummaryCall, Any, list[BaseMessage]]:
    """`reduce_agent` as a generator of the summaries it needs (`run_steps` drives it)."""
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
        summary = yield from summary_within(
            summarize, text, instruction, room, counter, registry=registry, fidelity=fidelity
        )
        if not summary:
            break
        content = f"{registry.heading('recap')} {summary}"
        entry: BaseMessage = AIMessage(content) if task else SystemMessage(content)
        reduced = _without_new_problems(messages, [*kept_head, entry, *pins, *recent])
        # An estimate is not additive where the heading meets the summary: check the whole.
        excess = count_message_tokens(reduced, counter) - budget
        if excess <= 0:
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
    return has_tool_calls(unit[0])  # invalid calls too: they were sent and answered


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


def _without_new_problems(
    before: Sequence[BaseMessage], after: list[BaseMessage]
) -> list[BaseMessage]:
    """`after`, repaired (and logged) if reducing added a problem `before` did not have.

    Whole units are kept, so this should never happen; if it does, the request is mended
    rather than the run ended.
    """
    new = Counter(p.code for p in find_message_problems(after)) - Counter(
        p.code for p in find_message_problems(before)
    )
    if not new:
        return after
    logger.warning("reduction produced an invalid message list (%s): repaired", dict(new))
    return repair_messages(after)[0]


# -- plan and execute ---------------------------------------------------------------------


# -- reflection ---------------------------------------------------------------------------


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

        from langchain_contextkit.reducers.agent import reduce_agent_sync

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
    return run_steps(
        _reduce_agent(
            messages,
            budget,
            summarize,
            counter=counter,
            keep_recent_steps=keep_recent_steps,
            prompts=prompts,
            fidelity=fidelity,
        )
    )
