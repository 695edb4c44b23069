"""A turn that outgrows its room is shrunk, not refused (room lent, results cut, reserve floor).

Each end-to-end case runs the untuned `ContextKitMiddleware.for_model(model)` and its
`summaries="extractive"` twin through `create_agent`; the model records every request, and
each request is checked against the window with the ledger's own counter.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langchain_contextkit import ContextKitMiddleware, ContextWindowExceeded
from langchain_contextkit.agent.middleware import OFFLOAD_NAMESPACE
from langchain_contextkit.agent.offload_stores import NoteOffloadStore
from langchain_contextkit.agent.plan import OUTPUT_RESERVE_FLOOR, WindowAssembler
from langchain_contextkit.agent.tool_results import ResultCutter
from langchain_contextkit.messages.lists import find_message_problems
from langchain_contextkit.notes import StoreNoteStore
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens.count import count_message_tokens, count_tokens, tiktoken_counter

SUMMARIES = ["model", "extractive"]

# Real-looking text: a Chinese paragraph and an Arabic one, repeated to length.
ZH = "配置文件中的选项会覆盖命令行参数，除非另有说明。系统在启动时读取这些设置并检查其有效性。"
AR = "يقرأ النظام ملف الإعدادات عند بدء التشغيل ويتحقق من صحة كل خيار قبل تطبيقه على الخدمة."


def _log(lines: int, tag: str) -> str:
    return "\n".join(
        f"2026-11-30T10:{n % 60:02d}:00Z {tag} worker[{n}] processed batch {n * 7} in {n % 13} ms"
        for n in range(lines)
    )


def _turn(results: list[str]) -> list[BaseMessage]:
    calls = [{"name": "fetch", "args": {"n": n}, "id": f"c{n}"} for n in range(len(results))]
    return [
        HumanMessage("Compare these results."),
        AIMessage("", tool_calls=calls),
        *[ToolMessage(r, tool_call_id=f"c{n}", name="fetch") for n, r in enumerate(results)],
    ]


# -- ResultCutter on its own ---------------------------------------------------------------


def test_cutter_keeps_small_results_and_cuts_the_largest_most() -> None:
    small, big, bigger = _log(5, "s"), _log(300, "b"), _log(900, "B")
    turn = _turn([small, big, bigger])
    cost = count_message_tokens(turn, count_tokens, reply_priming=False)
    fit = ResultCutter().cut(turn, cost // 4)
    assert fit is not None
    assert fit.tokens <= cost // 4
    assert fit.tokens == count_message_tokens(fit.messages, count_tokens, reply_priming=False)
    assert [m.id for m in fit.messages] == [m.id for m in turn]
    assert fit.messages[2].content == small  # under the common size: whole
    assert fit.cut == 2
    shown = [count_tokens(m.text) for m in fit.messages[3:]]
    assert abs(shown[0] - shown[1]) < 40  # water-filling: one common size for the cut ones
    assert find_message_problems(fit.messages) == []
    for message in fit.messages[3:]:
        assert "[cut to fit the window:" in message.text
        assert message.text.startswith("2026-11-30T10:00:00Z")  # the head is the result's own


def test_cutter_says_how_much_is_left_out() -> None:
    text = _log(400, "x")
    fit = ResultCutter().cut(_turn([text]), 600)
    assert fit is not None
    marker = next(line for line in fit.messages[2].text.splitlines() if line.startswith("[cut"))
    hidden, total = (int(n) for n in marker.split(": ")[1].split(" characters")[0].split(" of "))
    assert total == len(text)
    kept = fit.messages[2].text.replace(marker + "\n", "")
    assert len(kept) + hidden == len(text)
    assert fit.cut_tokens > 0


def test_cutter_saves_the_whole_result_and_points_at_it() -> None:
    notes = StoreNoteStore(InMemoryStore(), namespace=("t",), max_notes=None)
    store = NoteOffloadStore(notes)
    text = _log(600, "saved")
    fit = ResultCutter(count_tokens, store).cut(_turn([text]), 700)
    assert fit is not None
    assert fit.stored == 1
    marker = next(line for line in fit.messages[2].text.splitlines() if line.startswith("[cut"))
    args = json.loads(marker[marker.index("{") : marker.index("}") + 1])
    assert args["action"] == "read"
    parts = [c for _, c in store.note_ids(_stored_key(fit.messages[2]), text)]
    assert "".join(parts) == text
    assert notes.get(args["note_id"]).content in parts


def _stored_key(message: BaseMessage) -> str:
    marker = next(line for line in message.text.splitlines() if line.startswith("[cut"))
    note_id = json.loads(marker[marker.index("{") : marker.index("}") + 1])["note_id"]
    key = note_id.removeprefix("note_offload_")
    return key.split("_8000c_p")[0]


def test_cutter_saves_only_what_it_cuts() -> None:
    notes = StoreNoteStore(InMemoryStore(), namespace=("t",), max_notes=None)
    small, big = _log(5, "small"), _log(600, "big")
    fit = ResultCutter(count_tokens, NoteOffloadStore(notes)).cut(_turn([small, big]), 700)
    assert fit is not None
    assert fit.cut == 1
    assert fit.stored == 1
    assert fit.messages[2].content == small
    saved = [notes.get(info.id).content for info in notes.list_notes()]
    assert saved
    assert all(content in big for content in saved)  # the small one was never written


def test_cutter_markers_only_and_hopeless_turns() -> None:
    turn = _turn([_log(200, "a"), _log(200, "b")])
    markers = ResultCutter().cut(turn, None)
    assert markers is not None
    assert markers.cut == 2
    assert all(m.text.startswith("[cut") for m in markers.messages[2:])
    assert ResultCutter().cut([HumanMessage("x " * 500)], 10) is None  # nothing to cut


def test_cutter_async_twin_gives_the_same_view() -> None:
    turn = _turn([_log(300, "a"), _log(700, "b")])
    sync = ResultCutter().cut(turn, 900)
    async_ = asyncio.run(ResultCutter().acut(turn, 900))
    assert sync is not None
    assert async_ is not None
    assert [m.content for m in sync.messages] == [m.content for m in async_.messages]


# -- through the agent -----------------------------------------------------------------------


class _Recorder:
    """Scripted agent: one round of tool calls, then an answer; recaps answered plainly."""

    def __init__(self, calls: int = 1) -> None:
        self.calls = calls

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "Summar" in last.text[:200]:
            return AIMessage("Facts:\n- User: noted.")
        if isinstance(last, HumanMessage):
            calls = [{"name": "fetch", "args": {"n": n}, "id": f"c{n}"} for n in range(self.calls)]
            return AIMessage("", tool_calls=calls)
        return AIMessage("Done.")


def _agent(
    window: int,
    result: str | list[str],
    *,
    summaries: str,
    calls: int = 1,
    system_prompt: str | None = None,
    store: Any = None,
    max_output: int = 1_000,
) -> tuple[Any, ScriptedChatModel, ContextKitMiddleware]:
    results = result if isinstance(result, list) else [result] * calls

    @tool
    def fetch(n: int) -> str:
        """Fetch one page."""
        return results[n]

    model = ScriptedChatModel(
        respond=_Recorder(len(results)), context_window=window, max_output_tokens=max_output
    )
    middleware = ContextKitMiddleware.for_model(model, summaries=summaries)  # type: ignore[arg-type]
    agent = create_agent(
        model,
        tools=[fetch],
        middleware=[middleware],
        system_prompt=system_prompt,
        checkpointer=InMemorySaver(),
        store=store,
    )
    return agent, model, middleware


def _within_window(model: ScriptedChatModel, middleware: ContextKitMiddleware, state: dict) -> None:
    counter = middleware.token_counter
    for request, ledger in zip(model.requests, state["contextkit_ledger"], strict=False):
        assert find_message_problems(request) == []
        tokens = count_message_tokens(request, counter) + ledger["tools"]
        assert tokens <= ledger["window"] - ledger["output_reserve"]


@pytest.mark.parametrize("summaries", SUMMARIES)
@pytest.mark.parametrize("text", [ZH, AR], ids=["zh", "ar"])
def test_a_first_turn_that_fits_the_window_is_sent(summaries: str, text: str) -> None:
    """Issue 28's first figure: 4k window, a long user message and one long tool result."""
    user = (text * 40)[:700]
    result = (text * 80)[:2_500]
    agent, model, middleware = _agent(4_000, result, summaries=summaries, max_output=800)
    state = agent.invoke({"messages": [HumanMessage(user)]}, {"configurable": {"thread_id": "1"}})
    assert state["messages"][-1].text == "Done."
    ledger = state["contextkit_ledger"][-1]
    assert ledger["cut"] == 0
    assert not ledger["reduced"]
    assert model.requests[-1][-1].content == result
    _within_window(model, middleware, state)


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_a_result_larger_than_the_window_is_cut_not_refused(summaries: str) -> None:
    huge = _log(4_000, "huge")  # ~100k tokens against an 8k window
    agent, model, middleware = _agent(8_000, huge, summaries=summaries)
    state = agent.invoke(
        {"messages": [HumanMessage("Read the log.")]}, {"configurable": {"thread_id": "1"}}
    )
    assert state["messages"][-1].text == "Done."
    assert state["messages"][-2].content == huge  # the stored history keeps it whole
    ledger = state["contextkit_ledger"][-1]
    assert ledger["cut"] == 1
    assert ledger["cut_tokens"] > 50_000
    sent = model.requests[-1][-1]
    assert isinstance(sent, ToolMessage)
    assert "[cut to fit the window:" in sent.text
    _within_window(model, middleware, state)


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_ten_parallel_results_keep_every_pair(summaries: str) -> None:
    results = [_log(200, f"r{n}") for n in range(10)]  # ~5k tokens each
    agent, model, middleware = _agent(32_000, results, summaries=summaries)
    state = agent.invoke(
        {"messages": [HumanMessage("Fetch all ten.")]}, {"configurable": {"thread_id": "1"}}
    )
    last = model.requests[-1]
    answered = [m for m in last if isinstance(m, ToolMessage)]
    assert sorted(m.tool_call_id for m in answered) == [f"c{n}" for n in range(10)]
    assert state["contextkit_ledger"][-1]["cut"] == 10
    _within_window(model, middleware, state)


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_parallel_results_that_fit_together_are_sent_whole(summaries: str) -> None:
    results = [_log(40, f"r{n}") for n in range(4)]  # ~4k tokens in all, 8k window
    agent, model, middleware = _agent(8_000, results, summaries=summaries)
    state = agent.invoke(
        {"messages": [HumanMessage("Fetch all four.")]}, {"configurable": {"thread_id": "1"}}
    )
    sent = [m.content for m in model.requests[-1] if isinstance(m, ToolMessage)]
    assert sent == results
    assert state["contextkit_ledger"][-1]["cut"] == 0
    _within_window(model, middleware, state)


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_the_agents_store_holds_what_was_cut(summaries: str) -> None:
    store = InMemoryStore()
    huge = _log(600, "stored")  # ~15k tokens: under the offload threshold, over the window
    agent, model, _ = _agent(8_000, huge, summaries=summaries, store=store)
    agent.invoke({"messages": [HumanMessage("Read it.")]}, {"configurable": {"thread_id": "1"}})
    sent = model.requests[-1][-1]
    marker = next(line for line in sent.text.splitlines() if line.startswith("[cut"))
    assert "the whole result is saved" in marker
    notes = StoreNoteStore(store, namespace=OFFLOAD_NAMESPACE, max_notes=None)
    offload = NoteOffloadStore(notes)
    parts = offload.note_ids(_stored_key(sent), huge)
    assert "".join(notes.get(note_id).content for note_id, _ in parts) == huge


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_with_a_store_results_over_the_large_threshold_are_offloaded(summaries: str) -> None:
    store = InMemoryStore()
    big = _log(1_200, "big")  # ~30k tokens: over 20,000, within a 128k window
    agent, model, _ = _agent(128_000, big, summaries=summaries, store=store)
    state = agent.invoke(
        {"messages": [HumanMessage("Read it.")]}, {"configurable": {"thread_id": "1"}}
    )
    ledger = state["contextkit_ledger"][-1]
    assert ledger["offloaded"] == 1
    assert ledger["cut"] == 0
    assert "[offloaded:" in model.requests[-1][-1].text
    keys = store.search(OFFLOAD_NAMESPACE, limit=100)
    assert keys  # written under the namespace the pointer names


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_without_a_store_nothing_under_the_window_is_offloaded(summaries: str) -> None:
    big = _log(1_200, "big")
    agent, model, _ = _agent(128_000, big, summaries=summaries)
    state = agent.invoke(
        {"messages": [HumanMessage("Read it.")]}, {"configurable": {"thread_id": "1"}}
    )
    assert state["contextkit_ledger"][-1]["offloaded"] == 0
    assert model.requests[-1][-1].content == big


def _about(tokens: float, phrase: str) -> str:
    """`phrase` repeated to about `tokens` tokens (by `count_tokens`)."""
    return phrase * round(tokens / count_tokens(phrase * 100) * 100)


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_a_huge_system_prompt_lowers_the_reserve_to_its_floor(summaries: str) -> None:
    system = _about(0.91 * 8_192, "You follow the runbook exactly. ")
    agent, model, middleware = _agent(
        8_192, "ok", summaries=summaries, system_prompt=system, max_output=1_000
    )
    state = agent.invoke({"messages": [HumanMessage("Go.")]}, {"configurable": {"thread_id": "1"}})
    assert state["messages"][-1].text == "Done."
    ledger = state["contextkit_ledger"][-1]
    assert ledger["output_reserve"] == OUTPUT_RESERVE_FLOOR
    assert ledger["system"] > 0.85 * 8_192
    _within_window(model, middleware, state)


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_the_one_refusal_names_every_part(summaries: str) -> None:
    system = "You follow the runbook exactly. " * 1_300  # over the window on its own
    agent, model, _ = _agent(8_192, "ok", summaries=summaries, system_prompt=system)
    with pytest.raises(ContextWindowExceeded) as caught:
        agent.invoke({"messages": [HumanMessage("Go.")]}, {"configurable": {"thread_id": "1"}})
    text = str(caught.value)
    for part in ("system prompt", "tool schemas", "user's last message", "output reserve"):
        assert part in text
    assert model.requests == []  # nothing was sent


@pytest.mark.parametrize("summaries", SUMMARIES)
def test_the_async_path_shrinks_the_same_way(summaries: str) -> None:
    huge = _log(3_000, "async")
    agent, model, middleware = _agent(8_000, huge, summaries=summaries)
    state = asyncio.run(
        agent.ainvoke(
            {"messages": [HumanMessage("Read the log.")]}, {"configurable": {"thread_id": "1"}}
        )
    )
    assert state["contextkit_ledger"][-1]["cut"] == 1
    _within_window(model, middleware, state)


def test_the_block_gives_way_before_the_turn_is_refused() -> None:
    from langchain_contextkit import CallableSource, RetrievalResult

    def docs(query: str) -> list[RetrievalResult]:
        return [RetrievalResult(_log(30, f"doc{n}"), 0.9 - n / 10, "rag") for n in range(5)]

    assembler = WindowAssembler(window=2_000, sources=[CallableSource("rag", docs)])
    turn = [HumanMessage("Ask " + "x " * 1_200)]  # the question alone takes most of the room
    result = assembler.assemble(turn)
    assert result.ledger.retrieval == 0
    assert result.messages[-1] is turn[0]
    assert result.ledger.prompt <= 2_000 - result.ledger.output_reserve


@pytest.mark.allow_hosts(["127.0.0.1"])
def test_chatopenai_gets_a_lower_max_tokens_when_the_reserve_shrinks() -> None:
    """Through HTTP: the stub refuses prompt + max_tokens over the window, as OpenAI does."""
    pytest.importorskip("langchain_openai")
    from provider_stubs.openai_stub import OpenAIStub, Reply

    def respond(kind: str, messages: list[dict[str, Any]]) -> Reply:
        return Reply(text="Done.")

    system = "You follow the runbook exactly. " * 1_100  # ~7,700 cl100k tokens of 8,192
    with OpenAIStub(respond, window=8_192) as stub:
        llm = stub.chat_model(max_tokens=1_000)
        middleware = ContextKitMiddleware.for_model(
            llm, summaries="extractive", token_counter=tiktoken_counter("cl100k_base")
        )
        agent = create_agent(llm, middleware=[middleware], system_prompt=system)
        state = agent.invoke({"messages": [HumanMessage("Go.")]})
        assert state["messages"][-1].text == "Done."
        assert [record.status for record in stub.records] == [200]
        assert stub.records[0].max_tokens == OUTPUT_RESERVE_FLOOR
