"""One name for each thing across the layers an agent passes through.

The middleware, the graph nodes, the assembler, the compactor and the reducers share
their knobs: each is spelled the same way, with the same default, wherever it appears.
The seed (002) fixes a few older spellings; they are listed here as the only exceptions.
"""

from __future__ import annotations

import inspect
from typing import Any, get_type_hints

import pytest
from langchain.agents.middleware.types import AgentState

from langchain_contextkit import (
    CompactionMiddleware,
    ContextKitMiddleware,
    HistoryCompactor,
    WindowAssembler,
    compaction_node,
    context_node,
    reduce_agent,
    reduce_agent_sync,
    reducer_node,
)
from langchain_contextkit.agent import state
from langchain_contextkit.reducers.base import ReducerConfig

LAYERS: dict[str, Any] = {
    "ContextKitMiddleware": ContextKitMiddleware.__init__,
    "CompactionMiddleware": CompactionMiddleware.__init__,
    "WindowAssembler": WindowAssembler.__init__,
    "context_node": context_node,
    "compaction_node": compaction_node,
    "reducer_node": reducer_node,
    "HistoryCompactor": HistoryCompactor.__init__,
}

SEED_SPELLINGS = {
    ("HistoryCompactor", "llm"),  # HistoryCompactor(llm, ...) in seed 002
    ("reducer_node", "counter"),  # the reducers' own name, an alias of token_counter
}
"""(layer, parameter) pairs the seed fixes; everything else uses the one vocabulary."""

SYNONYMS = {
    "counter": "token_counter",
    "llm": "model",
    "cfg": "budget_config",
    "max_tokens": "max_summary_tokens",
}


def _parameters(function: Any) -> dict[str, inspect.Parameter]:
    return {name: p for name, p in inspect.signature(function).parameters.items() if name != "self"}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_every_layer_spells_each_knob_one_way(layer: str) -> None:
    for name in _parameters(LAYERS[layer]):
        if name in SYNONYMS and (layer, name) not in SEED_SPELLINGS:
            pytest.fail(f"{layer} takes {name!r}; the library calls it {SYNONYMS[name]!r}")


def test_the_reducer_node_names_its_counter_once() -> None:
    node = _parameters(reducer_node)
    assert "token_counter" in node
    assert "counter" not in node


def test_the_assembler_options_mean_the_same_in_the_middleware_and_the_node() -> None:
    """The options the middleware and the node hand down have the assembler's defaults."""
    assembler = _parameters(WindowAssembler.__init__)
    for layer in ("ContextKitMiddleware", "context_node"):
        params = _parameters(LAYERS[layer])
        for name, option in assembler.items():
            assert name in params, f"{layer} lacks the assembler's {name!r}"
            assert params[name].default == option.default, (layer, name)


def test_recent_units_kept_verbatim_default_to_the_reducer_config() -> None:
    steps = ReducerConfig().agent_keep_recent_steps
    for layer in ("ContextKitMiddleware", "WindowAssembler", "context_node"):
        assert _parameters(LAYERS[layer])["keep_recent_steps"].default == steps, layer
    assert _parameters(reduce_agent)["keep_recent_steps"].default is None or (
        _parameters(reduce_agent)["keep_recent_steps"].default == steps
    )


ALIASES = {"asummarize", "asummarize_view"}
"""Seed 002's names of the async callbacks, accepted beside the one name."""


@pytest.mark.parametrize(
    ("sync", "async_"),
    [
        (HistoryCompactor.compact_view, HistoryCompactor.acompact_view),
        (WindowAssembler.assemble, WindowAssembler.aassemble),
    ],
)
def test_async_twins_take_the_same_keywords_as_their_sync_twin(sync: Any, async_: Any) -> None:
    twin = [name for name in _parameters(async_) if name not in ALIASES]
    assert twin == list(_parameters(sync))


def test_async_twins_take_the_same_keywords() -> None:
    assert _parameters(reduce_agent).keys() == _parameters(reduce_agent_sync).keys()
    compact, acompact = (
        _parameters(HistoryCompactor.compact),
        _parameters(HistoryCompactor.acompact),
    )
    # seed 002: compact(history, *, summarize) / acompact(history, *, asummarize)
    assert [n.removeprefix("a") for n in acompact] == list(compact)


def test_state_keys_come_from_one_module() -> None:
    keys = {state.SUMMARY_KEY, state.LEDGER_KEY, state.CALIBRATION_KEY}
    declared = set(get_type_hints(state.ContextKitState)) - set(get_type_hints(AgentState))
    assert declared == keys
    node = _parameters(context_node)
    assert node["summary_key"].default == state.SUMMARY_KEY
    assert node["ledger_key"].default == state.LEDGER_KEY
    assert node["calibration_key"].default == state.CALIBRATION_KEY
    assert _parameters(compaction_node)["summary_key"].default == state.SUMMARY_KEY


def test_one_built_assembler_is_handed_down_to_a_middleware_and_a_node() -> None:
    from langchain_core.messages import HumanMessage

    from langchain_contextkit import ConfigError
    from langchain_contextkit.testing import ScriptedChatModel

    assembler = WindowAssembler(window=8_000, keep_recent_steps=2)
    middleware = ContextKitMiddleware(assembler=assembler)
    assert middleware.assembler is assembler
    model = ScriptedChatModel(["ok"], context_window=8_000)
    node = context_node(model=model, assembler=assembler)
    out = node.invoke({"messages": [HumanMessage("Where is order 4411?")]})
    assert out["contextkit_ledger"][0]["window"] == 8_000  # the assembler's window, not the model's
    with pytest.raises(ConfigError, match="window"):
        ContextKitMiddleware(assembler=assembler, window=4_000)
    with pytest.raises(ConfigError, match="keep_recent_steps"):
        context_node(model=model, assembler=assembler, keep_recent_steps=5)
    with pytest.raises(ConfigError, match="WindowAssembler"):
        ContextKitMiddleware(assembler=object())  # type: ignore[arg-type]


def test_reducer_node_takes_its_counter_as_token_counter_only() -> None:
    from langchain_contextkit import count_tokens

    assert reducer_node("agent", budget=100, token_counter=count_tokens) is not None
    with pytest.raises(TypeError, match="counter"):
        reducer_node("agent", budget=100, counter=count_tokens)  # type: ignore[call-arg]
