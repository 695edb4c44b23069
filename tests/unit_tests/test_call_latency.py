"""Every call ledger carries the model call's wall time and the middleware's own time."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit import ContextKitMiddleware
from langchain_contextkit.agent.ledger import CallTimer, read_ledger_log
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from pathlib import Path

SLEEP_S = 0.03


def _slow(_messages: list[BaseMessage]) -> AIMessage:
    time.sleep(SLEEP_S)
    return AIMessage("done")


def _check(path: Path, wall_ms: float) -> None:
    lines = read_ledger_log(path)
    assert len(lines) == 2
    for line in lines:
        assert line["model_ms"] >= SLEEP_S * 1000
        assert line["middleware_ms"] >= 0
    # Both parts of both calls happened inside the measured invocations.
    assert sum(line["model_ms"] + line["middleware_ms"] for line in lines) <= wall_ms


def test_the_ledger_log_carries_the_model_time_and_the_middleware_time(tmp_path: Path) -> None:
    model = ScriptedChatModel(respond=_slow, context_window=4000)
    path = tmp_path / "calls.jsonl"
    agent = create_agent(
        model, middleware=[ContextKitMiddleware.for_model(model, ledger_path=path)]
    )
    began = time.perf_counter()
    for text in ("hello", "again"):
        state = agent.invoke({"messages": [HumanMessage(text)]})
    wall_ms = (time.perf_counter() - began) * 1000
    assert state["contextkit_ledger"][-1]["model_ms"] >= SLEEP_S * 1000
    _check(path, wall_ms)


async def test_the_ledger_log_carries_the_model_time_and_the_middleware_time_async(
    tmp_path: Path,
) -> None:
    model = ScriptedChatModel(respond=_slow, context_window=4000)
    path = tmp_path / "calls.jsonl"
    agent = create_agent(
        model, middleware=[ContextKitMiddleware.for_model(model, ledger_path=path)]
    )
    began = time.perf_counter()
    for text in ("hello", "again"):
        await agent.ainvoke({"messages": [HumanMessage(text)]})
    _check(path, (time.perf_counter() - began) * 1000)


def test_the_timer_counts_a_failed_model_call_as_the_models() -> None:
    timer = CallTimer()

    def failing_call() -> None:
        with timer.model():
            time.sleep(0.01)
            raise RuntimeError

    with pytest.raises(RuntimeError):
        failing_call()
    model_ms, own_ms = timer.split()
    assert model_ms >= 10
    assert own_ms >= 0
