"""A model's recap never keeps less than the extractive one (issue 28, item 5).

The instruction states the cap the reply is held to (in the summariser's tokens when a
calibration factor is given); a reply over the cap is reduced by score, never cut at its
end; the user's facts the extractive recap of the same span keeps, and the reply lacks,
are added back; an empty or nothing-salient span is a small recap, never an error; and a
restarted process sends the same requests as the warm one.
"""

from __future__ import annotations

import copy
import random
import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import (
    ContextKitMiddleware,
    HistoryCompactor,
    PromptRegistry,
    count_tokens,
)
from langchain_contextkit.compaction._recap_fit import distinctive_tokens, held_recap, lacks
from langchain_contextkit.compaction.summarizers import (
    ExtractiveSummarizer,
    compose_extension,
    reduce_recap,
)
from langchain_contextkit.testing import ScriptedChatModel

CAP = 160
FEW = 6
FACT = re.compile(r"Fact: the code for item-\d+ is \d+")
FILLER = "The assistant read the requested manual page and described its options at length. "


def _history(turns: int, seed: int = 28) -> list[BaseMessage]:
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    codes = rng.sample(range(100_000, 1_000_000), turns)
    messages: list[BaseMessage] = []
    for turn, code in enumerate(codes, start=1):
        messages.append(
            HumanMessage(f"Turn {turn}: some notes. Fact: the code for item-{turn} is {code}.")
        )
        messages.append(AIMessage(f"Page read for turn {turn}; nothing else to add."))
    return messages


def _facts(text: str) -> set[str]:
    return set(FACT.findall(text))


def _asked(messages: list[BaseMessage]) -> list[str]:
    """The planted facts in a summary request, oldest first, each once."""
    return list(dict.fromkeys(FACT.findall("\n".join(m.text for m in messages))))


# --- summariser behaviours (a model asked for the recap) ----------------------------------


def faithful(messages: list[BaseMessage]) -> str:
    return "\n".join(["Facts:", *(f"- User: {f}." for f in _asked(messages))])


def verbose(messages: list[BaseMessage]) -> str:
    # Ten times the cap in the sections asked for: filler first, the facts at its end.
    filler = [f"- Assistant: {FILLER.strip()}"] * (10 * CAP // count_tokens(FILLER))
    return "\n".join(["Facts:", *filler, *(f"- User: {f}." for f in _asked(messages))])


def drop_half(messages: list[BaseMessage]) -> str:
    kept = _asked(messages)[::2]
    return "\n".join(["Facts:", *(f"- User: {f}." for f in kept)])


def prose(messages: list[BaseMessage]) -> str:
    return "In short, the user read pages. " + " ".join(f"{f}." for f in _asked(messages))


def one_line(messages: list[BaseMessage]) -> str:
    return "Facts: " + " ".join(f"- User: {f}." for f in _asked(messages)) + " " + FILLER * 3


def empty(_messages: list[BaseMessage]) -> str:
    return ""


def raises(_messages: list[BaseMessage]) -> str:
    msg = "the provider is down"
    raise RuntimeError(msg)


def tool_call(_messages: list[BaseMessage]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "read_page", "args": {"page": 1}, "id": "c1"}])


BEHAVIOURS: dict[str, Any] = {
    "faithful": faithful,
    "verbose 10x": verbose,
    "drop half": drop_half,
    "prose": prose,
    "one line": one_line,
    "empty": empty,
    "raises": raises,
    "tool call": tool_call,
}


def _compactor(llm: ScriptedChatModel | None, cap: int = CAP) -> HistoryCompactor:
    return HistoryCompactor(llm, keep_recent=2, trigger_tokens=0, max_summary_tokens=cap)


def _extractive_facts(history: list[BaseMessage], cap: int = CAP) -> set[str]:
    result = _compactor(None, cap).compact_view(history)
    assert result.summary is not None
    return _facts(result.summary.text)


@pytest.mark.parametrize("name", list(BEHAVIOURS))
@pytest.mark.parametrize("turns", [6, 30])  # FEW, and more than the cap holds
def test_the_model_recap_keeps_every_fact_the_extractive_one_keeps(name: str, turns: int) -> None:
    history = _history(turns)
    llm = ScriptedChatModel(respond=BEHAVIOURS[name])
    result = _compactor(llm).compact_view(history)
    assert result.compacted
    assert result.summary is not None
    text = result.summary.text
    assert count_tokens(text) <= CAP
    assert not text.endswith("…")
    extractive = _extractive_facts(history)
    assert extractive  # the comparison means something
    kept = _facts(text)
    assert len(kept) >= len(extractive)
    if turns == FEW:  # every fact fits the cap: the very facts the extractive recap keeps
        assert kept >= extractive, sorted(extractive - kept)


@pytest.mark.parametrize("name", ["verbose 10x", "drop half", "prose", "one line"])
async def test_the_model_recap_keeps_the_extractive_facts_async(name: str) -> None:
    history = _history(30)
    llm = ScriptedChatModel(respond=BEHAVIOURS[name])
    result = await _compactor(llm).acompact_view(history)
    assert result.summary is not None
    assert count_tokens(result.summary.text) <= CAP
    assert len(_facts(result.summary.text)) >= len(_extractive_facts(history))


def test_a_verbose_reply_keeps_its_newest_facts_not_its_head() -> None:
    # A cut at the cap kept the filler at the head and lost every fact after it.
    history = _history(4)
    llm = ScriptedChatModel(respond=verbose)
    result = _compactor(llm).compact_view(history)
    assert result.summarizer == "llm"
    assert result.summary is not None
    aged = history[: result.aged_out]
    assert _facts(result.summary.text) == _facts("\n".join(m.text for m in aged))
    assert result.summary.text.count(FILLER.strip()) <= 1  # the filler gave way first


def test_reduce_recap_drops_the_weakest_sentences_keeping_order() -> None:
    prompts = PromptRegistry()
    reply = (
        "We talked for a while about many unrelated things. "
        "The user's invoice INV-4471 was charged twice on 2025-03-02. "
        "Everyone agreed it was a pleasant chat. "
        "Alice approved the refund of $49."
    )
    facts = (
        "The user's invoice INV-4471 was charged twice on 2025-03-02.",
        "Alice approved the refund of $49.",
    )
    # The two facts priced one by one, and a little room (the reduction sums unit costs,
    # which never undercounts the whole); a weak sentence (9+ tokens) does not fit too.
    budget = sum(map(count_tokens, facts)) + 2
    assert all(count_tokens(weak) > 2 for weak in reply.split(". ")[::2])
    reduced = reduce_recap(reply, budget, prompts=prompts)
    assert count_tokens(reduced) <= budget
    assert reduced == " ".join(facts)


def test_reduce_recap_keeps_headings_only_with_their_items() -> None:
    recap = (
        "Facts:\n- User: The weather was nice and we talked for a bit.\n"
        "Decisions:\n- Assistant: We decided to ship order 7 on 2025-01-02.\n"
        "Open questions:\n- User: Is there anything else we should discuss today?"
    )
    reduced = reduce_recap(recap, 24, prompts=PromptRegistry())
    assert reduced == "Decisions:\n- Assistant: We decided to ship order 7 on 2025-01-02."


def test_a_sentence_longer_than_the_cap_is_split_not_cut() -> None:
    text = "，".join(f"编号{n}的代码是{100000 + n}" for n in range(60))  # one CJK "sentence"
    reduced = reduce_recap(text, 40, prompts=PromptRegistry(language="zh"))
    assert 0 < count_tokens(reduced) <= 40
    assert "…" not in reduced


def test_the_lacking_rule() -> None:
    assert distinctive_tokens("Fact: the code for item-7 is 493021, says Alice.") == [
        "item-7",
        "493021",
        "Alice",
    ]
    item = "Fact: the code for item-7 is 493021."
    assert not lacks(item, "Recap: item-7 has code 493021.")
    assert lacks(item, "Recap: item-70 has code 493021.")  # a whole token, not a prefix
    assert lacks(item, "Recap: item-7 has code 4930210.")
    assert lacks("We decided to ship on Friday.", "Shipping is planned.")
    assert not lacks("we decided to ship", "Then: We decided to ship!")


def test_held_recap_adds_back_what_the_reply_lacks_in_its_section() -> None:
    floor = "Facts:\n- User: Order 7 broke on 2024-05-02.\n- User: Order 8 broke on 2024-05-04."
    reply = "Facts:\n- User: Order 7 broke on 2024-05-02."
    text, tier = held_recap(
        reply,
        "medium",
        floor=floor,
        max_tokens=200,
        prompts=PromptRegistry(),
        counter=count_tokens,
        fidelity="medium",
    )
    assert text == floor
    assert tier == "medium"


def test_a_recap_written_on_one_line_is_read_back_item_by_item() -> None:
    # Read back as one item, the line was too long for any cap: every fact in it was lost
    # at the next extractive extension (the floor of the next model recap).
    facts = [f"Fact: the code for item-{n} is {100_000 + n}." for n in range(12)]
    one_line = "Facts: " + " ".join(f"- User: {fact}" for fact in facts)
    text = compose_extension(one_line, "User: ok\nAssistant: noted")
    recap = ExtractiveSummarizer(max_tokens=400).recap(text)[0]
    assert recap.splitlines() == ["Facts:", *(f"- User: {fact}" for fact in facts)]


# --- the cap the instruction states -------------------------------------------------------


@pytest.mark.parametrize(("scale", "stated"), [(1.0, CAP), (1.37, int(CAP * 1.37)), (0.5, 80)])
def test_the_transcript_instruction_states_the_cap_times_the_scale(
    scale: float, stated: int
) -> None:
    llm = ScriptedChatModel(respond=faithful)
    result = _compactor(llm).compact_view(_history(6), cap_scale=scale)
    assert result.summary is not None
    assert count_tokens(result.summary.text) <= CAP  # held to the cap in our tokens
    (request,) = llm.requests
    assert f"at most {stated} tokens" in request[0].text


@pytest.mark.parametrize("scale", [1.0, 2.5])
async def test_the_in_place_instruction_states_the_cap_times_the_scale(scale: float) -> None:
    instructions: list[str] = []

    def in_place(view: list[BaseMessage], instruction: str) -> str:
        instructions.append(instruction)
        return faithful(view)

    async def ain_place(view: list[BaseMessage], instruction: str) -> str:
        return in_place(view, instruction)

    compactor = _compactor(None)
    compactor.compact_view(_history(6), summarize_view=in_place, cap_scale=scale)
    await compactor.acompact_view(_history(6), summarize_view=ain_place, cap_scale=scale)
    expected = f"At most {int(CAP * scale)} tokens"
    assert len(instructions) == 2
    assert all(expected in text for text in instructions)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf"), float("nan"), True])
def test_a_bad_cap_scale_is_refused(scale: float) -> None:
    with pytest.raises(ValueError, match="cap_scale"):
        _compactor(None).compact_view(_history(6), cap_scale=scale)


# --- nothing worth keeping ----------------------------------------------------------------


def _cold(n: int) -> list[BaseMessage]:
    chatter = [HumanMessage("ok sure") if i % 2 == 0 else AIMessage("fine") for i in range(n)]
    return [*chatter, HumanMessage("go on")]


@pytest.mark.parametrize("summaries", ["extractive", "model"])
def test_a_cold_history_with_nothing_salient_is_a_small_recap(summaries: str) -> None:
    # It raised ContextWindowExceeded ("the extractive summariser returned no text").
    model = ScriptedChatModel(respond=lambda _m: "", context_window=4000)
    middleware = ContextKitMiddleware.for_model(model, summaries=summaries)  # type: ignore[arg-type]
    agent = create_agent(model, [], middleware=[middleware])
    agent.invoke({"messages": _cold(820)})
    sent = model.requests[-1]
    recaps = [m.text for m in sent if isinstance(m.id, str) and m.id.startswith("contextkit-recap")]
    assert len(recaps) == 1
    assert re.fullmatch(r"\[Recap\] \d+ earlier messages, nothing to keep\.", recaps[0])


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_empty_recap_speaks_the_registry_language(language: str) -> None:
    prompts = PromptRegistry(language=language)  # type: ignore[arg-type]
    compactor = HistoryCompactor(None, keep_recent=1, trigger_tokens=0, prompts=prompts)
    result = compactor.compact_view(_cold(30))
    assert result.summary is not None
    assert result.summary.text == prompts.empty_recap(result.aged_out)
    assert prompts.is_empty_recap(result.summary.text)


def test_an_empty_recap_is_not_carried_as_a_fact() -> None:
    # The next compaction starts afresh instead of keeping "N earlier messages" as an item.
    compactor = HistoryCompactor(None, keep_recent=1, trigger_tokens=0)
    first = compactor.compact_view(_cold(10))
    longer = [*_cold(10), AIMessage("fine"), HumanMessage("Order 4471 ships on 2025-03-02.")]
    longer += [AIMessage("noted"), HumanMessage("thanks")]
    second = compactor.compact_view(longer, summary=first.summary)
    assert second.summary is not None
    assert "nothing to keep" not in second.summary.text
    assert "Order 4471 ships on 2025-03-02." in second.summary.text


# --- a restart sends what the warm process sends ------------------------------------------


def _is_summary_request(messages: list[BaseMessage]) -> bool:
    last = messages[-1].text
    return last.startswith(("Pause the task", "Summarise the earlier", "Below are the summary"))


def _loop_reply(messages: list[BaseMessage]) -> AIMessage:
    """One tool call per user turn (a page whose size varies), then a short answer."""
    if _is_summary_request(messages):
        return AIMessage(faithful(messages))
    last = messages[-1]
    if isinstance(last, HumanMessage):
        turn = int(last.text.split(":")[0].removeprefix("Turn "))
        call = {"name": "read_page", "args": {"page": turn}, "id": f"call_{turn}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage(f"Page read: {last.text[:60]}")


def read_page(page: int) -> str:
    """Read a page."""
    return f"Page {page} content line. " * (20 + page % 37)


def _loop_turn(turn: int) -> str:
    code = 100_000 + 7_919 * turn % 900_000
    return f"Turn {turn}: read page {turn}. Fact: the code for item-{turn} is {code}. " + (
        "Chatter about the weather. " * (5 + turn % 13)
    )


def _loop_agent(checkpointer: Any, summaries: str) -> tuple[ScriptedChatModel, Any]:
    model = ScriptedChatModel(respond=_loop_reply, context_window=4000, max_output_tokens=256)
    middleware = ContextKitMiddleware.for_model(model, summaries=summaries)  # type: ignore[arg-type]
    agent = create_agent(
        model, [tool(read_page)], middleware=[middleware], checkpointer=checkpointer
    )
    return model, agent


def _agent_requests(model: ScriptedChatModel) -> list[list[tuple[str, str]]]:
    return [
        [(m.type, m.text) for m in request]
        for request in model.requests
        if not _is_summary_request(request)
    ]


@pytest.mark.parametrize("summaries", ["model", "extractive"])
def test_a_restarted_process_over_the_checkpoint_sends_what_the_warm_one_sends(
    summaries: str,
) -> None:
    # 60 turns at 4,000 with tool results: compactions, some forced by the window. At
    # every turn a new process (model, middleware, agent) over a copy of the checkpoint
    # sends the very requests the warm process sends.
    saver = InMemorySaver()
    warm_model, warm = _loop_agent(saver, summaries)
    config = {"configurable": {"thread_id": "restart"}}
    compared = 0
    for turn in range(60):
        cold_model, cold = _loop_agent(copy.deepcopy(saver), summaries)
        seen = len(_agent_requests(warm_model))
        warm.invoke({"messages": [HumanMessage(_loop_turn(turn))]}, config)
        cold.invoke({"messages": [HumanMessage(_loop_turn(turn))]}, config)
        warm_requests = _agent_requests(warm_model)[seen:]
        assert _agent_requests(cold_model) == warm_requests, f"turn {turn}"
        compared += len(warm_requests)
    assert compared == 120
    summary = warm.get_state(config).values["contextkit_summary"]
    assert summary["covered"] > 100  # it compacted, again and again


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known: a cut forced by the window while the grid's next point is not settled "
        "depends on where the history ends; the agent's current turn must shrink instead "
        "(the compactor then raises ContextWindowExceeded rather than cut off the grid)."
    ),
)
def test_a_restarted_stateless_caller_sends_what_the_warm_process_sends() -> None:
    warm_model, warm = _loop_agent(InMemorySaver(), "extractive")
    config = {"configurable": {"thread_id": "restart"}}
    for turn in range(60):
        before = warm.get_state(config).values.get("messages", [])
        question = HumanMessage(_loop_turn(turn))
        seen = len(_agent_requests(warm_model))
        warm.invoke({"messages": [question]}, config)
        cold_model, cold = _loop_agent(None, "extractive")
        cold.invoke({"messages": [*before, question]})
        assert _agent_requests(cold_model) == _agent_requests(warm_model)[seen:], f"turn {turn}"
