"""Calibration that a small request cannot fool, and the budget of the model actually called.

Issue 28 (item 3, "Smaller") and issue 29 (item 3): a provider's fixed per-request
overhead is told apart from its per-token ratio; no bound stops the ratio below what the
provider reports; a refused request's size is used exactly; each call is sized by the
profile of the model it goes to, and a window a provider stated holds for that model only.
The end-to-end figures are the issue's: ~350 tokens added to every request (200k window,
an 81.7k-token request after a tiny one) and ~9 tokens charged per message (32k window,
a 24k turn after a short request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings, strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langchain_contextkit import ContextKitMiddleware, context_node
from langchain_contextkit.agent.middleware import LEDGER_KEY
from langchain_contextkit.agent.nodes import ContextGraphState
from langchain_contextkit.agent.window_budget import Calibration, model_key
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens.count import count_message_tokens, count_tokens

if TYPE_CHECKING:
    from collections.abc import Callable

# --- the fit, without an agent -----------------------------------------------------------


def test_a_tiny_first_request_is_read_as_overhead_not_as_ratio() -> None:
    calibration = Calibration().observe(50, 400)  # a provider adding ~350 tokens
    assert calibration.real(50) == 400  # the call itself is priced as reported
    assert calibration.ratio < 1.5  # ... but says little about the ratio
    assert calibration.estimated(196_000) > 120_000  # an 81.7k request still fits


def test_overhead_and_ratio_are_told_apart_once_calls_span_a_range() -> None:
    calibration = Calibration()
    for estimated in (40, 2_000, 9_000, 30_000, 60_000):
        calibration = calibration.observe(estimated, round(350 + 1.1 * estimated))
    assert calibration.overhead == pytest.approx(350, abs=50)  # the slope leans a little
    assert calibration.ratio == pytest.approx(1.1, abs=0.005)
    assert calibration.real(100_000) == pytest.approx(110_350, rel=0.005)
    assert calibration.margin < 0.001  # the calls lie on the line
    assert calibration.estimated(calibration.real(80_000)) == pytest.approx(80_000, rel=0.001)


@pytest.mark.parametrize("ratio", [30.0, 12.5, 0.4])
def test_any_measured_ratio_is_followed(ratio: float) -> None:
    # Thai estimated at a thirtieth of its size (issue 29): no bound stops the factor.
    calibration = Calibration()
    for real in (600, 1_800, 3_900, 6_000):  # an agent loop's requests, as they grow
        calibration = calibration.observe(round(real / ratio), real)
    assert calibration.factor == pytest.approx(ratio, rel=0.05)
    assert calibration.estimated(3_000) == pytest.approx(3_000 / ratio, rel=0.08)


def test_one_odd_call_moves_the_fit_by_its_share_and_ages_out() -> None:
    calibration = Calibration()
    for _ in range(8):
        calibration = calibration.observe(2_000, 2_000)
    odd = calibration.observe(2_000, 6_000)  # a malformed report, three times the rest
    assert 1.0 < odd.factor < 1.6
    for _ in range(12):
        odd = odd.observe(2_000, 2_000)
    assert odd.factor == pytest.approx(1.0)


def test_a_refusal_is_used_exactly_for_the_retry_then_weighs_more() -> None:
    calibration = Calibration()
    for estimated in (500, 1_000, 1_500):
        calibration = calibration.observe(estimated, estimated)
    refused = calibration.observe_refusal(3_000, 4_200)
    assert refused.real(3_000) == 4_200  # the line goes through the refused request
    assert refused.margin == 0.0
    served = refused.observe(2_000, 2_400)  # the retry
    plain = calibration.observe(3_000, 4_200).observe(2_000, 2_400)
    assert served.real(3_000) > plain.real(3_000)  # the refusal weighs more


def test_a_stated_window_holds_for_the_model_that_stated_it() -> None:
    small = ScriptedChatModel(responses=[], profile={"max_input_tokens": 8_000})
    calibration = Calibration().for_model(small)
    refused = calibration.observe_refusal(9_000, 9_500, window=7_000)
    assert refused.window == 7_000
    assert refused.for_model("another model").window is None
    assert Calibration.from_state(refused.to_dict()).for_model(small).window == 7_000
    assert model_key(small) == "ScriptedChatModel"


def test_state_round_trips_and_what_it_cannot_read_starts_fresh() -> None:
    calibration = Calibration().observe(100, 130).observe_refusal(900, 1_300, window=1_000)
    assert Calibration.from_state(calibration.to_dict()) == calibration
    unknown = Calibration.from_state({"ratios": [1.25, 1.25], "calls": 7, "window": 3_000})
    assert unknown == Calibration()
    junk = {"observations": [[1, 2], ["x", 3], [0, 5], [4, 5, 1], True], "calls": -1}
    loaded = Calibration.from_state(junk)
    assert [(o.estimated, o.refused) for o in loaded.observations] == [(1, False), (4, True)]
    assert loaded.calls == 2


# --- end to end: create_agent + ContextKitMiddleware.for_model -----------------------------


def _provider(
    window: int, *, per_request: int = 0, per_message: int = 0
) -> Callable[[list[BaseMessage]], AIMessage]:
    """A provider counting like `count_tokens` plus its own charges, refusing over `window`."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        real = per_request + sum(
            count_message_tokens([m], count_tokens, reply_priming=False) + per_message
            for m in messages
        )
        if real > window:
            msg = f"prompt is too long: {real} tokens > {window} maximum"
            raise ContextOverflowError(msg)
        usage = {"input_tokens": real, "output_tokens": 3, "total_tokens": real + 3}
        return AIMessage("Done.", usage_metadata=usage)  # type: ignore[arg-type]

    return respond


def _text_of(tokens: int) -> str:
    """Plain English of about `tokens` estimated tokens."""
    unit = "The parcel moved through the northern depot on schedule today. "
    text = unit * max(1, tokens // count_tokens(unit))
    while count_tokens(text) < tokens:
        text += unit
    return text


def _run(model: ScriptedChatModel, turns: list[str], **kwargs: Any) -> list[dict[str, Any]]:
    middleware = ContextKitMiddleware.for_model(model, summaries="extractive", **kwargs)
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    for text in turns:
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    return list(agent.get_state(config).values[LEDGER_KEY])


def test_a_fixed_overhead_after_a_tiny_request_does_not_refuse_a_large_one() -> None:
    # Issue 28: ~350 tokens added to every request; before, the factor jumped towards 4
    # after the tiny first call and the 81.7k-token request was refused before sending.
    window = 200_000
    model = ScriptedChatModel(
        respond=_provider(window, per_request=350),
        profile={"max_input_tokens": window, "max_output_tokens": 4_096},
    )
    big = _text_of(81_700)
    ledgers = _run(model, ["Hi.", big])
    assert len(model.requests) == 2  # both sent, none refused
    assert model.requests[1][-1].text == big  # whole: nothing cut or compacted
    assert ledgers[-1]["reported"] > 80_000
    # The ledger speaks the provider's tokens for the large request too.
    prompt = ledgers[-1]["window"] - ledgers[-1]["free"] - ledgers[-1]["output_reserve"]
    assert prompt == pytest.approx(ledgers[-1]["reported"], rel=0.02)


def test_a_per_message_charge_after_a_short_request_does_not_refuse_a_24k_turn() -> None:
    # Issue 28: ~9 tokens charged per message; before, a factor of 1.39 after one short
    # request refused a 24k turn in a 32k window.
    window = 32_000
    model = ScriptedChatModel(
        respond=_provider(window, per_message=9),
        profile={"max_input_tokens": window, "max_output_tokens": 1_024},
    )
    turn = _text_of(24_000)
    _run(model, ["Hello there.", turn])
    assert len(model.requests) == 2
    assert model.requests[1][-1].text == turn


class _SwapTo(AgentMiddleware[Any, Any, Any]):
    """Another middleware sending the call to a different model (a fallback, a router)."""

    def __init__(self, model: ScriptedChatModel) -> None:
        super().__init__()
        self.model = model

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(request.override(model=self.model))


def test_a_model_swapped_for_a_smaller_one_gets_a_request_within_its_window() -> None:
    small_window = 6_000
    small = ScriptedChatModel(
        respond=_provider(small_window),
        profile={"max_input_tokens": small_window, "max_output_tokens": 300},
    )
    big = ScriptedChatModel(respond=_provider(200_000), profile={"max_input_tokens": 200_000})
    middleware = ContextKitMiddleware.for_model(big, summaries="extractive")
    agent = create_agent(big, middleware=[_SwapTo(small), middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "swap"}}
    history: list[BaseMessage] = []
    for n in range(12):  # ~12k tokens of history: twice the small model's window
        history += [HumanMessage(_text_of(1_000) + f" Parcel P-{n}."), AIMessage("Noted.")]
    agent.invoke({"messages": [*history, HumanMessage("Where is P-3?")]}, config)
    assert big.requests == []
    assert len(small.requests) == 1  # the first call already fits: no refusal, no retry
    ledger = agent.get_state(config).values[LEDGER_KEY][-1]
    assert (ledger["window"], ledger["output_reserve"]) == (small_window, 300)


def test_the_fallback_window_serves_only_a_model_whose_profile_states_none() -> None:
    unknown = ScriptedChatModel(respond=_provider(5_000))
    ledgers = _run(unknown, ["Hi."], fallback_window=5_000)
    assert ledgers[-1]["window"] == 5_000
    stated = ScriptedChatModel(respond=_provider(3_000), profile={"max_input_tokens": 3_000})
    middleware = ContextKitMiddleware.for_model(unknown, fallback_window=5_000)
    agent = create_agent(unknown, middleware=[_SwapTo(stated), middleware])
    state = agent.invoke({"messages": [HumanMessage("Hi.")]})
    assert state[LEDGER_KEY][-1]["window"] == 3_000


# --- context_node ------------------------------------------------------------------------


def test_context_node_learns_the_same_overhead() -> None:
    window = 200_000
    model = ScriptedChatModel(
        respond=_provider(window, per_request=350), profile={"max_input_tokens": window}
    )

    def call_model(state: ContextGraphState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["llm_input_messages"])]}

    builder = StateGraph(ContextGraphState)
    builder.add_node("context", context_node(model=model))
    builder.add_node("model", call_model)
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "n"}}
    graph.invoke({"messages": [HumanMessage("Hi.")]}, config)
    big = _text_of(81_700)
    state = graph.invoke({"messages": [HumanMessage(big)]}, config)
    assert model.requests[-1][-1].text == big
    calibration = Calibration.from_state(state["contextkit_calibration"])
    assert calibration.calls == 1  # the node learns the first call's usage at the second
    assert calibration.real(100) == pytest.approx(100 + 350, abs=40)


@given(
    pairs=st.lists(
        st.tuples(st.integers(1, 200_000), st.integers(1, 400_000)), min_size=1, max_size=14
    )
)
@settings(max_examples=100, deadline=None)
def test_the_line_kept_once_fitted_is_the_line_fitted_afresh(pairs: list[tuple[int, int]]) -> None:
    kept = Calibration()
    for estimated, reported in pairs:
        kept = kept.observe(estimated, reported)
    assert kept.ratio > 0  # fitted and kept on this instance
    derived = kept.for_model("gpt-x").cautious()
    fresh = Calibration(
        observations=kept.observations,
        calls=kept.calls,
        model=model_key("gpt-x"),
        cautious_margin=True,
    )
    assert derived == fresh
    assert (derived.ratio, derived.overhead, derived.margin) == (
        fresh.ratio,
        fresh.overhead,
        fresh.margin,
    )
    assert derived.estimated(50_000) == fresh.estimated(50_000)
