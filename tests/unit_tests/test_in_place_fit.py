"""The in-place summary request is sized so that it fits in the provider's tokens."""

from __future__ import annotations

import math
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit import ContextKitMiddleware
from langchain_contextkit.calibration import CALIBRATION_KEY, Calibration
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens import count_message_tokens

WINDOW = 4000
INSTRUCTION = "Pause the task. Write a summary of the conversation above."


def _view(words: int) -> list[BaseMessage]:
    return [HumanMessage("alpha beta gamma " * (words // 3)), AIMessage("Noted.")]


def test_a_summary_request_near_the_window_is_not_sent_over_it() -> None:
    # The provider counted one of the last calls ~10% over the estimate: the agent's own
    # requests keep the calibration's usual factor (1.0, the third largest ratio), the
    # in-place summary request is sized by the largest one, as a refusal would waste it.
    calibration = Calibration((1.0,) * 7 + (1.1,), 8)
    assert (calibration.factor, calibration.cautious().factor) == (1.0, 1.1)
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
    counter = middleware.assembler.compactor.token_counter

    def estimate(view: list[BaseMessage]) -> int:
        return budget.fixed + count_message_tokens([*view, HumanMessage(INSTRUCTION)], counter)

    # The largest view the usual factor (1.0) would send: its provider count is ~10% over.
    words = 3
    while estimate(_view(words + 3)) <= ceiling:
        words += 3
    view = _view(words)
    assert math.ceil(estimate(view) * 1.1) > ceiling
    assert call.in_place.summarize(view, INSTRUCTION) is None
    assert sent == []  # declined: the transcript is summarised instead
    # What it does send fits in provider tokens at the largest ratio seen.
    small = _view(words // 2)
    assert call.in_place.summarize(small, INSTRUCTION) == "Facts:\n- User: noted."
    assert len(sent) == 1
    assert math.ceil(count_message_tokens(sent[0], counter) * 1.1) <= ceiling


def test_cautious_is_the_largest_recent_ratio() -> None:
    assert Calibration().cautious() == Calibration()
    few = Calibration((1.2, 0.9), 2)
    assert few.cautious() == few  # fewer than the rank: the factor is the largest already
    many = Calibration((0.9, 1.3, 1.0, 1.0, 1.0), 5, window=3000)
    assert many.factor == 1.0
    cautious = many.cautious()
    assert (cautious.factor, cautious.calls, cautious.window) == (1.3, 5, 3000)
