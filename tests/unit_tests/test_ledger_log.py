"""Call ledgers as JSON lines: the writer, the middleware option and the callback handler."""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import (
    CallLedger,
    ConfigError,
    ContextKitMiddleware,
    LedgerCallbackHandler,
    LedgerWriter,
)
from langchain_contextkit.agent.ledger import LEDGER_EVENT, ledger_record, read_ledger_log
from langchain_contextkit.errors import LedgerLogError
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from pathlib import Path

LEDGER = CallLedger(
    call=3,
    window=8000,
    output_reserve=1000,
    system=400,
    tools=200,
    summary=300,
    retrieval=900,
    history=1500,
    turn=250,
    free=3450,
    compacted=True,
    reduced=False,
    estimated=3400,
    factor=1.04,
    reported=3610,
    cache_read=2048,
    retried=True,
    offloaded=1,
    offloaded_tokens=5000,
)


def test_a_line_round_trips_every_ledger_field(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path / "logs" / "calls.jsonl")  # folders made on first write
    assert writer.write(LEDGER, thread_id="t-1")
    gate = {"passed": False, "checks": [{"name": "max_tokens", "passed": False, "value": 9}]}
    assert writer.write({**LEDGER.to_dict(), "gate": gate})
    first, second = read_ledger_log(writer.path)
    assert {k: first[k] for k in LEDGER.to_dict()} == LEDGER.to_dict()
    assert first["prompt"] == LEDGER.prompt == 8000 - 3450 - 1000
    assert first["thread_id"] == "t-1"
    assert first["gate"] is None
    assert datetime.fromisoformat(first["timestamp"]).tzinfo is not None
    assert second["gate"] == gate
    assert second["thread_id"] is None
    # One JSON object per physical line, nothing else.
    raw = writer.path.read_text(encoding="utf-8")
    assert raw.count("\n") == 2
    assert raw.endswith("\n")


def test_ledger_record_keeps_a_given_prompt_and_time() -> None:
    moment = datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    line = ledger_record({**LEDGER.to_dict(), "prompt": 1}, timestamp=moment)
    assert line["prompt"] == 1
    assert line["timestamp"] == "2025-03-04T05:06:07+00:00"


def test_threads_appending_at_once_give_whole_lines(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path / "calls.jsonl")
    threads, per_thread = 8, 150
    # Lines longer than a pipe buffer (4 KiB), so a split write would show.
    padding = "x" * 6000
    barrier = threading.Barrier(threads)

    def work(worker: int) -> None:
        barrier.wait()
        for index in range(per_thread):
            record = {**LEDGER.to_dict(), "call": index + 1, "pad": padding}
            assert writer.write(record, thread_id=f"w{worker}")

    pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    lines = writer.path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == threads * per_thread
    records = [json.loads(line) for line in lines]  # every line is whole JSON
    for worker in range(threads):
        calls = [r["call"] for r in records if r["thread_id"] == f"w{worker}"]
        assert calls == list(range(1, per_thread + 1))  # each thread's lines in its order
    assert all(r["pad"] == padding for r in records)


def test_a_folder_is_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a folder"):
        LedgerWriter(tmp_path)
    with pytest.raises(ConfigError, match="is a folder"):
        ContextKitMiddleware(window=4000, ledger_path=tmp_path)


def test_a_failed_write_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    writer = LedgerWriter(blocker / "calls.jsonl")  # its parent is a file: cannot be made
    with caplog.at_level(logging.WARNING, "langchain_contextkit.agent.ledger"):
        assert writer.write(LEDGER) is False
    assert "could not write the call's ledger" in caplog.text


# -- in an agent ----------------------------------------------------------------------------


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}=42"


def _reply(messages: list[BaseMessage]) -> AIMessage:
    """Call the tool once per turn, then answer."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(f"Found: {messages[-1].text}")
    call = {"name": "lookup", "args": {"key": "k"}, "id": f"c{len(messages)}"}
    return AIMessage("", tool_calls=[call])


def _agent(model: ScriptedChatModel, **options: Any) -> Any:
    middleware = ContextKitMiddleware.for_model(model, summaries="extractive", **options)
    return create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver())


def _check_lines(lines: list[dict[str, Any]], state: dict[str, Any], thread: str) -> None:
    assert [line["call"] for line in lines] == [1, 2, 3, 4]  # two model calls per turn
    assert all(line["thread_id"] == thread for line in lines)
    stored = state["contextkit_ledger"]
    assert [
        {k: line[k] for k in entry} for line, entry in zip(lines, stored, strict=True)
    ] == stored


def test_the_middleware_writes_one_line_per_model_call(tmp_path: Path) -> None:
    model = ScriptedChatModel(respond=_reply, context_window=4000)
    path = tmp_path / "calls.jsonl"
    agent = _agent(model, ledger_path=path)
    config = {"configurable": {"thread_id": "th"}}
    for text in ("first question", "second question"):
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
    assert len(model.requests) == 4
    _check_lines(read_ledger_log(path), state, "th")


async def test_the_middleware_writes_one_line_per_model_call_async(tmp_path: Path) -> None:
    model = ScriptedChatModel(respond=_reply, context_window=4000)
    path = tmp_path / "calls.jsonl"
    agent = _agent(model, ledger_path=path)
    config = {"configurable": {"thread_id": "th"}}
    for text in ("first question", "second question"):
        state = await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    _check_lines(read_ledger_log(path), state, "th")


def test_the_callback_handler_writes_the_same_lines(tmp_path: Path) -> None:
    model = ScriptedChatModel(respond=_reply, context_window=4000)
    agent = _agent(model, ledger_path=tmp_path / "option.jsonl")
    handler = LedgerCallbackHandler(tmp_path / "handler.jsonl")
    config = {"configurable": {"thread_id": "th"}, "callbacks": [handler]}
    for text in ("first question", "second question"):
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
    lines = read_ledger_log(tmp_path / "handler.jsonl")
    _check_lines(lines, state, "th")
    assert lines == read_ledger_log(tmp_path / "option.jsonl")


async def test_the_callback_handler_writes_the_same_lines_async(tmp_path: Path) -> None:
    model = ScriptedChatModel(respond=_reply, context_window=4000)
    agent = _agent(model)
    handler = LedgerCallbackHandler(tmp_path / "handler.jsonl")
    config = {"configurable": {"thread_id": "th"}, "callbacks": [handler]}
    for text in ("first question", "second question"):
        state = await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    _check_lines(read_ledger_log(tmp_path / "handler.jsonl"), state, "th")


def test_an_unwritable_log_never_breaks_the_agent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    model = ScriptedChatModel(respond=_reply, context_window=4000)
    agent = _agent(model, ledger_path=blocker / "calls.jsonl")
    with caplog.at_level(logging.WARNING):
        state = agent.invoke(
            {"messages": [HumanMessage("q")]}, {"configurable": {"thread_id": "1"}}
        )
    assert state["messages"][-1].text == "Found: k=42"
    assert caplog.text.count("could not write the call's ledger") == 2


def test_the_handler_ignores_other_events_and_reads_the_thread_from_metadata(
    tmp_path: Path,
) -> None:
    handler = LedgerCallbackHandler(tmp_path / "calls.jsonl")
    line = ledger_record(LEDGER)
    handler.on_custom_event("something_else", line, run_id=uuid4())
    handler.on_custom_event(LEDGER_EVENT, "not a mapping", run_id=uuid4())
    assert not handler.writer.path.exists()
    handler.on_custom_event(LEDGER_EVENT, line, run_id=uuid4(), metadata={"thread_id": "m"})
    (written,) = read_ledger_log(handler.writer.path)
    assert written["thread_id"] == "m"
    assert line["thread_id"] is None  # the event's data is not modified


# -- reading --------------------------------------------------------------------------------


def test_reading_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    good = json.dumps(ledger_record(LEDGER))
    path.write_text(f"{good}\n\n{good}\n{{not json\n", encoding="utf-8")
    with pytest.raises(LedgerLogError, match=r"calls\.jsonl:4: not a JSON line"):
        read_ledger_log(path)
    path.write_text(f"{good}\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(LedgerLogError, match=r":2: not a call ledger: a JSON list"):
        read_ledger_log(path)
    path.write_text(f'{good}\n{good}\n{{"call": 1, "window": "big"}}\n', encoding="utf-8")
    with pytest.raises(LedgerLogError, match=r":3: .*'window' must be an integer"):
        read_ledger_log(path)
    with pytest.raises(LedgerLogError, match="cannot read the ledger log"):
        read_ledger_log(tmp_path / "missing.jsonl")


def test_reported_usage_and_cache_reads_reach_the_line(tmp_path: Path) -> None:
    from langchain_contextkit.dashboard import summarize_ledgers

    usage = [(120, 0), (180, 96), (260, 160)]

    def respond(messages: list[BaseMessage]) -> AIMessage:
        tokens, cached = usage[sum(isinstance(m, AIMessage) for m in messages)]
        return AIMessage(
            "ok",
            usage_metadata={
                "input_tokens": tokens,
                "output_tokens": 2,
                "total_tokens": tokens + 2,
                "input_token_details": {"cache_read": cached},
            },
        )

    model = ScriptedChatModel(respond=respond, context_window=4000)
    path = tmp_path / "calls.jsonl"
    agent = _agent(model, ledger_path=path)
    config = {"configurable": {"thread_id": "u"}}
    for text in ("one", "two", "three"):
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    lines = read_ledger_log(path)
    assert [(line["reported"], line["cache_read"]) for line in lines] == usage
    figures = summarize_ledgers(lines).overall
    assert figures.cache_hit_rate == pytest.approx((0 + 96 + 160) / (120 + 180 + 260))
    assert figures.input_source == "reported"
    assert figures.input_mean == pytest.approx((120 + 180 + 260) / 3)


def test_a_ledger_dict_is_asdict_with_its_gate_copied() -> None:
    import dataclasses

    from langchain_contextkit.agent.ledger import CallLedger

    base = {
        "call": 3, "window": 8_000, "output_reserve": 1_000, "system": 40, "tools": 300,
        "summary": 120, "retrieval": 0, "history": 2_000, "turn": 90, "free": 4_450,
        "compacted": True, "reduced": False,
    }  # fmt: skip
    gate = {"passed": False, "checks": [{"name": "max_request_tokens", "value": 18}]}
    for ledger in (CallLedger(**base), CallLedger(**base, gate=gate, model_ms=12.5)):
        data = ledger.to_dict()
        assert data == dataclasses.asdict(ledger)
        if ledger.gate is not None:
            data["gate"]["checks"][0]["value"] = 0  # the copy, not the ledger's own
            assert ledger.gate["checks"][0]["value"] == 18
