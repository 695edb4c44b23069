"""Never fail the agent: a misbehaving summariser costs no facts, a long thread no turn.

Issue 28 item 5 (and item 6's cases for it). The default writes recaps with the agent's
own model; here that model's reply to a recap request is verbose (ten times the cap),
drops half the facts, answers in prose without headings, puts everything on one line,
returns nothing, raises, or returns a tool call (`_never_fail.SUMMARISERS`). Whatever it
does, no turn may fail, and the planted facts in the last request may not be fewer than
``summaries="extractive"`` keeps on the same conversation. Then a cold history of 800
low-information messages, and 300 turns.
"""

from __future__ import annotations

from typing import Any

import pytest
from _never_fail import (
    SUMMARIES,
    SUMMARISERS,
    Provider,
    Run,
    assert_history_whole,
    assert_requests_fit_and_valid,
    build,
    bulky,
    facts_in,
    play,
    turn,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

pytestmark = pytest.mark.parametrize("summaries", SUMMARIES)

TURNS = 30
_RUNS: dict[tuple[Any, ...], Run | BaseException] = {}


def _played(key: tuple[Any, ...], play_it: Any) -> Run:
    """The scenario's run, played once per key (the extractive baseline is shared)."""
    if key not in _RUNS:
        try:
            _RUNS[key] = play_it()
        except Exception as error:  # noqa: BLE001 - replayed to every test that asks
            _RUNS[key] = error
    outcome = _RUNS[key]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _conversation(window: int, summaries: str, behaviour: str) -> Run:
    provider = Provider(
        window=window,
        max_output=500 if window < 8_000 else 1_000,
        summariser=SUMMARISERS[behaviour],
    )
    results = {f"r{n}": bulky(250, f"r{n}") for n in range(1, TURNS + 1)}
    run = build(provider, summaries, results=results)
    return play(run, [turn(n, fetch=[f"r{n}"], filler=4) for n in range(1, TURNS + 1)])


def conversation(window: int, summaries: str, behaviour: str) -> Run:
    # The extractive middleware never asks the model for a recap: one baseline per window.
    key = ("conversation", window, summaries, behaviour if summaries == "model" else None)
    return _played(key, lambda: _conversation(window, summaries, behaviour))


@pytest.mark.parametrize("window", [4_000, 8_000])
@pytest.mark.parametrize("behaviour", list(SUMMARISERS))
def test_a_misbehaving_summariser_keeps_no_fewer_facts_than_extractive(
    summaries: str, behaviour: str, window: int
) -> None:
    run = conversation(window, summaries, behaviour)
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    last = facts_in(run.last_request())
    assert {TURNS - 1, TURNS} <= last, "the newest turns must be in the last request"
    if summaries == "model":
        assert run.provider.recap_requests(), "the scenario never asked the model for a recap"
        baseline = facts_in(conversation(window, "extractive", behaviour).last_request())
        assert len(last) >= len(baseline), (
            f"{behaviour}: the default shows {len(last)} facts at the last call, extractive "
            f"{len(baseline)} (missing {sorted(baseline - last)})"
        )


def _cold_history(messages: int) -> list[BaseMessage]:
    history: list[BaseMessage] = []
    for i in range(messages // 2):
        history += [HumanMessage(f"ok {i % 7}"), AIMessage("Sure.")]
    return history


@pytest.mark.parametrize("threaded", [False, True], ids=["stateless", "thread"])
def test_a_cold_low_information_history_of_800_messages_is_served(
    summaries: str, threaded: bool
) -> None:
    provider = Provider(window=4_000, max_output=500)
    history = _cold_history(820)
    run = build(provider, summaries, checkpointer=threaded)
    play(run, [turn(1), turn(2)], history=history)
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    assert len(run.stored_messages()) >= len(history) + 4
    assert facts_in(run.last_request()) >= {1, 2}


FACT_EVERY = 30


def _three_hundred(summaries: str) -> Run:
    provider = Provider(window=8_000)
    run = build(provider, summaries)
    users = [turn(n, fact=n % FACT_EVERY == 1, filler=1) for n in range(1, 301)]
    return play(run, users)


def test_three_hundred_turns(summaries: str) -> None:
    run = _played(("300", summaries), lambda: _three_hundred(summaries))
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    last = facts_in(run.last_request())
    if summaries == "model":
        baseline = facts_in(
            _played(("300", "extractive"), lambda: _three_hundred("extractive")).last_request()
        )
        assert len(last) >= len(baseline), f"default {sorted(last)}, extractive {sorted(baseline)}"
