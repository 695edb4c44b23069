"""Tiered fidelity (issue 19 item 3): high / medium / low, and stepping down to fit."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_contextkit import (
    CompactionConfig,
    ConfigError,
    ContextKitConfig,
    HistoryCompactor,
    PromptRegistry,
    ReducerConfig,
    count_tokens,
)
from langchain_contextkit.agent.nodes import reducer_node
from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer, structured_recap
from langchain_contextkit.prompts import DEFAULT_FIDELITY_INSTRUCTIONS, FIDELITIES
from langchain_contextkit.reducers.plan import reduce_plan
from langchain_contextkit.reducers.trajectories import PlanStep, PlanTrajectory
from langchain_contextkit.testing import ScriptedChatModel

KEY_NUMBERS = ("INV-88213", "$1,250.50", "92%", "2024-03-05", "item-7", "493021")

TEXT = (
    "User: Hello, I am looking at last month's billing and something looks off to me.\n"
    "Assistant: Happy to help, let us go through the billing history together carefully.\n"
    "User: Invoice INV-88213 of $1,250.50 was charged twice.\n"
    "User: I would prefer to hear back by email rather than by phone.\n"
    "Assistant: We decided to refund the duplicate charge.\n"
    "Tool (metrics): Disk usage hit 92% on db-7.\n"
    "User: The refund is due 2024-03-05.\n"
    "User: Should the refund go to the original card?\n"
    "User: Fact: the code for item-7 is 493021."
)


def _recap(fidelity: str, max_tokens: int = 1000) -> tuple[str, str]:
    summarizer = ExtractiveSummarizer(max_tokens=max_tokens, fidelity=fidelity)  # type: ignore[arg-type]
    return summarizer.recap(TEXT)


def test_low_is_shorter_than_medium_shorter_than_high_and_keeps_the_key_numbers() -> None:
    recaps = {tier: _recap(tier) for tier in FIDELITIES}
    assert {tier: used for tier, (_, used) in recaps.items()} == {t: t for t in FIDELITIES}
    sizes = [count_tokens(recaps[tier][0]) for tier in ("low", "medium", "high")]
    assert sizes[0] < sizes[1] < sizes[2], sizes
    for text, _ in recaps.values():
        for number in KEY_NUMBERS:
            assert number in text
        assert "We decided to refund the duplicate charge." in text
    high, medium, low = (recaps[t][0] for t in ("high", "medium", "low"))
    # high keeps the wording that states no fact; medium the user's every statement and
    # question; low only conclusions and key numbers.
    assert "Happy to help" in high
    assert "Happy to help" not in medium
    assert "by email rather than by phone" in medium
    assert "original card" in medium
    assert "by email" not in low
    assert "original card" not in low


def test_a_recap_steps_down_a_tier_before_dropping_lines() -> None:
    high_text, _ = _recap("high")
    medium_text, _ = _recap("medium")
    low_text, _ = _recap("low")
    # Room for the medium recap but not the high one: medium, whole.
    assert _recap("high", count_tokens(medium_text) + 8) == (medium_text, "medium")
    # Room for the low one only: low, whole, every key number kept.
    assert _recap("high", count_tokens(low_text) + 8) == (low_text, "low")
    assert _recap("medium", count_tokens(low_text) + 8) == (low_text, "low")
    # Less room than low needs: lines go, the tier stays low.
    text, tier = _recap("medium", count_tokens(low_text) // 2)
    assert tier == "low"
    assert 0 < count_tokens(text) <= count_tokens(low_text) // 2
    assert count_tokens(high_text) > count_tokens(medium_text)


def _history() -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(1, 9):
        call = {"name": "lookup", "args": {"i": i}, "id": f"c{i}"}
        messages += [
            HumanMessage(
                f"Turn {i}: I keep wondering about this part of the plan today.\n"
                f"Fact: the code for item-{i} is {400000 + i}."
            ),
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"Row {i}: load {50 + i}%.", tool_call_id=f"c{i}", name="lookup"),
            AIMessage(f"Noted item {i}; we confirmed it."),
        ]
    return messages


def test_compaction_records_the_tier_it_used() -> None:
    roomy = HistoryCompactor(None, keep_recent=1, trigger_tokens=10, max_summary_tokens=2000)
    result = roomy.compact_view(_history())
    assert (result.summarizer, result.fidelity) == ("extractive", "medium")
    tight = HistoryCompactor(None, keep_recent=1, trigger_tokens=10, max_summary_tokens=160)
    result = tight.compact_view(_history())
    assert (result.summarizer, result.fidelity) == ("extractive", "low")
    assert result.summary is not None
    assert "Turn 2: I keep wondering" not in result.summary.text  # medium's, dropped first
    assert "item-1 is 400001" in result.summary.text
    # Nothing made: nothing recorded.
    assert HistoryCompactor(None).compact_view(_history()).fidelity is None


def test_compaction_records_the_tier_async() -> None:
    tight = HistoryCompactor(None, keep_recent=1, trigger_tokens=10, max_summary_tokens=160)
    result = asyncio.run(tight.acompact_view(_history()))
    assert result.fidelity == "low"


def test_a_model_recap_over_its_cap_steps_down_instead_of_being_cut() -> None:
    reply = "Facts:\n" + "\n".join(
        f"- User: I mentioned the weather for a while, turn {i}." for i in range(20)
    )
    reply += "\nNumbers:\n- Tool (metrics): Disk usage hit 92% on db-7."
    text, tier = structured_recap(reply, max_tokens=60) or ("", "")
    # The low tier's line first, whole; the room it leaves goes to the best of the rest.
    assert tier == "low"
    assert text.endswith("Numbers:\n- Tool (metrics): Disk usage hit 92% on db-7.")
    assert 0 < text.count("the weather") < 20
    assert count_tokens(text) <= 60
    # Through the compactor: the model's recap is trusted at its tier when it fits.
    llm = ScriptedChatModel(responses=[reply])
    compactor = HistoryCompactor(llm, keep_recent=1, trigger_tokens=10, max_summary_tokens=60)
    result = compactor.compact_view(_history())
    assert (result.summarizer, result.fidelity) == ("llm", "low")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_model_is_told_the_tier(language: str) -> None:
    prompts = PromptRegistry(language=language)  # type: ignore[arg-type]
    texts = {t: prompts.summary_instruction(max_tokens=100, fidelity=t) for t in FIDELITIES}
    assert len(set(texts.values())) == 3
    for tier, text in texts.items():
        assert DEFAULT_FIDELITY_INSTRUCTIONS[language][tier] in text  # type: ignore[index]
        assert DEFAULT_FIDELITY_INSTRUCTIONS[language][tier] in prompts.extend_instruction(  # type: ignore[index]
            max_tokens=100, fidelity=tier
        )
    if language == "zh":
        assert "只保留核心结论与关键数字" in texts["low"]
        assert "原话" in texts["high"]
    llm = ScriptedChatModel(responses=["Facts:\n- User: ok 123."])
    compactor = HistoryCompactor(
        llm, keep_recent=1, trigger_tokens=10, fidelity="low", prompts=prompts
    )
    compactor.compact_view(_history())
    (request,) = llm.requests
    assert DEFAULT_FIDELITY_INSTRUCTIONS[language]["low"] in request[0].text  # type: ignore[index]


def test_fidelity_is_validated_everywhere() -> None:
    assert CompactionConfig().fidelity == "medium"
    assert ReducerConfig().fidelity == "medium"
    for make in (
        lambda: CompactionConfig(fidelity="ultra"),  # type: ignore[arg-type]
        lambda: ReducerConfig(fidelity="HIGH"),  # type: ignore[arg-type]
        lambda: HistoryCompactor(None, fidelity="max"),  # type: ignore[arg-type]
        lambda: ExtractiveSummarizer(fidelity=1),  # type: ignore[arg-type]
        lambda: PromptRegistry().summary_instruction(max_tokens=9, fidelity="x"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigError, match="fidelity must be one of 'high', 'medium', 'low'"):
            make()
    with pytest.raises(ConfigError, match=r"compaction\.fidelity must be one of"):
        ContextKitConfig.from_dict({"compaction": {"fidelity": "best"}})
    with pytest.raises(ConfigError, match=r"reducer\.fidelity must be one of"):
        ContextKitConfig.from_dict({"reducer": {"fidelity": True}})


def test_fidelity_round_trips_through_the_aggregate_config() -> None:
    config = ContextKitConfig.from_yaml(
        "compaction:\n  fidelity: high\nreducer:\n  fidelity: low\n"
    )
    assert (config.compaction.fidelity, config.reducer.fidelity) == ("high", "low")
    assert ContextKitConfig.from_yaml(config.to_yaml()) == config
    assert config.to_dict()["compaction"]["fidelity"] == "high"
    compactor = HistoryCompactor.from_config(None, config.compaction)
    assert compactor.fidelity == "high"
    assert compactor.extractive.fidelity == "high"


def _plan() -> PlanTrajectory:
    return PlanTrajectory(
        goal="Audit the servers",
        steps=[
            PlanStep(
                number=n,
                description=f"Check host web-{n}",
                status="done",
                result=f"web-{n}: disk at {60 + n}%, uptime {n * 3} days. All services up. " * 3,
            )
            for n in range(1, 9)
        ],
    )


@pytest.mark.parametrize("fidelity", FIDELITIES)
def test_the_plan_reducer_keeps_every_key_number_at_any_tier(fidelity: str) -> None:
    reduced = asyncio.run(reduce_plan(_plan(), budget=400, keep_recent=2, fidelity=fidelity))  # type: ignore[arg-type]
    assert all(f"{60 + n}%" in reduced.render() for n in range(1, 9))
    config = ReducerConfig(plan_keep_recent=2, fidelity=fidelity)  # type: ignore[arg-type]
    node = reducer_node("plan", budget=400, config=config)
    view = node.invoke({"plan": _plan()})["plan_view"]
    assert all(f"{60 + n}%" in view for n in range(1, 9))


def test_the_ledger_records_the_tier_of_each_recap() -> None:
    from test_window_sizing import run_agent

    _, _, ledgers = run_agent(4000, 40, stateless=False, summaries="extractive")
    compacted = [entry for entry in ledgers if entry["compacted"]]
    assert compacted
    assert all(entry["fidelity"] in FIDELITIES for entry in compacted)
    assert all(entry["fidelity"] is None for entry in ledgers if not entry["compacted"])
