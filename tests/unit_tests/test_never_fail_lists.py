"""Never fail the agent: every message list a provider accepts is accepted.

Issue 28 item 4 (and item 6's cases for it): an `AIMessage` with `invalid_tool_calls`
(a model that wrote broken JSON) answered by LangChain's own error `ToolMessage`; a
`SystemMessage` after the conversation began; a caller's history with an orphan
`ToolMessage` or an unanswered tool call. Each is served, the request sent is valid, the
stored history is left as the caller gave it, and a broken history is repaired in the
request with a warning. Every case runs on the default and on ``summaries="extractive"``.
"""

from __future__ import annotations

import logging

import pytest
from _never_fail import (
    SUMMARIES,
    Provider,
    assert_history_whole,
    assert_requests_fit_and_valid,
    build,
    bulky,
    facts_in,
    play,
    turn,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

pytestmark = pytest.mark.parametrize("summaries", SUMMARIES)

REMINDER = "Reminder from the operator: answer in English and quote codes exactly."


def _results(turns: int) -> dict[str, str]:
    return {f"r{n}": bulky(200, f"r{n}") for n in range(1, turns + 1)}


def _warned(caplog: pytest.LogCaptureFixture) -> bool:
    return any(
        r.levelno >= logging.WARNING and r.name.startswith("langchain_contextkit")
        for r in caplog.records
    )


def _invalid_pair() -> list[BaseMessage]:
    bad = {
        "type": "invalid_tool_call",
        "name": "fetch",
        "args": '{"key": "r1',
        "id": "bad-1",
        "error": "Function fetch arguments are not valid JSON.",
    }
    return [
        HumanMessage(turn(1)),
        AIMessage("", invalid_tool_calls=[bad]),  # type: ignore[list-item]
        ToolMessage(
            "Error: fetch arguments are not valid JSON.", tool_call_id="bad-1", status="error"
        ),
        AIMessage("Sorry, let me try that again."),
    ]


def test_invalid_tool_calls_from_the_model_do_not_end_the_thread(summaries: str) -> None:
    # Turn 1's model writes broken arguments; create_agent answers them with its error
    # ToolMessage at the next call. Every later turn must be served (57 in a row failed).
    provider = Provider(window=4_000, max_output=500)
    run = build(provider, summaries, results=_results(30))
    play(run, [f"{turn(1)}\nbroken: r1", *(turn(n, fetch=[f"r{n}"]) for n in range(2, 31))])
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    stored = run.stored_messages()
    assert any(isinstance(m, AIMessage) and m.invalid_tool_calls for m in stored)
    assert {29, 30} <= facts_in(run.last_request())


@pytest.mark.parametrize("threaded", [False, True], ids=["stateless", "thread"])
def test_invalid_tool_calls_in_the_callers_history_are_served(
    summaries: str, threaded: bool
) -> None:
    provider = Provider(window=4_000, max_output=500)
    history = _invalid_pair()
    run = build(provider, summaries, results=_results(3), checkpointer=threaded)
    play(run, [turn(2, fetch=["r2"]), turn(3)], history=history)
    assert_requests_fit_and_valid(run)
    assert_history_whole(run, extra=history)


@pytest.mark.parametrize("threaded", [False, True], ids=["stateless", "thread"])
def test_a_system_message_mid_conversation_is_served(summaries: str, threaded: bool) -> None:
    provider = Provider(window=4_000, max_output=500)
    history: list[BaseMessage] = [
        HumanMessage(turn(1)),
        AIMessage("Noted."),
        SystemMessage(REMINDER),
    ]
    run = build(provider, summaries, results=_results(3), checkpointer=threaded)
    play(run, [turn(2, fetch=["r2"]), turn(3)], history=history)
    assert_requests_fit_and_valid(run)
    assert_history_whole(run, extra=history)
    # Kept in place, hoisted or converted: the operator's words still reach the model.
    assert REMINDER in "\n".join(m.text for m in run.last_request())


def test_a_system_message_added_late_in_a_thread_is_served(summaries: str) -> None:
    provider = Provider(window=4_000, max_output=500)
    run = build(provider, summaries, results=_results(20))
    play(run, [turn(n, fetch=[f"r{n}"]) for n in range(1, 11)])
    run.agent.invoke({"messages": [SystemMessage(REMINDER), HumanMessage(turn(11))]}, run.config)
    run.sent_users.append(turn(11))
    play(run, [turn(n, fetch=[f"r{n}"]) for n in range(12, 21)])
    assert_requests_fit_and_valid(run)
    assert_history_whole(run, extra=[SystemMessage(REMINDER)])


def _orphan() -> list[BaseMessage]:
    return [
        HumanMessage(turn(1)),
        AIMessage("Checking."),
        ToolMessage("stray result of a call nobody made", tool_call_id="ghost-1"),
        AIMessage("Done."),
    ]


def _unanswered() -> list[BaseMessage]:
    call = {"name": "fetch", "args": {"key": "r1"}, "id": "ghost-2"}
    return [HumanMessage(turn(1)), AIMessage("", tool_calls=[call])]


@pytest.mark.parametrize("threaded", [False, True], ids=["stateless", "thread"])
@pytest.mark.parametrize("broken", [_orphan, _unanswered], ids=["orphan", "unanswered"])
def test_a_broken_callers_history_is_repaired_in_the_request_only(
    summaries: str, threaded: bool, broken: object, caplog: pytest.LogCaptureFixture
) -> None:
    history = broken()  # type: ignore[operator]
    provider = Provider(window=4_000, max_output=500)
    run = build(provider, summaries, results=_results(3), checkpointer=threaded)
    with caplog.at_level(logging.WARNING):
        play(run, [turn(2, fetch=["r2"]), turn(3)], history=history)
    assert_requests_fit_and_valid(run)
    assert_history_whole(run, extra=history)  # the stored history is never rewritten
    assert facts_in(run.last_request()) >= {2, 3}
    assert _warned(caplog), "a repaired history must be logged"


def test_a_long_broken_history_is_served_through_compactions(summaries: str) -> None:
    # Every kind of break, early in a 60-message caller history at 4k: compactions pass
    # over them (the recap must not be fed an invalid list either).
    history: list[BaseMessage] = [*_orphan(), *_invalid_pair()[1:], SystemMessage(REMINDER)]
    for n in range(4, 30):
        history += [HumanMessage(turn(n, filler=4)), AIMessage(f"Noted item {n}.")]
    history += _unanswered()[1:]
    provider = Provider(window=4_000, max_output=500)
    run = build(provider, summaries, results=_results(32), checkpointer=False)
    play(run, [turn(30, fetch=["r30"]), turn(31)], history=history)
    assert_requests_fit_and_valid(run)
    assert_history_whole(run, extra=history)
    assert {30, 31} <= facts_in(run.last_request())
