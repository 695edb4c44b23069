"""A cold history's reads give what the per-message code always gave (issue 32, target 3).

A message's count parts are read from its count key (its calls' argument JSON encoded
once), the JSON encoders are built once, and the fingerprint reads the instance dict. The
references here are the per-message functions as they were before, kept verbatim: every
cost, every fingerprint (recap keys are shared through stores) and every prefix digest
must be the same on any message list.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings, strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_contextkit import count_tokens
from langchain_contextkit.compaction._plan import _fingerprint, prefix_digests
from langchain_contextkit.tokens._message_cache import message_key, message_parts
from langchain_contextkit.tokens.count import message_token_costs

if TYPE_CHECKING:
    from collections.abc import Mapping

# -- the references: the per-message code before the shared reads ----------------------


def ref_fingerprint(message: BaseMessage) -> bytes:
    content = message.content
    calls: list[Any] | None = None
    if isinstance(message, AIMessage):
        calls = [*message.tool_calls, *message.invalid_tool_calls]
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
    kind = message.type.encode("utf-8", "surrogatepass")
    if isinstance(content, str):
        body, blocks = content.encode("utf-8", "surrogatepass"), b""
    else:
        body, blocks = b"", _canonical(content).encode("utf-8", "surrogatepass")
    called = (
        _canonical([[c["name"], c["args"], c.get("id")] for c in calls]).encode(
            "utf-8", "surrogatepass"
        )
        if calls
        else b""
    )
    answered = (call_id or "").encode("utf-8", "surrogatepass")
    return b"%d:%s%d:%s%d:%s%d:%s%d:%s" % (
        *(len(kind), kind, len(body), body, len(blocks), blocks),
        *(len(called), called, len(answered), answered),
    )


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def ref_key(message: BaseMessage) -> tuple[Any, ...]:
    fields = vars(message)
    content = fields["content"]
    return (
        fields["type"],
        fields.get("role"),
        content
        if isinstance(content, str)
        else tuple(b if isinstance(b, str) else _as_text(b) for b in content),
        fields.get("name"),
        _calls_key(fields.get("tool_calls")),
        _calls_key(fields.get("invalid_tool_calls")),
        fields.get("tool_call_id"),
    )


def _calls_key(calls: list[Mapping[str, Any]] | None) -> tuple[Any, ...]:
    if not calls:
        return ()
    return tuple((c.get("name"), _as_arguments(c.get("args")), c.get("id")) for c in calls)


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def ref_cost(message: BaseMessage, image_tokens: int = 85) -> int:
    fields = vars(message)
    role = fields.get("role") or _ROLES.get(message.type, message.type)
    fixed = 3 + count_tokens(role)
    texts: list[str] = []
    tool_calls: list[Mapping[str, Any]] = list(fields.get("tool_calls") or [])
    tool_calls += list(fields.get("invalid_tool_calls") or [])
    call_ids = {call.get("id") for call in tool_calls if call.get("id")}
    content = message.content
    for block in [content] if isinstance(content, str) else content:
        if isinstance(block, str):
            texts.append(block)
            continue
        kind = block.get("type")
        if kind in {"image", "image_url"} or (
            kind == "file" and block.get("mime_type", "").startswith("image/")
        ):
            fixed += image_tokens
        elif not (kind in {"tool_use", "tool_call"} and block.get("id") in call_ids):
            texts.append(_block_text(block))
    if message.name and message.type != "tool":
        texts.append(message.name)
        fixed += 1
    for call in tool_calls:
        texts += (call.get("name") or "", _as_arguments(call.get("args")), call.get("id") or "")
    tool_call_id = fields.get("tool_call_id")
    if isinstance(tool_call_id, str):
        texts.append(tool_call_id)
    return fixed + sum(count_tokens(text) for text in texts)


def _block_text(block: Mapping[str, Any]) -> str:
    for key in ("text", "reasoning", "thinking"):
        value = block.get(key)
        if isinstance(value, str):
            return value
    return _as_text(block)


def _as_arguments(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# -- random histories: calls with nested, unsorted and sorted arguments ------------------

text = st.text(
    alphabet=st.sampled_from([*list('ab zé ß你好\n{}":,\\\t'), "😀", "\u2028"]),
    max_size=24,
)
keys = st.sampled_from(["a", "b", "q", "zz", "é", "A", "a b", ""])
scalar = st.one_of(
    text,
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
arguments = st.recursive(
    scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=8,
)
block = st.one_of(
    text,
    st.builds(lambda t: {"type": "text", "text": t}, text),
    st.builds(
        lambda t: {"type": "reasoning", "reasoning": t, "extra": [1, {"b": 2, "a": 1}]}, text
    ),
    st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
    st.just({"type": "file", "mime_type": "image/png", "data": "AAAA"}),
    st.builds(lambda i: {"type": "tool_use", "id": i, "name": "look", "input": {}}, keys),
    st.builds(lambda t: {"type": "custom", "z": t, "a": [t, None]}, text),
)
content = st.one_of(text, st.lists(block, max_size=3))
call_ids = st.one_of(st.sampled_from(["c1", "c2", "é3", "a"]), st.none())


@st.composite
def tool_calls(draw: st.DrawFn) -> list[dict[str, Any]]:
    found = []
    for call_id in draw(
        st.lists(st.sampled_from(["c1", "c2", "é3", "a"]), max_size=3, unique=True)
    ):
        args = draw(st.dictionaries(keys, arguments, max_size=4))
        found.append({"name": draw(st.sampled_from(["look", "ré"])), "args": args, "id": call_id})
    return found


@st.composite
def invalid_calls(draw: st.DrawFn) -> list[dict[str, Any]]:
    return [
        {
            "type": "invalid_tool_call",
            "name": draw(st.one_of(st.none(), st.just("look"))),
            "args": draw(st.one_of(st.none(), text)),
            "id": draw(call_ids),
            "error": None,
        }
        for _ in range(draw(st.integers(0, 2)))
    ]


@st.composite
def messages(draw: st.DrawFn) -> BaseMessage:
    kind = draw(st.sampled_from(["human", "ai", "tool", "system"]))
    body = draw(content)
    if kind == "human":
        return HumanMessage(body, name=draw(st.sampled_from([None, "ann", "é"])))
    if kind == "system":
        return SystemMessage(body)
    if kind == "tool":
        return ToolMessage(body, tool_call_id=draw(st.sampled_from(["c1", "é3", ""])), name="t")
    message = AIMessage(
        body, tool_calls=draw(tool_calls()), name=draw(st.sampled_from([None, "x"]))
    )
    message.invalid_tool_calls = draw(invalid_calls())  # type: ignore[assignment]
    return message


# -- the properties --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(message=messages())
def test_a_message_reads_the_same_with_or_without_its_count_key(message: BaseMessage) -> None:
    key = message_key(message)
    assert key == ref_key(message)
    assert _fingerprint(message) == ref_fingerprint(message)
    counted = [message_parts(message, 85, count_tokens, k) for k in (None, key)]
    assert counted[0] == counted[1]
    fixed, texts = counted[0]
    assert fixed + sum(map(count_tokens, texts)) == ref_cost(message)


@settings(max_examples=150, deadline=None)
@given(history=st.lists(messages(), max_size=10))
def test_a_cold_history_digests_to_the_per_message_figures(history: list[BaseMessage]) -> None:
    # Recap keys are shared through stores: the prefix digests never change.
    state = hashlib.blake2b(digest_size=16)
    expected = [""]
    for m in history:
        state.update(hashlib.blake2b(ref_fingerprint(m), digest_size=16).digest())
        expected.append(state.copy().hexdigest())
    assert prefix_digests(history) == expected
    assert message_token_costs(history) == [ref_cost(m) for m in history]
