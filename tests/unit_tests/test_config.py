import dataclasses
import json
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings, strategies as st

from langchain_contextkit.agent.window_budget import WindowBudgetConfig
from langchain_contextkit.compaction.compactor import CompactionConfig
from langchain_contextkit.config import ContextKitConfig
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.reducers.base import ReducerConfig
from langchain_contextkit.retrieval.budget import ContextConfig

CUSTOM = ContextKitConfig(
    context=ContextConfig(
        max_tokens=32_000,
        output_reserve_ratio=0.25,
        source_ratios={"history": 0.4, "rag": 0.4, "知识": 0.2},
        mmr_lambda=0.55,
        dedup_threshold=1.5,
        allow_borrow=False,
        min_chunk_tokens=32,
        data_boundary_sections=frozenset({"tool", "rag"}),
    ),
    reducer=ReducerConfig(agent_keep_recent_steps=5, plan_keep_recent=0),
    compaction=CompactionConfig(
        keep_recent=6, trigger_tokens=8000, max_summary_tokens=500, target_tokens=3000
    ),
    window_budget=WindowBudgetConfig(
        desired_output_tokens=2048, max_output_fraction=0.25, rag_ratio=0.3
    ),
)


def _raises(data: object, *fragments: str) -> str:
    with pytest.raises(ConfigError) as info:
        ContextKitConfig.from_dict(data)  # type: ignore[arg-type]
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text
    return text


# defaults: seed 002's tables


def test_defaults_equal_the_seed_tables() -> None:
    config = ContextKitConfig()
    assert config.context == ContextConfig()
    assert config.context.max_tokens is None
    assert config.context.output_reserve_ratio == 0.2
    assert dict(config.context.source_ratios) == {
        "history": 0.35,
        "rag": 0.30,
        "memory": 0.20,
        "tool": 0.15,
    }
    assert (config.context.mmr_lambda, config.context.dedup_threshold) == (0.7, 0.95)
    assert config.context.allow_borrow is True
    assert config.context.min_chunk_tokens == 64
    assert config.context.data_boundary_sections is None
    assert (config.reducer.agent_keep_recent_steps, config.reducer.plan_keep_recent) == (3, 3)
    assert (
        config.compaction.keep_recent,
        config.compaction.trigger_tokens,
        config.compaction.max_summary_tokens,
        config.compaction.target_tokens,
    ) == (4, None, 1000, None)
    assert config.window_budget == WindowBudgetConfig()
    assert (
        config.window_budget.desired_output_tokens,
        config.window_budget.max_output_fraction,
        config.window_budget.rag_ratio,
    ) == (4096, 0.5, 0.35)


def test_empty_dict_and_missing_fields_take_defaults() -> None:
    assert ContextKitConfig.from_dict({}) == ContextKitConfig()
    assert ContextKitConfig.from_dict({"context": {}, "reducer": {}}) == ContextKitConfig()
    config = ContextKitConfig.from_dict({"compaction": {"keep_recent": 9}})
    assert config.compaction == CompactionConfig(keep_recent=9)
    assert config.context == ContextConfig()
    assert config.reducer == ReducerConfig()
    assert config.window_budget == WindowBudgetConfig()


def test_each_section_defaults_to_a_fresh_instance() -> None:
    a, b = ContextKitConfig(), ContextKitConfig()
    assert a == b
    assert a.context.source_ratios is not b.context.source_ratios


def test_is_frozen() -> None:
    config = ContextKitConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.reducer = ReducerConfig()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("context", {"max_tokens": 1000}),
        ("reducer", None),
        ("compaction", ReducerConfig()),
        ("window_budget", CompactionConfig()),
    ],
)
def test_constructor_rejects_a_section_of_the_wrong_type(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"^{field} must be a "):
        ContextKitConfig(**{field: value})  # type: ignore[arg-type]


# to_dict / from_dict


def test_to_dict_is_plain_data() -> None:
    data = CUSTOM.to_dict()
    assert list(data) == ["context", "reducer", "compaction", "window_budget"]
    assert type(data["context"]["source_ratios"]) is dict
    assert data["context"]["source_ratios"] == {"history": 0.4, "rag": 0.4, "知识": 0.2}
    assert data["context"]["data_boundary_sections"] == ["rag", "tool"]
    assert ContextKitConfig().to_dict()["context"]["data_boundary_sections"] is None
    assert data["reducer"] == CUSTOM.reducer.to_dict()
    assert data["compaction"] == CUSTOM.compaction.to_dict()
    assert data["window_budget"] == {
        "desired_output_tokens": 2048,
        "max_output_fraction": 0.25,
        "rag_ratio": 0.3,
    }
    # JSON-safe, and the same after a trip through JSON.
    assert json.loads(json.dumps(data)) == data


def test_dict_round_trip_with_non_default_values_in_every_section() -> None:
    data = CUSTOM.to_dict()
    default = ContextKitConfig().to_dict()
    for section in data:
        assert data[section] != default[section]
    again = ContextKitConfig.from_dict(data)
    assert again == CUSTOM
    assert again.to_dict() == data
    assert ContextKitConfig.from_dict(json.loads(json.dumps(data))) == CUSTOM


def test_from_dict_converts_to_the_field_types() -> None:
    config = ContextKitConfig.from_dict(
        {
            "context": {
                "mmr_lambda": 1,
                "dedup_threshold": 2,
                "source_ratios": {"rag": 1},
                "data_boundary_sections": ("rag", "rag", "notes"),
            },
            "window_budget": {"rag_ratio": 0},
        }
    )
    assert config.context.mmr_lambda == 1.0
    assert type(config.context.mmr_lambda) is float
    assert type(config.context.dedup_threshold) is float
    assert type(config.context.source_ratios["rag"]) is float
    assert config.context.data_boundary_sections == frozenset({"rag", "notes"})
    assert type(config.window_budget.rag_ratio) is float


def test_from_dict_accepts_a_set_and_an_empty_list_of_sections() -> None:
    config = ContextKitConfig.from_dict({"context": {"data_boundary_sections": {"rag"}}})
    assert config.context.data_boundary_sections == frozenset({"rag"})
    config = ContextKitConfig.from_dict({"context": {"data_boundary_sections": []}})
    assert config.context.data_boundary_sections == frozenset()


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"contxt": {}}, "contxt"),
        ({"reducers": {}}, "reducers"),
        ({"context": {"mmr_lamda": 0.5}}, "context.mmr_lamda"),
        ({"reducer": {"plan_keep": 1}}, "reducer.plan_keep"),
        ({"compaction": {"keep_recnt": 4}}, "compaction.keep_recnt"),
        ({"window_budget": {"rag": 0.3}}, "window_budget.rag"),
        ({7: {}}, "7"),
    ],
)
def test_unknown_keys_name_their_full_path(data: dict[Any, Any], path: str) -> None:
    text = _raises(data, f"unknown config key {path}")
    assert "known keys" in text


def test_unknown_key_suggests_the_closest_known_key() -> None:
    text = _raises({"compaction": {"keep_recnt": 4}}, "did you mean compaction.keep_recent?")
    assert "keep_recent, trigger_tokens, max_summary_tokens, target_tokens" in text
    _raises({"window_budgt": {}}, "did you mean window_budget?")
    text = _raises({"zzz": {}}, "unknown config key zzz;", "at the top level")
    assert "did you mean" not in text


@pytest.mark.parametrize(
    ("data", "path", "expected"),
    [
        # a bool is never a number
        ({"context": {"mmr_lambda": True}}, "context.mmr_lambda", "a number"),
        ({"context": {"max_tokens": True}}, "context.max_tokens", "an int or null"),
        ({"reducer": {"plan_keep_recent": False}}, "reducer.plan_keep_recent", "an int"),
        ({"compaction": {"keep_recent": True}}, "compaction.keep_recent", "an int"),
        ({"context": {"source_ratios": {"rag": True}}}, "context.source_ratios.rag", "a number"),
        # a number is never a bool
        ({"context": {"allow_borrow": 1}}, "context.allow_borrow", "a bool"),
        ({"context": {"allow_borrow": "yes"}}, "context.allow_borrow", "a bool"),
        # a float is not an int
        ({"compaction": {"trigger_tokens": 2000.0}}, "compaction.trigger_tokens", "an int or null"),
        ({"compaction": {"target_tokens": 1.5}}, "compaction.target_tokens", "an int or null"),
        # strings and None are not numbers
        ({"context": {"mmr_lambda": "0.7"}}, "context.mmr_lambda", "a number"),
        ({"context": {"dedup_threshold": None}}, "context.dedup_threshold", "a number"),
        (
            {"window_budget": {"desired_output_tokens": "4096"}},
            "window_budget.desired_output_tokens",
            "an int",
        ),
        ({"window_budget": {"rag_ratio": None}}, "window_budget.rag_ratio", "a number"),
        (
            {"reducer": {"agent_keep_recent_steps": None}},
            "reducer.agent_keep_recent_steps",
            "an int",
        ),
        # containers
        (
            {"context": {"source_ratios": [0.5]}},
            "context.source_ratios",
            "a mapping of strings to numbers",
        ),
        (
            {"context": {"source_ratios": None}},
            "context.source_ratios",
            "a mapping of strings to numbers",
        ),
        ({"context": {"source_ratios": {"rag": "x"}}}, "context.source_ratios.rag", "a number"),
        ({"context": {"source_ratios": {3: 0.5}}}, "context.source_ratios key 3", "a string"),
        (
            {"context": {"data_boundary_sections": "rag"}},
            "context.data_boundary_sections",
            "a list of strings or null",
        ),
        (
            {"context": {"data_boundary_sections": {"rag": 1}}},
            "context.data_boundary_sections",
            "a list of strings or null",
        ),
        (
            {"context": {"data_boundary_sections": ["rag", 3]}},
            "context.data_boundary_sections[1]",
            "a string",
        ),
        # sections and the top level
        ({"context": None}, "context", "a mapping"),
        ({"compaction": [4, 2000]}, "compaction", "a mapping"),
        ({"window_budget": "defaults"}, "window_budget", "a mapping"),
        ([("context", {})], "the config", "a mapping"),
        (None, "the config", "a mapping"),
    ],
)
def test_wrong_types_name_their_full_path(data: Any, path: str, expected: str) -> None:
    text = _raises(data, f"{path} must be {expected}, got ")
    assert text.startswith(path)


def test_wrong_type_messages_shorten_long_values() -> None:
    text = _raises({"context": {"mmr_lambda": "x" * 10_000}}, "context.mmr_lambda")
    assert len(text) < 200
    _raises({"context": {"mmr_lambda": 10**400}}, "context.mmr_lambda must be a number")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"context": {"mmr_lambda": 1.5}}, "context.mmr_lambda must be in [0, 1]"),
        ({"context": {"output_reserve_ratio": 1}}, "context.output_reserve_ratio must be in"),
        ({"context": {"max_tokens": 0}}, "context.max_tokens must be an int >= 1"),
        ({"context": {"source_ratios": {}}}, "context.source_ratios must name at least one"),
        ({"context": {"source_ratios": {"rag": 0}}}, "context.source_ratios['rag'] must be in"),
        (
            {"context": {"source_ratios": {"rag": 0.7, "tool": 0.7}}},
            "context.source_ratios must sum to at most 1",
        ),
        ({"context": {"max_tokens": 100}}, "context: The 'history' quota"),
        ({"reducer": {"plan_keep_recent": -1}}, "reducer.plan_keep_recent must be an int >= 0"),
        ({"compaction": {"keep_recent": 0}}, "compaction.keep_recent must be an int >= 1"),
        (
            {"compaction": {"target_tokens": 5000}},
            "compaction.target_tokens (5000) must not exceed trigger_tokens",
        ),
        ({"window_budget": {"rag_ratio": 2}}, "window_budget.rag_ratio must be in [0, 1]"),
        (
            {"window_budget": {"desired_output_tokens": -1}},
            "window_budget.desired_output_tokens must be an int >= 0",
        ),
    ],
)
def test_out_of_range_values_name_their_section(data: dict[str, Any], fragment: str) -> None:
    _raises(data, fragment)


def test_errors_are_config_errors_and_value_errors() -> None:
    with pytest.raises(ValueError, match=r"compaction\.keep_recnt"):
        ContextKitConfig.from_dict({"compaction": {"keep_recnt": 4}})


# YAML


def test_yaml_round_trip_with_non_default_values_in_every_section() -> None:
    text = CUSTOM.to_yaml()
    assert "知识" in text  # allow_unicode: CJK source names stay readable
    assert yaml.safe_load(text) == CUSTOM.to_dict()
    assert ContextKitConfig.from_yaml(text) == CUSTOM


def test_yaml_keeps_field_order_and_spells_none_as_null() -> None:
    text = ContextKitConfig().to_yaml()
    assert text.index("context:") < text.index("reducer:") < text.index("compaction:")
    assert text.index("compaction:") < text.index("window_budget:")
    assert text.index("history:") < text.index("rag:") < text.index("memory:")
    assert "max_tokens: null" in text
    assert "data_boundary_sections: null" in text
    assert ContextKitConfig.from_yaml(text) == ContextKitConfig()


def test_from_yaml_reads_a_hand_written_file() -> None:
    text = """
context:
  mmr_lambda: 0.6
  source_ratios: {history: 0.4, rag: 0.4, memory: 0.2}
  data_boundary_sections: [rag, tool]
reducer:
  agent_keep_recent_steps: 5
compaction:
  keep_recent: 6
window_budget:
  rag_ratio: 0.3
"""
    config = ContextKitConfig.from_yaml(text)
    assert config.context == ContextConfig(
        mmr_lambda=0.6,
        source_ratios={"history": 0.4, "rag": 0.4, "memory": 0.2},
        data_boundary_sections=frozenset({"rag", "tool"}),
    )
    assert config.reducer == ReducerConfig(agent_keep_recent_steps=5)
    assert config.compaction == CompactionConfig(keep_recent=6)
    assert config.window_budget == WindowBudgetConfig(rag_ratio=0.3)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "the config must be a mapping, got NoneType"),
        ("- context\n- reducer\n", "the config must be a mapping, got list"),
        ("just a string", "the config must be a mapping, got str"),
        ("42", "the config must be a mapping, got int"),
        ("context: [1, 2\n", "not valid YAML"),
        ("context:\n  mmr_lambda: yes\n", "context.mmr_lambda must be a number, got bool"),
        ("context:\n", "context must be a mapping, got NoneType"),
        ("compaction:\n  keep_recnt: 4\n", "unknown config key compaction.keep_recnt"),
    ],
)
def test_from_yaml_rejects_bad_documents(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        ContextKitConfig.from_yaml(text)
    assert fragment in str(info.value)


def test_from_yaml_never_constructs_python_objects() -> None:
    text = "context: !!python/object/apply:os.system ['echo pwned']\n"
    with pytest.raises(ConfigError, match="not valid YAML"):
        ContextKitConfig.from_yaml(text)


# for_window


def test_for_window_sets_max_tokens_and_keeps_everything_else() -> None:
    base = dataclasses.replace(CUSTOM, context=dataclasses.replace(CUSTOM.context, max_tokens=None))
    derived = base.for_window(128_000)
    assert derived.context.max_tokens == 64_000
    assert dataclasses.replace(derived.context, max_tokens=None) == base.context
    assert (derived.reducer, derived.compaction, derived.window_budget) == (
        base.reducer,
        base.compaction,
        base.window_budget,
    )
    assert base.context.max_tokens is None  # a copy, the original is untouched
    assert derived.for_window(8000).context.max_tokens == 4000


def test_for_window_matches_context_config_for_window() -> None:
    config = ContextKitConfig().for_window(200_000, use_ratio=0.25)
    assert config.context == ContextConfig.for_window(200_000, use_ratio=0.25)
    assert config.context.max_tokens == 50_000


def test_for_window_uses_the_fallback_only_when_the_window_is_unknown() -> None:
    config = ContextKitConfig()
    assert config.for_window(None, fallback_window=8000).context.max_tokens == 4000
    assert config.for_window(32_000, fallback_window=8000).context.max_tokens == 16_000
    with pytest.raises(ConfigError, match="fallback_window"):
        config.for_window(None)


@pytest.mark.parametrize(
    ("window", "kwargs"),
    [(0, {}), (100, {}), (128_000, {"use_ratio": 0}), (128_000, {"use_ratio": 1.5})],
)
def test_for_window_rejects_bad_windows(window: int, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        ContextKitConfig().for_window(window, **kwargs)


# property: every valid config survives both round trips

_NAMES = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def context_configs(draw: st.DrawFn) -> ContextConfig:
    names = draw(st.lists(_NAMES, min_size=1, max_size=5, unique=True))
    share = 1 / len(names)
    ratios = {
        name: draw(st.floats(min_value=0, max_value=share, exclude_min=True)) for name in names
    }
    sections = draw(st.none() | st.frozensets(_NAMES, max_size=4))
    kwargs: dict[str, Any] = {
        "max_tokens": draw(st.none() | st.integers(min_value=1, max_value=10**9)),
        "output_reserve_ratio": draw(st.floats(min_value=0, max_value=1, exclude_max=True)),
        "source_ratios": ratios,
        "mmr_lambda": draw(st.floats(min_value=0, max_value=1)),
        "dedup_threshold": draw(st.floats(min_value=0, exclude_min=True)),
        "allow_borrow": draw(st.booleans()),
        "min_chunk_tokens": draw(st.integers(min_value=1, max_value=512)),
        "data_boundary_sections": sections,
    }
    try:
        return ContextConfig(**kwargs)
    except ConfigError:
        assume(False)  # a quota too small for one chunk: not a valid config
        raise


@st.composite
def compaction_configs(draw: st.DrawFn) -> CompactionConfig:
    trigger = draw(st.integers(min_value=0, max_value=10**7))
    return CompactionConfig(
        keep_recent=draw(st.integers(min_value=1, max_value=100)),
        trigger_tokens=trigger,
        max_summary_tokens=draw(st.integers(min_value=1, max_value=10**6)),
        target_tokens=draw(st.none() | st.integers(min_value=0, max_value=trigger)),
    )


kit_configs = st.builds(
    ContextKitConfig,
    context=context_configs(),
    reducer=st.builds(
        ReducerConfig,
        agent_keep_recent_steps=st.integers(min_value=0, max_value=100),
        plan_keep_recent=st.integers(min_value=0, max_value=100),
    ),
    compaction=compaction_configs(),
    window_budget=st.builds(
        WindowBudgetConfig,
        desired_output_tokens=st.integers(min_value=0, max_value=10**6),
        max_output_fraction=st.floats(min_value=0, max_value=1, exclude_max=True),
        rag_ratio=st.floats(min_value=0, max_value=1),
    ),
)


@given(config=kit_configs)
@settings(max_examples=300, deadline=None)
def test_round_trips_hold_for_every_valid_config(config: ContextKitConfig) -> None:
    data = config.to_dict()
    assert ContextKitConfig.from_dict(data) == config
    assert ContextKitConfig.from_yaml(config.to_yaml()) == config
    assert ContextKitConfig.from_dict(yaml.safe_load(yaml.safe_dump(data))) == config
    if config.context.dedup_threshold != float("inf"):
        assert ContextKitConfig.from_dict(json.loads(json.dumps(data))) == config


def test_yaml_round_trips_a_source_name_pyyaml_would_mangle() -> None:
    # PyYAML writes U+0085 (NEL) raw in a quoted scalar and reads it back as a space.
    config = ContextKitConfig(
        context=ContextConfig(
            source_ratios={"\x85": 0.5, "rag": 0.5}, data_boundary_sections=frozenset({"a\x85b"})
        )
    )
    assert ContextKitConfig.from_yaml(config.to_yaml()) == config
    assert '"' not in ContextKitConfig().to_yaml()  # plain style when it reads back
