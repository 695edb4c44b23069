"""Ablation: one component made essential by the model, tokens saved recomputed, concurrency."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from langchain_contextkit import (
    AblationCase,
    CallableSource,
    ConfigError,
    ContextBuilder,
    ContextConfig,
    ContextKitMiddleware,
    HistoryCompactor,
    RetrievalResult,
    WindowAssembler,
    aablate,
    ablate,
    count_message_tokens,
)
from langchain_contextkit.testing import ScriptedChatModel

SHIPPING = "Order 1042 ships on Friday from the Lyon warehouse."


def rag(query: str) -> list[RetrievalResult]:
    return [
        RetrievalResult(SHIPPING, 0.9, "rag"),
        RetrievalResult("Orders over 50 euros ship free.", 0.6, "rag"),
    ]


def memory(query: str) -> list[RetrievalResult]:
    return [RetrievalResult("The user prefers answers in one word.", 0.8, "memory")]


def notes(query: str) -> list[RetrievalResult]:
    return [RetrievalResult("Blocker: the carrier API is slow this week.", 0.7, "notes")]


def make_builder() -> ContextBuilder:
    return ContextBuilder(
        ContextConfig(max_tokens=4000, source_ratios={"rag": 0.4, "memory": 0.3, "notes": 0.3}),
        sources=[
            CallableSource("rag", rag),
            CallableSource("memory", memory),
            CallableSource("notes", notes),
        ],
        system_prompt="You answer order questions.",
    )


def knows_friday(messages: list[BaseMessage]) -> AIMessage:
    """Right only when the shipping fact (from the rag source) is in its input."""
    seen = "\n".join(m.text for m in messages)
    return AIMessage("Friday" if "ships on Friday" in seen else "I don't know")


CASES = [
    ("When does order 1042 ship?", "Friday"),
    ("Which day will order 1042 leave?", "Friday"),
]


def test_the_source_the_model_needs_is_the_most_essential() -> None:
    builder = make_builder()
    model = ScriptedChatModel(respond=knows_friday)
    report = ablate(builder, CASES, "exact", model=model)
    assert report.cases == 2
    assert report.full_score == 1.0
    assert [c.component for c in report.components] == [
        "source:rag",
        "source:memory",
        "source:notes",
        "retrieval",
    ]
    assert report.essential == "source:rag"
    assert report["source:rag"].drop == 1.0
    assert report["source:memory"].drop == 0.0
    assert report["source:notes"].drop == 0.0
    assert report["retrieval"].drop == 1.0  # ties go to the first listed
    assert report.scores["source:rag"] == (0.0, 0.0)
    # 2 cases x (full + 4 removals)
    assert len(model.requests) == 10

    # Tokens saved, recomputed: the flat prompt's tokens with and without the component.
    def tokens(question: str, keep: list[str]) -> int:
        sources = [s for s in builder.sources if s.name in keep]
        return builder.token_counter(builder.build_report(question, sources=sources).text)

    names = ["rag", "memory", "notes"]
    for removed in names:
        saved = [tokens(q, names) - tokens(q, [n for n in names if n != removed]) for q, _ in CASES]
        assert report[f"source:{removed}"].tokens_saved == pytest.approx(sum(saved) / 2)
        assert report[f"source:{removed}"].tokens_saved > 0
    block_saved = [tokens(q, names) - tokens(q, []) for q, _ in CASES]
    assert report["retrieval"].tokens_saved == pytest.approx(sum(block_saved) / 2)
    assert report.full_tokens == pytest.approx(sum(tokens(q, names) for q, _ in CASES) / 2)


def test_the_report_reads_as_a_table_and_as_json() -> None:
    report = ablate(make_builder(), CASES, "exact", model=ScriptedChatModel(respond=knows_friday))
    text = str(report)
    assert text.splitlines()[0].startswith("ablation over 2 case(s): full context scores 1.000")
    assert "source:rag                 0.000  +1.000" in text
    assert text.splitlines()[-1] == "most essential: source:rag (score drops by 1.000)"
    data = json.loads(json.dumps(report.to_dict()))
    assert data["essential"] == "source:rag"
    assert data["scores"]["full"] == [1.0, 1.0]


def test_no_essential_component_when_nothing_lowers_the_score() -> None:
    model = ScriptedChatModel(respond=lambda m: AIMessage("Friday"))
    report = ablate(make_builder(), CASES, "exact", model=model, components=["source:notes"])
    assert [c.component for c in report.components] == ["source:notes"]
    assert report.essential is None
    assert "most essential: none" in str(report)


async def test_async_and_sync_agree() -> None:
    def run() -> dict[str, Any]:
        model = ScriptedChatModel(respond=knows_friday)
        return ablate(make_builder(), CASES, "contains", model=model).to_dict()

    model = ScriptedChatModel(respond=knows_friday)
    from_async = (await aablate(make_builder(), CASES, "contains", model=model)).to_dict()
    from_sync = await asyncio.to_thread(run)
    assert from_async == from_sync
    # ablate also works from inside a running loop (the library's one bridge).
    assert run() == from_async


def test_an_assembler_ablates_the_recap_too() -> None:
    history: list[BaseMessage] = [
        HumanMessage("My badge number is 4471, remember it."),
        AIMessage("Noted."),
    ]
    for i in range(6):
        history += [
            HumanMessage(f"Turn {i}: the printer on floor {i} jams, tray {i} is stuck again."),
            AIMessage(f"Logged ticket {i}."),
        ]
    assembler = WindowAssembler(
        window=2000,
        sources=[
            CallableSource("rag", lambda q: [RetrievalResult("Badges last a year.", 0.9, "rag")])
        ],
        compactor=HistoryCompactor(keep_recent=2, trigger_tokens=150),
    )

    def knows_badge(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage("4471" if any("4471" in m.text for m in messages) else "unknown")

    case = AblationCase("What is my badge number?", "4471", history)
    model = ScriptedChatModel(respond=knows_badge)
    report = ablate(assembler, [case], "exact", model=model)
    assert [c.component for c in report.components] == ["source:rag", "retrieval", "recap"]
    assert report.essential == "recap"
    assert report["source:rag"].drop == 0.0
    # Recomputed: the full request's recap and block, counted as the assembler counts.
    full = assembler.assemble([*history, HumanMessage(case.question)])
    assert full.ledger.compacted
    recap = [m for m in full.messages if str(m.id).startswith("contextkit-recap-")]
    block = [m for m in full.messages if m.id == "contextkit-retrieval"]
    total = count_message_tokens(full.messages, assembler.counter)
    assert report.full_tokens == total
    assert report["recap"].tokens_saved == total - count_message_tokens(
        [m for m in full.messages if m not in recap], assembler.counter
    )
    assert report["retrieval"].tokens_saved == total - count_message_tokens(
        [m for m in full.messages if m not in block], assembler.counter
    )
    # The requests the model saw: the one without the recap lacks the badge number.
    assert sum("4471" in "\n".join(m.text for m in r) for r in model.requests) == 3
    # A middleware ablates through its assembler.
    middleware = ContextKitMiddleware(
        window=2000,
        sources=[
            CallableSource("rag", lambda q: [RetrievalResult("Badges last a year.", 0.9, "rag")])
        ],
        compactor=HistoryCompactor(keep_recent=2, trigger_tokens=150),
    )
    again = ablate(middleware, [case], "exact", model=ScriptedChatModel(respond=knows_badge))
    assert again.essential == "recap"


def test_concurrency_is_bounded() -> None:
    state = {"now": 0, "peak": 0}

    async def slow(messages: Any) -> AIMessage:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return AIMessage("Friday")

    def never_sync(messages: Any) -> AIMessage:
        raise AssertionError("the async path is used")

    model = RunnableLambda(never_sync, afunc=slow)
    cases = [(f"When does order {n} ship?", "Friday") for n in range(5)]
    for limit in (1, 2, 3):
        state["peak"] = 0
        report = ablate(make_builder(), cases, "exact", model=model, max_concurrency=limit)
        assert report.full_score == 1.0
        assert state["peak"] == limit  # 25 runs: the limit is reached, never passed
    with pytest.raises(ConfigError, match="max_concurrency"):
        ablate(make_builder(), cases, "exact", model=model, max_concurrency=0)


def test_judges_regex_pattern_and_async_callables() -> None:
    builder = make_builder()
    model = ScriptedChatModel(respond=knows_friday)
    by_regex = ablate(builder, [("When?", r"^Fri")], "regex", model=model)
    assert by_regex.essential == "source:rag"
    by_pattern = ablate(
        builder, [("When?", None)], re.compile("friday", re.IGNORECASE), model=model
    )
    assert by_pattern.full_score == 1.0

    judged: list[tuple[str, Any]] = []

    async def llm_judge(answer: str, expected: Any) -> float:  # stands in for an LLM call
        judged.append((answer, expected))
        await asyncio.sleep(0)
        return 0.5 if answer == expected else 0.0

    graded = ablate(builder, [("When?", "Friday")], llm_judge, model=model)
    assert graded.full_score == 0.5
    assert graded["source:rag"].drop == 0.5
    assert len(judged) == 5
    assert ablate(builder, [("When?", "Friday")], lambda a, e: a == e, model=model).full_score == 1


def test_bad_arguments_are_refused() -> None:
    builder = make_builder()
    model = ScriptedChatModel(respond=knows_friday)
    with pytest.raises(ConfigError, match="at least one case"):
        ablate(builder, [], "exact", model=model)
    with pytest.raises(ConfigError, match="unknown components"):
        ablate(builder, CASES, "exact", model=model, components=["recap"])
    with pytest.raises(ConfigError, match="judge"):
        ablate(builder, CASES, "fuzzy", model=model)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="WindowAssembler"):
        ablate(builder, [AblationCase("q", "a", [HumanMessage("hi")])], "exact", model=model)
    with pytest.raises(ConfigError, match="ContextBuilder"):
        ablate("builder", CASES, "exact", model=model)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="pair"):
        ablate(builder, ["q"], "exact", model=model)  # type: ignore[list-item]
    assert model.requests == []
