"""QualityGate: each threshold at its boundary, the targets it reads, and its three uses."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langchain_contextkit import (
    CallableSource,
    CallLedger,
    ConfigError,
    ContextBuilder,
    ContextConfig,
    ContextKitMiddleware,
    ContextQualityError,
    ContextQualityWarning,
    GateResult,
    QualityGate,
    RetrievalResult,
    WindowAssembler,
    assert_context_quality,
    context_node,
    count_message_tokens,
)
from langchain_contextkit.agent.middleware import LEDGER_KEY
from langchain_contextkit.agent.nodes import ContextGraphState
from langchain_contextkit.quality.gate import redundancy, shingles
from langchain_contextkit.testing import ScriptedChatModel

FACT = "Order 1042 ships on Friday."


def orders(query: str) -> list[RetrievalResult]:
    return [RetrievalResult(FACT, 0.9, "rag")]


def noise(query: str) -> list[RetrievalResult]:
    return [
        RetrievalResult("The user prefers short answers.", 0.8, "memory"),
        RetrievalResult("The user lives in Lyon.", 0.7, "memory"),
    ]


def builder(*sources: CallableSource) -> ContextBuilder:
    return ContextBuilder(
        ContextConfig(max_tokens=4000, source_ratios={"rag": 0.5, "memory": 0.5}),
        sources=list(sources),
    )


def ledger(**parts: int) -> CallLedger:
    values = {
        "call": 1,
        "window": 1000,
        "output_reserve": 200,
        "system": 50,
        "tools": 0,
        "summary": 0,
        "retrieval": 250,
        "history": 100,
        "turn": 100,
        "free": 300,
        "compacted": False,
        "reduced": False,
    }
    values.update(parts)
    return CallLedger(**values)  # type: ignore[arg-type]


# -- required facts ------------------------------------------------------------------------


def test_a_request_missing_a_required_fact_fails_and_passes_once_it_is_there() -> None:
    gate = QualityGate(required_facts=["Order 1042", re.compile(r"ships on \w+day")])
    without = builder(CallableSource("memory", noise)).build_report("when does 1042 ship?")
    with_it = builder(CallableSource("rag", orders), CallableSource("memory", noise)).build_report(
        "when does 1042 ship?"
    )
    failed = gate.check(without)
    assert not failed.passed
    check = failed["required_facts"]
    assert (check.passed, check.figure, check.threshold) == (False, 0, 2)
    assert "'Order 1042'" in check.detail
    assert "/ships on \\w+day/" in check.detail
    passed = gate.check(with_it)
    assert passed.passed
    assert passed["required_facts"].figure == 2


def test_a_fact_is_a_case_sensitive_substring_and_a_pattern_is_searched() -> None:
    request = [HumanMessage("order 1042 ships on friday")]
    assert not QualityGate(required_facts=["Order 1042"]).check(request).passed
    pattern = re.compile("order 1042", re.IGNORECASE)
    assert QualityGate(required_facts=[pattern]).check(request).passed
    one = QualityGate(required_facts="order 1042")  # a lone string is one fact
    assert one.required_facts == ("order 1042",)
    assert one.check(request).passed


# -- each threshold at its boundary ----------------------------------------------------------


def test_max_request_tokens_passes_at_the_limit_and_fails_one_below() -> None:
    request = [SystemMessage("Be brief."), HumanMessage("When does order 1042 ship?")]
    size = count_message_tokens(request, len)
    assert QualityGate(max_request_tokens=size, token_counter=len).check(request).passed
    failed = QualityGate(max_request_tokens=size - 1, token_counter=len).check(request)
    assert not failed.passed
    assert failed["max_request_tokens"].figure == size
    # A ledger's figure is its prompt: the window minus free space and output reserve.
    assert QualityGate(max_request_tokens=500).check(ledger()).passed
    assert not QualityGate(max_request_tokens=499).check(ledger()).passed


def test_min_evidence_counts_the_kept_items() -> None:
    report = builder(CallableSource("rag", orders), CallableSource("memory", noise)).build_report(
        "q"
    )
    assert len(report.items) == 3
    assert QualityGate(min_evidence=3).check(report).passed
    failed = QualityGate(min_evidence=4).check(report)
    assert not failed.passed
    assert failed["min_evidence"].figure == 3


def test_max_retrieval_share_is_the_blocks_share_of_the_window() -> None:
    assert QualityGate(max_retrieval_share=0.25).check(ledger(retrieval=250)).passed
    failed = QualityGate(max_retrieval_share=0.24).check(ledger(retrieval=250))
    assert not failed.passed
    assert failed["max_retrieval_share"].figure == pytest.approx(0.25)
    assert "250 of a 1000-token window" in failed["max_retrieval_share"].detail


def embedded(text: str, vector: list[float], source: str = "rag") -> RetrievalResult:
    return RetrievalResult(text, 0.5, source, embedding=vector)


def test_redundancy_uses_the_cosine_of_embeddings_when_every_item_has_one() -> None:
    def source(query: str) -> list[RetrievalResult]:
        return [
            embedded("Meals are capped at 80.", [1.0, 0.0, 0.0]),
            embedded("Hotels are capped at 500.", [0.6, 0.8, 0.0]),
            embedded("Taxis need a receipt.", [0.0, 0.0, 1.0]),
        ]

    report = builder(CallableSource("rag", source)).build_report("q")
    assert len(report.items) == 3
    passed = QualityGate(max_redundancy=0.6).check(report)
    assert passed.passed, passed
    check = passed["max_redundancy"]
    assert check.figure == pytest.approx(0.6)
    assert "cosine of embeddings" in check.detail
    # MMR ordered the items; the pair named is meals and hotels, wherever they landed.
    contents = [item.content for item in report.items]
    pair = sorted(
        contents.index(t) + 1 for t in ("Meals are capped at 80.", "Hotels are capped at 500.")
    )
    assert f"items {pair[0]} and {pair[1]}" in check.detail
    assert not QualityGate(max_redundancy=0.59).check(report).passed


def test_redundancy_falls_back_to_shingles_when_an_item_has_no_embedding() -> None:
    first = "alpha beta gamma delta"
    second = "alpha beta gamma epsilon"
    # 3-token shingles: {abg, bgd} and {abg, bge}: one shared of three.
    assert shingles(first) & shingles(second) == {("alpha", "beta", "gamma")}

    def source(query: str) -> list[RetrievalResult]:
        return [embedded(first, [1.0, 0.0]), RetrievalResult(second, 0.4, "rag")]

    report = builder(CallableSource("rag", source)).build_report("q")
    assert len(report.items) == 2
    check = QualityGate(max_redundancy=1 / 3).check(report)["max_redundancy"]
    assert check.passed
    assert check.figure == pytest.approx(1 / 3)
    assert "token-shingle Jaccard" in check.detail
    assert not QualityGate(max_redundancy=0.33).check(report).passed


def test_redundancy_of_cjk_text_shingles_characters() -> None:
    items = [
        RetrievalResult("订单已发货", 0.9, "rag"),
        RetrievalResult("订单已取消", 0.8, "rag"),
    ]
    found = redundancy(items)
    assert found.method == "shingles"
    # 订单已 shared; 单已发, 已发货 / 单已取, 已取消 differ: 1 of 5.
    assert found.value == pytest.approx(1 / 5)
    assert redundancy(items[:1]).value == 0.0


# -- targets and "not applicable" ------------------------------------------------------------


def test_checks_a_message_list_cannot_answer_are_not_applicable() -> None:
    gate = QualityGate(min_evidence=1, max_redundancy=0.5, max_retrieval_share=0.5)
    result = gate.check([HumanMessage("hello")])
    assert result.passed  # nothing applicable failed
    assert [c.passed for c in result.checks] == [None, None, None]
    assert len(result.not_applicable) == 3
    assert "n/a" in str(result)
    assert "3 not applicable" in str(result)
    strict = QualityGate(min_evidence=1, strict=True).check([HumanMessage("hello")])
    assert not strict.passed
    assert strict["min_evidence"].detail.startswith("not applicable")


def test_a_ledger_needs_its_messages_for_the_facts() -> None:
    gate = QualityGate(required_facts=["1042"], max_retrieval_share=0.5)
    alone = gate.check(ledger())
    assert alone["required_facts"].passed is None
    assert "messages=" in alone["required_facts"].detail
    assert alone["max_retrieval_share"].passed is True
    together = gate.check(ledger(), messages=[HumanMessage("order 1042")])
    assert together["required_facts"].passed is True
    assert not gate.check(ledger(), messages=[HumanMessage("order 7")]).passed


def test_a_stored_ledger_dict_is_read_as_a_ledger() -> None:
    stored = {**ledger().to_dict(), "thread": "t-1"}  # a ledger file may add its own keys
    gate = QualityGate(max_retrieval_share=0.2, max_request_tokens=500)
    result = gate.check(json.loads(json.dumps(stored)))
    assert result["max_request_tokens"].passed is True
    assert result["max_retrieval_share"].passed is False
    with pytest.raises(TypeError, match="every part"):
        gate.check({"window": 1000, "retrieval": 10})


def test_a_window_assembly_answers_every_check() -> None:
    assembler = WindowAssembler(
        window=2000,
        sources=[CallableSource("rag", orders), CallableSource("memory", noise)],
    )
    assembly = assembler.assemble([HumanMessage("When does order 1042 ship?")])
    assert assembly.block is not None
    gate = QualityGate(
        max_request_tokens=assembly.ledger.prompt,
        min_evidence=3,
        required_facts=[FACT],
        max_redundancy=0.9,
        max_retrieval_share=assembly.ledger.retrieval / 2000,
    )
    result = gate.check(assembly)
    assert result.passed, result
    assert not result.not_applicable
    assert result["min_evidence"].figure == 3
    # No sources: no block, so no evidence (a figure of 0, not "not applicable").
    bare = WindowAssembler(window=2000).assemble([HumanMessage("hi")])
    assert bare.block is None
    check = QualityGate(min_evidence=1).check(bare)["min_evidence"]
    assert (check.passed, check.figure) == (False, 0)


def test_bad_thresholds_and_targets_are_refused() -> None:
    with pytest.raises(ConfigError, match="max_request_tokens"):
        QualityGate(max_request_tokens=-1)
    with pytest.raises(ConfigError, match="max_redundancy"):
        QualityGate(max_redundancy=1.5)
    with pytest.raises(ConfigError, match="required_facts"):
        QualityGate(required_facts=[42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="ContextReport"):
        QualityGate().check("just text")


def test_the_result_is_plain_json_data_and_reads_back() -> None:
    gate = QualityGate(max_request_tokens=10, required_facts=["x"], min_evidence=1)
    result = gate.check([HumanMessage("x " * 20)])
    data = json.loads(json.dumps(result.to_dict()))
    assert data["passed"] is False
    assert [c["name"] for c in data["checks"]] == [
        "max_request_tokens",
        "min_evidence",
        "required_facts",
    ]
    assert data["checks"][1]["passed"] is None
    assert GateResult.from_dict(data) == result
    size = result["max_request_tokens"].figure
    assert GateResult.from_dict(data).failure_lines() == [
        f"- max_request_tokens: {size} (must be <= 10); the messages, counted"
    ]
    assert QualityGate().check([HumanMessage("x")]) == GateResult(passed=True, checks=())


# -- the pytest helper ---------------------------------------------------------------------


def test_assert_context_quality_names_each_failed_check_and_its_figure() -> None:
    report = builder(CallableSource("memory", noise)).build_report("when does 1042 ship?")
    with pytest.raises(AssertionError) as caught:
        assert_context_quality(
            report, min_evidence=3, required_facts=["Order 1042"], max_request_tokens=10_000
        )
    message = str(caught.value)
    lines = message.splitlines()
    assert lines[0] == "context quality gate failed (2 of 3):"
    assert lines[1] == "- min_evidence: 2 (must be >= 3); items kept in the retrieval block"
    assert lines[2] == "- required_facts: 0 of 1 present; missing: 'Order 1042'"
    assert "pass  max_request_tokens" in message  # the whole table follows
    # Passing returns the result; a gate's fields can be overridden.
    gate = QualityGate(min_evidence=3)
    assert assert_context_quality(report, gate, min_evidence=2).passed
    with pytest.raises(AssertionError, match="min_evidence"):
        assert_context_quality(report, gate)


# -- the middleware option -----------------------------------------------------------------


def gated_agent(gate: QualityGate, on_gate_fail: str, model: ScriptedChatModel) -> Any:
    middleware = ContextKitMiddleware.for_model(
        model,
        summaries="extractive",
        sources=[CallableSource("rag", orders)],
        quality_gate=gate,
        on_gate_fail=on_gate_fail,
    )
    return create_agent(
        model,
        system_prompt="You track orders.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def scripted() -> ScriptedChatModel:
    return ScriptedChatModel(respond=lambda m: AIMessage("Friday."), context_window=4000)


CONFIG = {"configurable": {"thread_id": "t"}}
MISSING = QualityGate(required_facts=["Order 9999"])


def test_raise_stops_before_the_model_is_called() -> None:
    model = scripted()
    agent = gated_agent(MISSING, "raise", model)
    with pytest.raises(ContextQualityError) as caught:
        agent.invoke({"messages": [HumanMessage("When does order 1042 ship?")]}, CONFIG)
    assert model.requests == []
    assert not caught.value.result.passed
    assert "required_facts" in str(caught.value)
    assert "'Order 9999'" in str(caught.value)


def test_log_records_the_result_in_the_ledger_and_calls_the_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = scripted()
    agent = gated_agent(MISSING, "log", model)
    with caplog.at_level(logging.WARNING, logger="langchain_contextkit.quality"):
        state = agent.invoke({"messages": [HumanMessage("When does order 1042 ship?")]}, CONFIG)
    assert len(model.requests) == 1
    assert any("context quality gate failed on call 1" in r.getMessage() for r in caplog.records)
    gate = state[LEDGER_KEY][-1]["gate"]
    assert gate["passed"] is False
    assert gate["checks"][0]["name"] == "required_facts"
    json.dumps(state[LEDGER_KEY])  # checkpointed state stays plain data


def test_warn_warns_and_records() -> None:
    model = scripted()
    agent = gated_agent(MISSING, "warn", model)
    with pytest.warns(ContextQualityWarning, match="Order 9999"):
        state = agent.invoke({"messages": [HumanMessage("When does order 1042 ship?")]}, CONFIG)
    assert len(model.requests) == 1
    assert state[LEDGER_KEY][-1]["gate"]["passed"] is False


async def test_a_passing_gate_is_recorded_on_every_call_async() -> None:
    model = scripted()
    gate = QualityGate(
        required_facts=[FACT, "You track orders."], min_evidence=1, max_retrieval_share=0.5
    )
    agent = gated_agent(gate, "raise", model)
    for turn in range(2):
        state = await agent.ainvoke(
            {"messages": [HumanMessage(f"When does order 1042 ship? ({turn})")]}, CONFIG
        )
    ledgers = state[LEDGER_KEY]
    assert [entry["gate"]["passed"] for entry in ledgers] == [True, True]
    # The system prompt is part of the request the gate reads.
    assert GateResult.from_dict(ledgers[-1]["gate"])["required_facts"].figure == 2
    assert len(model.requests) == 2


def test_without_a_gate_the_ledger_says_none_and_bad_options_are_refused() -> None:
    model = scripted()
    agent = create_agent(
        model, middleware=[ContextKitMiddleware.for_model(model)], checkpointer=InMemorySaver()
    )
    state = agent.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
    assert state[LEDGER_KEY][-1]["gate"] is None
    with pytest.raises(ConfigError, match="on_gate_fail"):
        ContextKitMiddleware(quality_gate=MISSING, on_gate_fail="shout")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="quality_gate"):
        ContextKitMiddleware(quality_gate="strict")  # type: ignore[arg-type]


# -- the node option -----------------------------------------------------------------------


def gated_graph(on_gate_fail: str, model: ScriptedChatModel) -> Any:
    def call_model(state: ContextGraphState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["llm_input_messages"])]}

    graph = StateGraph(ContextGraphState)
    graph.add_node(
        "context",
        context_node(
            model=model,
            sources=[CallableSource("rag", orders)],
            quality_gate=MISSING,
            on_gate_fail=on_gate_fail,  # type: ignore[arg-type]
        ),
    )
    graph.add_node("model", call_model)
    graph.add_edge(START, "context")
    graph.add_edge("context", "model")
    return graph.compile()


def test_context_node_raises_before_the_model_node_or_records_the_result() -> None:
    model = scripted()
    with pytest.raises(ContextQualityError):
        gated_graph("raise", model).invoke({"messages": [HumanMessage("order 1042?")]})
    assert model.requests == []
    state = gated_graph("log", model).invoke({"messages": [HumanMessage("order 1042?")]})
    assert len(model.requests) == 1
    assert state["contextkit_ledger"][-1]["gate"]["passed"] is False


async def test_context_node_gates_the_async_path_too() -> None:
    model = scripted()
    with pytest.raises(ContextQualityError):
        await gated_graph("raise", model).ainvoke({"messages": [HumanMessage("order 1042?")]})
    assert model.requests == []
    with pytest.warns(ContextQualityWarning):
        state = await gated_graph("warn", model).ainvoke(
            {"messages": [HumanMessage("order 1042?")]}
        )
    assert state["contextkit_ledger"][-1]["gate"]["checks"][0]["name"] == "required_facts"


def test_a_report_stays_hashable() -> None:
    report = builder(CallableSource("rag", orders)).build_report("q")
    assert report.items
    assert isinstance(hash(report), int)
