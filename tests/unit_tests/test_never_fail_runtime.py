"""Never fail the agent, however it is run: model switches, restarts, threads, streams.

Issue 28 item 6's runtime cases: a model swapped mid-thread for a smaller-window one by
another middleware (each call sized from the model actually called, item 3); a restart
(a fresh middleware and a new agent over the same checkpointed state send what the warm
process sends, item 5); twenty concurrent async threads; `agent.stream` and
`agent.astream`; structured output (`create_agent(response_format=ToolStrategy(...))`).
Every case runs on the default and on ``summaries="extractive"``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from _never_fail import (
    SUMMARIES,
    Provider,
    Reply,
    Run,
    agent_reply,
    assert_history_whole,
    assert_requests_fit_and_valid,
    build,
    bulky,
    facts_in,
    is_recap_request,
    play,
    turn,
)
from langchain.agents.middleware import wrap_model_call
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from langchain_contextkit.messages.lists import find_message_problems

pytestmark = pytest.mark.parametrize("summaries", SUMMARIES)


def _results(keys: range, tokens: int = 250) -> dict[str, str]:
    return {f"r{n}": bulky(tokens, f"r{n}") for n in keys}


def test_a_model_switched_mid_thread_gets_requests_sized_for_its_window(summaries: str) -> None:
    big = Provider(window=16_000)
    small = Provider(window=4_000, max_output=500)
    switched = {"on": False}

    @wrap_model_call  # type: ignore[arg-type]
    def downgrade(request: Any, handler: Any) -> Any:
        return handler(request.override(model=small.model) if switched["on"] else request)

    run = build(big, summaries, results=_results(range(1, 25)), before=[downgrade])
    play(run, [turn(n, fetch=[f"r{n}"], filler=4) for n in range(1, 17)])
    assert big.tokens(run.last_request(), big.model.request_tools[-1]) > 4_000, "grow it more"
    switched["on"] = True
    play(run, [turn(n, fetch=[f"r{n}"], filler=4) for n in range(17, 25)])
    assert_history_whole(run)
    after = run.ledgers.lines[len(big.agent_requests()) :]
    assert after, "no call reached the smaller model"
    reserve = min(int(line["output_reserve"]) for line in after)
    for request, tools in zip(small.model.requests, small.model.request_tools, strict=True):
        assert find_message_problems(request) == []
        size = small.tokens(request, tools)
        assert size <= small.window - reserve, f"{size} tokens sent to a {small.window} window"
    assert {23, 24} <= facts_in(small.agent_requests()[-1])


def _comparable(request: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """A request as the provider reads it (message ids are per process, not content)."""
    return [
        (
            type(m).__name__,
            m.text,
            tuple((c["name"], repr(c["args"]), c["id"]) for c in getattr(m, "tool_calls", [])),
            getattr(m, "tool_call_id", None),
        )
        for m in request
    ]


def test_a_restart_sends_what_the_warm_process_sends(summaries: str) -> None:
    # The warm thread keeps one middleware; the cold one gets a fresh middleware and a new
    # agent at every turn (each turn a restart) over the same checkpointer.
    saver = InMemorySaver()
    warm_model, cold_model = Provider(window=4_000, max_output=500), Provider(4_000, 500)
    results = _results(range(1, 25))
    warm = build(warm_model, summaries, results=results, checkpointer=saver, thread="warm")
    for n in range(1, 25):
        user = turn(n, fetch=[f"r{n}"], filler=4)
        play(warm, [user])
        cold = build(cold_model, summaries, results=results, checkpointer=saver, thread="cold")
        play(cold, [user])
        warm_requests = [_comparable(r) for r in warm_model.model.requests]
        cold_requests = [_comparable(r) for r in cold_model.model.requests]
        assert cold_requests == warm_requests, (
            f"turn {n}: the restarted process sent another request"
        )
    assert any(is_recap_request(r) for r in warm_model.model.requests) or summaries == "extractive"
    assert len(warm.ledgers.lines) == len(warm_model.agent_requests())
    assert any(line["compacted"] for line in warm.ledgers.lines), "no compaction: grow the case"


THREADS = 20
THREAD_TURNS = 6


def _item(thread: int, n: int) -> int:
    return 100 * (thread + 1) + n


async def test_twenty_concurrent_async_threads_stay_apart(summaries: str) -> None:
    provider = Provider(window=4_000, max_output=500)
    keys = [_item(t, n) for t in range(THREADS) for n in range(1, THREAD_TURNS + 1)]
    results = {f"r{k}": bulky(300, f"r{k}") for k in keys}
    run = build(provider, summaries, results=results)

    async def one_thread(thread: int) -> None:
        config = {**run.config, "configurable": {"thread_id": f"t{thread}"}}
        for n in range(1, THREAD_TURNS + 1):
            item = _item(thread, n)
            user = turn(item, fetch=[f"r{item}"], filler=3)
            await run.agent.ainvoke({"messages": [HumanMessage(user)]}, config)

    await asyncio.gather(*(one_thread(t) for t in range(THREADS)))
    assert_requests_fit_and_valid(run, paired=False)
    requests = provider.agent_requests()
    for thread in range(THREADS):
        own = {_item(thread, n) for n in range(1, THREAD_TURNS + 1)}
        config = {"configurable": {"thread_id": f"t{thread}"}}
        stored = run.agent.get_state(config).values["messages"]
        assert facts_in(stored) == own, f"thread {thread}'s history is not its own"
        last_turn = f"Turn {_item(thread, THREAD_TURNS)}:"
        last = [
            r
            for r in requests
            if any(last_turn in m.text for m in r if isinstance(m, HumanMessage))
        ]
        assert last, f"thread {thread} never reached its last turn"
        seen = facts_in(last[-1])
        assert seen <= own, f"thread {thread} was shown another thread's facts {sorted(seen - own)}"
        assert _item(thread, THREAD_TURNS) in seen


def _stream_turns(run: Run, users: list[str]) -> None:
    for user in users:
        run.sent_users.append(user)
        chunks = list(
            run.agent.stream(
                {"messages": [HumanMessage(user)]}, run.config, stream_mode=["updates", "messages"]
            )
        )
        assert chunks, "the stream produced nothing"
        run.states.append(run.agent.get_state(run.config).values)


def test_streaming_turns(summaries: str) -> None:
    provider = Provider(window=4_000, max_output=500)
    run = build(provider, summaries, results=_results(range(1, 21)))
    _stream_turns(run, [turn(n, fetch=[f"r{n}"], filler=4) for n in range(1, 21)])
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    assert any(line["compacted"] for line in run.ledgers.lines)
    assert {19, 20} <= facts_in(run.last_request())


async def test_async_streaming_turns(summaries: str) -> None:
    provider = Provider(window=4_000, max_output=500)
    run = build(provider, summaries, results=_results(range(1, 21)))
    for n in range(1, 21):
        user = turn(n, fetch=[f"r{n}"], filler=4)
        run.sent_users.append(user)
        chunks = [
            c async for c in run.agent.astream({"messages": [HumanMessage(user)]}, run.config)
        ]
        assert chunks
    run.states.append((await run.agent.aget_state(run.config)).values)
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    assert {19, 20} <= facts_in(run.last_request())


class Answer(BaseModel):
    """The structured reply of one turn."""

    status: str
    item: int


_TURN = re.compile(r"^Turn (\d+):", re.MULTILINE)


def _structured(messages: list[BaseMessage]) -> Reply:
    """Fetch when asked, then answer through the `Answer` tool (ToolStrategy)."""
    last = messages[-1]
    if isinstance(last, HumanMessage) and "fetch:" in last.text:
        return agent_reply(messages)
    human = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    found = _TURN.search(human.text)
    item = int(found.group(1)) if found else 0
    call = {"name": "Answer", "args": {"status": "checked", "item": item}, "id": f"answer-{item}"}
    return AIMessage("", tool_calls=[call])


def test_structured_output(summaries: str) -> None:
    provider = Provider(window=4_000, max_output=500, agent=_structured)
    results = _results(range(1, 21))
    run = build(provider, summaries, results=results, response_format=ToolStrategy(Answer))
    for n in range(1, 21):
        play(run, [turn(n, fetch=[f"r{n}"], filler=4)])
        assert run.last_state["structured_response"] == Answer(status="checked", item=n)
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    assert any(line["compacted"] for line in run.ledgers.lines)
    stored = run.stored_messages()
    assert sum(isinstance(m, ToolMessage) for m in stored) == 40  # fetch + Answer per turn
