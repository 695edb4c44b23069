"""HistoryCompactor: the seed's contract, and what long conversations need beyond it."""

from __future__ import annotations

import logging

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)

from langchain_contextkit import (
    CompactionConfig,
    ConfigError,
    ContextWindowExceeded,
    HistoryCompactor,
    PromptRegistry,
    RunningSummary,
    count_message_tokens,
    count_tokens,
    find_message_problems,
)
from langchain_contextkit.compaction.compactor import RECAP_ID_PREFIX
from langchain_contextkit.testing import ScriptedChatModel

REFUND_RECAP = "The user asked how to get a refund and was told to check Settings > Billing."


def refund_history() -> list[BaseMessage]:
    return [
        HumanMessage("How do I get a refund?"),
        AIMessage("Open Settings then Billing."),
        HumanMessage("I did that but I am still stuck."),
        AIMessage("Let me escalate this for you."),
    ]


def printed(messages: list[BaseMessage]) -> list[str]:
    return [f"{m['role']} :: {m['content']}" for m in convert_to_openai_messages(messages)]


def test_seed_refund_example_prints_exactly_what_the_seed_shows() -> None:
    llm = ScriptedChatModel(responses=[REFUND_RECAP])
    compactor = HistoryCompactor(llm, keep_recent=2, trigger_tokens=10)

    compacted = compactor.compact(refund_history())

    assert printed(compacted) == [
        f"system :: [Recap] {REFUND_RECAP}",
        "user :: I did that but I am still stuck.",
        "assistant :: Let me escalate this for you.",
    ]
    # The LLM saw the two aged-out turns, fenced as data, and nothing else.
    (request,) = llm.requests
    assert "How do I get a refund?" in request[0].text
    assert "Open Settings then Billing." in request[0].text
    assert "still stuck" not in request[0].text


async def test_seed_refund_example_async() -> None:
    llm = ScriptedChatModel(responses=[REFUND_RECAP])
    compactor = HistoryCompactor(llm, keep_recent=2, trigger_tokens=10)
    compacted = await compactor.acompact(refund_history())
    assert printed(compacted)[0] == f"system :: [Recap] {REFUND_RECAP}"
    assert len(llm.requests) == 1


def test_defaults_match_the_seed() -> None:
    compactor = HistoryCompactor(None)
    assert (compactor.keep_recent, compactor.trigger_tokens, compactor.max_summary_tokens) == (
        4,
        2000,
        1000,
    )
    assert compactor.token_counter is count_tokens
    assert compactor.target_tokens == 1000
    # None says "sized by the window" in an agent; standalone it is the seed's 2000.
    assert CompactionConfig().standalone_trigger_tokens == 2000
    assert CompactionConfig() != CompactionConfig(trigger_tokens=2000)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"keep_recent": 0}, "keep_recent"),
        ({"trigger_tokens": -1}, "trigger_tokens"),
        ({"max_summary_tokens": 0}, "max_summary_tokens"),
        ({"trigger_tokens": 100, "target_tokens": 200}, "target_tokens"),
        ({"keep_recent": True}, "keep_recent"),
    ],
)
def test_bad_knobs_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        HistoryCompactor(None, **kwargs)  # type: ignore[arg-type]


def test_config_round_trips_and_rejects_unknown_keys() -> None:
    cfg = CompactionConfig(keep_recent=2, trigger_tokens=500, target_tokens=100)
    assert CompactionConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="keep_recnt"):
        CompactionConfig.from_dict({"keep_recnt": 2})
    compactor = HistoryCompactor.from_config(None, cfg)
    assert (compactor.keep_recent, compactor.trigger_tokens, compactor.target_tokens) == (
        2,
        500,
        100,
    )


def test_below_trigger_returns_history_unchanged_without_llm_call() -> None:
    llm = ScriptedChatModel(responses=[])
    history = refund_history()
    compactor = HistoryCompactor(llm, keep_recent=2, trigger_tokens=10_000)
    assert compactor.compact(history) == history
    assert llm.requests == []


def test_at_most_keep_recent_turns_returns_history_unchanged() -> None:
    llm = ScriptedChatModel(responses=[])
    history = refund_history()
    compactor = HistoryCompactor(llm, keep_recent=4, trigger_tokens=0)
    assert compactor.compact(history) == history
    assert llm.requests == []


def test_a_tool_call_and_its_results_count_as_one_turn() -> None:
    calls = [
        {"name": "a", "args": {}, "id": "1"},
        {"name": "b", "args": {}, "id": "2"},
    ]
    history = [
        HumanMessage("Please check order 55 and its refund status. " * 5),
        AIMessage("", tool_calls=calls),
        ToolMessage("ra", tool_call_id="1"),
        ToolMessage("rb", tool_call_id="2"),
    ]
    # Two units (human, AI+results): keep_recent=2 leaves nothing to compact.
    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=0)
    assert compactor.compact(history) == history
    result = HistoryCompactor(None, keep_recent=1, trigger_tokens=0).compact_view(history)
    assert result.compacted
    assert result.messages[1:] == history[1:]


def test_recap_is_capped_at_max_summary_tokens() -> None:
    long_summary = "The customer reported issue number 4411 again. " * 200
    compactor = HistoryCompactor(
        ScriptedChatModel(responses=[long_summary]),
        keep_recent=2,
        trigger_tokens=10,
        max_summary_tokens=50,
    )
    result = compactor.compact_view(refund_history())
    assert result.summary is not None
    assert count_tokens(result.summary.text) <= 50
    # Reduced by whole sentences, never cut mid-way at the cap.
    assert not result.summary.text.endswith("…")
    assert result.summary.text.startswith("The customer reported issue number 4411 again.")
    assert set(result.summary.text.split(". ")) <= {
        "The customer reported issue number 4411 again",
        "The customer reported issue number 4411 again.",
    }
    assert result.messages[0].text == f"[Recap] {result.summary.text}"


def test_failing_llm_falls_back_to_the_extractive_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(_text: str, _instruction: str) -> str:
        msg = "rate limited"
        raise RuntimeError(msg)

    history = [
        HumanMessage("My order INV-88213 from 2024-03-05 never arrived."),
        AIMessage("I will reissue order INV-88213 today."),
        HumanMessage("Thanks."),
        AIMessage("You're welcome."),
    ]
    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=10)
    with caplog.at_level(logging.WARNING, logger="langchain_contextkit.compaction.compactor"):
        result = compactor.compact_view(history, summarize=broken)
    assert result.compacted
    assert result.summarizer == "extractive"
    assert result.error is not None
    assert "rate limited" in result.error
    assert "rate limited" not in result.messages[0].text  # never an error text as summary
    assert "INV-88213" in result.messages[0].text
    assert "2024-03-05" in result.messages[0].text
    assert "rate limited" in caplog.text


@pytest.mark.parametrize("reply", ["", "   \n"])
def test_empty_llm_summary_is_never_committed(reply: str) -> None:
    history = [
        HumanMessage("Ship 12 units to warehouse W7 by 2025-01-10."),
        AIMessage("Confirmed: 12 units to W7."),
        HumanMessage("ok"),
        AIMessage("ok"),
    ]
    llm = GenericFakeChatModel(messages=iter([AIMessage(reply)]))
    result = HistoryCompactor(llm, keep_recent=2, trigger_tokens=10).compact_view(history)
    assert result.summarizer == "extractive"
    assert "W7" in result.messages[0].text
    assert "2025-01-10" in result.messages[0].text


def test_without_fallback_a_failure_keeps_the_history_as_it_was() -> None:
    llm = GenericFakeChatModel(messages=iter([]))  # raises on the first call
    history = refund_history()
    compactor = HistoryCompactor(llm, keep_recent=2, trigger_tokens=10, fallback=False)
    result = compactor.compact_view(history)
    assert not result.compacted
    assert result.messages == history
    assert result.summary is None
    assert result.error is not None


def test_nothing_worth_keeping_is_a_small_recap_that_says_so() -> None:
    history = [HumanMessage("hi"), AIMessage("hello"), HumanMessage("ok"), AIMessage("ok")]
    result = HistoryCompactor(None, keep_recent=1, trigger_tokens=0).compact_view(history)
    assert result.compacted
    assert result.summary is not None
    assert result.summary.text == PromptRegistry().empty_recap(3)
    assert result.messages[1:] == history[3:]


def test_leading_system_prompt_stays_first_and_the_recap_follows() -> None:
    history = [SystemMessage("You are a support agent."), *refund_history()]
    compactor = HistoryCompactor(
        ScriptedChatModel(responses=[REFUND_RECAP]), keep_recent=2, trigger_tokens=10
    )
    out = compactor.compact(history)
    assert out[0] is history[0]
    assert isinstance(out[1], SystemMessage)
    assert out[1].id is not None
    assert out[1].id.startswith(RECAP_ID_PREFIX)
    assert out[2:] == history[3:]
    assert find_message_problems(out) == []


def test_require_human_first_puts_the_recap_in_a_human_message_when_needed() -> None:
    history = [
        HumanMessage("Order 1 please."),
        AIMessage("Order 1 placed."),
        HumanMessage("Order 2 please."),
        AIMessage("Order 2 placed."),
        AIMessage("Anything else?"),
    ]
    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=0, require_human_first=True)
    out = compactor.compact(history)
    assert find_message_problems(out, require_human_first=True) == []
    assert isinstance(out[0], HumanMessage)
    assert out[0].text.startswith("[Recap]")


def test_chinese_prompts_and_custom_summary_prompt() -> None:
    llm = ScriptedChatModel(responses=["用户询问退款。"])
    compactor = HistoryCompactor(
        llm, keep_recent=2, trigger_tokens=10, prompts=PromptRegistry(language="zh")
    )
    out = compactor.compact(refund_history())
    assert out[0].text == "[回顾] 用户询问退款。"
    assert "请总结" in llm.requests[0][0].text

    custom = ScriptedChatModel(responses=["short"])
    HistoryCompactor(
        custom, keep_recent=2, trigger_tokens=10, summary_prompt="Résume en {max_tokens} jetons."
    ).compact(refund_history())
    assert "Résume en 1000 jetons." in custom.requests[0][0].text


def long_conversation(turns: int, *, start: int = 0) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for turn in range(start, start + turns):
        messages.append(HumanMessage(f"Turn {turn}: please record fact F{turn} = {turn * 7}."))
        messages.append(AIMessage(f"Recorded F{turn}."))
    return messages


def test_running_summary_is_extended_not_recomputed() -> None:
    seen: list[str] = []

    def summarize(text: str, instruction: str) -> str:
        seen.append(text)
        return f"summary #{len(seen)} ({'extend' if 'PREVIOUS SUMMARY' in text else 'fresh'})"

    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=120)
    history = long_conversation(8)
    first = compactor.compact_view(history, summarize=summarize)
    assert first.compacted
    assert first.summary is not None
    assert first.summary.covered == first.aged_out

    # Same history again: the stored summary applies, nothing is re-summarised.
    again = compactor.compact_view(history, summary=first.summary, summarize=summarize)
    assert not again.compacted
    assert again.messages == first.messages
    assert len(seen) == 1

    # Many new turns: only the newly aged-out ones reach the summariser.
    history += long_conversation(8, start=8)
    second = compactor.compact_view(history, summary=first.summary, summarize=summarize)
    assert second.compacted
    assert len(seen) == 2
    assert seen[1].startswith("PREVIOUS SUMMARY:\nsummary #1 (fresh)")
    # The old turns come back only as the recap's items, never as messages to re-read.
    new_messages = seen[1].split("NEW MESSAGES:")[1]
    assert "Turn 0:" not in new_messages
    assert "Turn 8:" in new_messages
    assert second.summary is not None
    assert second.summary.covered == first.summary.covered + second.aged_out


def test_a_compacted_list_fed_back_in_extends_its_recap() -> None:
    texts: list[str] = []

    def summarize(text: str, instruction: str) -> str:
        texts.append(text)
        return f"S{len(texts)}"

    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=100)
    out = compactor.compact(long_conversation(6), summarize=summarize)
    out = compactor.compact([*out, *long_conversation(6, start=6)], summarize=summarize)
    assert texts[1].startswith("PREVIOUS SUMMARY:\nS1")
    assert "[Recap]" not in texts[1]
    # The model's recap, with the user's facts it lacks added back (the floor).
    first, *added = out[0].text.splitlines()
    assert first == "[Recap] S2"
    assert "- User: Turn 0: please record fact F0 = 0." in added
    assert all(line.startswith("- ") for line in added)
    assert sum(1 for m in out if m.id and m.id.startswith(RECAP_ID_PREFIX)) == 1


def test_a_summary_that_does_not_match_the_history_is_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = long_conversation(3)
    stale = RunningSummary("about another thread", covered=2, last_id="not-this-one")
    for message, index in zip(history, range(len(history)), strict=True):
        message.id = f"m{index}"
    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=10_000)
    with caplog.at_level(logging.WARNING):
        result = compactor.compact_view(history, summary=stale)
    assert result.messages == history
    assert "does not match" in caplog.text


def test_hysteresis_compacts_down_to_the_target_and_keeps_the_prefix_stable() -> None:
    counter = count_tokens
    compactor = HistoryCompactor(
        None, keep_recent=2, trigger_tokens=400, target_tokens=300, max_summary_tokens=60
    )
    history: list[BaseMessage] = []
    summary: RunningSummary | None = None
    compactions = 0
    previous_view: list[BaseMessage] | None = None
    for turn in range(40):
        history += long_conversation(1, start=turn)
        result = compactor.compact_view(history, summary=summary)
        tokens = count_message_tokens(result.messages, counter)
        if result.compacted:
            compactions += 1
            # Down to the target (recap included), well under the trigger.
            assert tokens <= 300
        else:
            assert tokens <= 400
            if previous_view is not None:
                # Between compactions the view only grows at the end: a stable prefix.
                assert result.messages[: len(previous_view)] == previous_view
        summary = result.summary
        previous_view = result.messages
    # Compactions are rare: far fewer than turns.
    assert 2 <= compactions <= 12


def test_overhead_counts_towards_the_trigger() -> None:
    history = long_conversation(4)
    tokens = count_message_tokens(history)
    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=tokens + 10)
    assert not compactor.compact_view(history).compacted
    assert compactor.compact_view(history, overhead_tokens=50).compacted


def test_ceiling_forces_compaction_and_is_never_exceeded() -> None:
    history = long_conversation(6)
    compactor = HistoryCompactor(None, keep_recent=4, trigger_tokens=100_000, max_summary_tokens=40)
    result = compactor.compact_view(history, ceiling_tokens=150)
    assert result.compacted
    assert result.tokens_after <= 150
    assert count_message_tokens(result.messages) == result.tokens_after


def test_ceiling_that_cannot_hold_the_last_turn_raises() -> None:
    history = [HumanMessage("x " * 10), AIMessage("y " * 10), HumanMessage("z " * 500)]
    compactor = HistoryCompactor(None, keep_recent=1, trigger_tokens=0, max_summary_tokens=20)
    with pytest.raises(ContextWindowExceeded) as info:
        compactor.compact_view(history, ceiling_tokens=100)
    assert info.value.budget == 100
    assert info.value.required > 100


async def test_async_callback_and_llm_paths() -> None:
    async def summarize(text: str, instruction: str) -> str:
        return "async summary of " + str(text.count("\n") + 1) + " lines"

    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=10)
    result = await compactor.acompact_view(refund_history(), summarize=summarize)
    assert result.summarizer == "callback"
    assert result.messages[0].text == "[Recap] async summary of 2 lines"

    async def broken(text: str, instruction: str) -> str:
        raise ValueError(text[:5])

    fallback = await compactor.acompact_view(
        [HumanMessage("Invoice 77 is wrong, fix it."), *refund_history()], summarize=broken
    )
    assert fallback.summarizer == "extractive"
    assert "Invoice 77" in fallback.messages[0].text


def test_a_ceiling_cuts_the_previous_recap_before_failing_the_call() -> None:
    long_recap = "Order 4411 was refunded on 2025-01-02 after review. " * 40
    summary = RunningSummary(long_recap, covered=0)
    history = [HumanMessage("Is order 4411 closed?")]
    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=100_000)
    uncapped = compactor.compact_view(history, summary=summary)
    assert not uncapped.compacted
    result = compactor.compact_view(history, summary=summary, ceiling_tokens=120)
    assert result.compacted  # the cut recap must be stored, so it is reported
    assert result.tokens_after <= 120
    assert result.summary is not None
    assert long_recap.startswith(result.summary.text.rstrip("…"))
    assert result.messages[-1] is history[0]
    with pytest.raises(ContextWindowExceeded):
        compactor.compact_view(history, summary=summary, ceiling_tokens=15)
