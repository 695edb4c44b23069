"""The in-place summary request is sized so that it fits in the provider's tokens."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit import ContextKitMiddleware
from langchain_contextkit.agent.window_budget import CALIBRATION_KEY, Calibration
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens.count import count_message_tokens

WINDOW = 4000
INSTRUCTION = "Pause the task. Write a summary of the conversation above."


def _view(words: int) -> list[BaseMessage]:
    return [HumanMessage("alpha beta gamma " * (words // 3)), AIMessage("Noted.")]


def test_a_summary_request_near_the_window_is_not_sent_over_it() -> None:
    # The provider counted the last call ~10% over the estimate, the calls before it
    # exactly: the agent's own requests keep the usual margin (the calls' scatter), the
    # in-place summary request keeps the largest excess free, as a refusal would waste it.
    # (Was: factor 1.0 as the third largest ratio, 1.1 as the cautious one; the
    # calibration is now a fitted line, so the test reads both sizes from it.)
    calibration = Calibration()
    for reported in (1000,) * 7 + (1100,):
        calibration = calibration.observe(1000, reported)
    sent: list[list[BaseMessage]] = []

    def provider(messages: list[BaseMessage]) -> str:
        sent.append(messages)
        return "Facts:\n- User: noted."

    model = ScriptedChatModel(respond=provider, profile={"max_input_tokens": WINDOW})
    middleware = ContextKitMiddleware.for_model(model)
    request: ModelRequest[Any] = ModelRequest(
        model=model,
        messages=[HumanMessage("hi")],
        system_message=None,
        tools=[],
        state={"messages": [], CALIBRATION_KEY: calibration.to_dict()},  # type: ignore[typeddict-item]
        runtime=None,  # type: ignore[arg-type]
    )
    call = middleware._prepare(request)
    assert call.in_place is not None
    budget = call.budget
    ceiling = budget.window - budget.output_reserve  # in provider tokens
    usual, cautious = calibration.estimated(ceiling), calibration.cautious().estimated(ceiling)
    assert cautious < usual
    counter = middleware.assembler.compactor.token_counter

    def estimate(view: list[BaseMessage]) -> int:
        return budget.fixed + count_message_tokens([*view, HumanMessage(INSTRUCTION)], counter)

    # The largest view the usual sizing would send: the cautious one declines it.
    words = 3
    while estimate(_view(words + 3)) <= usual:
        words += 3
    view = _view(words)
    assert estimate(view) > cautious
    assert call.in_place.summarize(view, INSTRUCTION) is None
    assert sent == []  # declined: the transcript is summarised instead
    # What it does send fits at the largest excess seen.
    small = _view(words // 2)
    assert call.in_place.summarize(small, INSTRUCTION) == "Facts:\n- User: noted."
    assert len(sent) == 1
    assert count_message_tokens(sent[0], counter) <= cautious


def test_cautious_keeps_the_largest_recent_excess_free() -> None:
    # Was: the largest of the recent ratios; now the largest excess of a call over the line.
    assert Calibration().cautious().estimated(3000) == 3000  # nothing learnt: no margin
    many = Calibration()
    for reported in (900, 1300, 1000, 1000, 1000):
        many = many.observe(1000, reported)
    many = many.observe_refusal(5000, None, window=3000)
    cautious = many.cautious()
    assert cautious.margin >= many.margin
    assert cautious.margin > 0.2  # the 1300 call, about 30% over the line
    assert cautious.estimated(3000) < many.estimated(3000)
    assert (cautious.calls, cautious.window) == (many.calls, 3000)
