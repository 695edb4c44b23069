"""`KnownMessages`: a checkpointer's equal copies traded for the objects seen before."""

from __future__ import annotations

import gc
import pickle
import weakref
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import ContextKitMiddleware
from langchain_contextkit.agents import known_messages
from langchain_contextkit.agents.known_messages import KnownMessages
from langchain_contextkit.messages import equal_copies
from langchain_contextkit.testing import ScriptedChatModel


def history(n: int = 6) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(n):
        out.append(HumanMessage(f"question {i}", id=f"h{i}"))
        call = {"name": "lookup", "args": {"q": str(i)}, "id": f"c{i}", "type": "tool_call"}
        out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        out.append(ToolMessage(f"result {i}", tool_call_id=f"c{i}", id=f"t{i}"))
        out.append(AIMessage(f"answer {i}", id=f"b{i}"))
    return out


def copies(messages: list[BaseMessage]) -> list[BaseMessage]:
    """What a checkpointer hands back: equal messages, new objects."""
    return pickle.loads(pickle.dumps(messages))  # noqa: S301 - our own bytes


def test_equal_copies_are_traded_for_the_known_objects_and_new_ones_kept() -> None:
    known, first = KnownMessages(), history()
    assert known.adopt(first) == first
    fresh = [*copies(first), HumanMessage("next", id="h-next")]
    adopted = known.adopt(fresh)
    assert adopted == fresh  # the same list, field for field
    assert all(a is b for a, b in zip(adopted, first, strict=False))
    assert adopted[-1] is fresh[-1]


def test_the_callers_own_list_passed_back_is_returned_as_it_is() -> None:
    known, first = KnownMessages(), history()
    known.adopt(first)
    grown = [*first, HumanMessage("next", id="h-next")]
    adopted = known.adopt(grown)
    assert all(a is b for a, b in zip(adopted, grown, strict=True))


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.model_copy(update={"content": m.content + "!"}),
        lambda m: m.model_copy(update={"name": "someone"}),
        lambda m: m.model_copy(update={"additional_kwargs": {"x": 1}}),
        lambda m: m.model_copy(update={"response_metadata": {"model": "b"}}),
    ],
    ids=["content", "name", "additional_kwargs", "response_metadata"],
)
def test_a_copy_that_differs_in_any_field_is_not_adopted(edit: Any) -> None:
    known, first = KnownMessages(), history()
    known.adopt(first)
    fresh = copies(first)
    fresh[5] = edit(fresh[5])
    adopted = known.adopt(fresh)
    assert all(a is b for a, b in zip(adopted, fresh, strict=True))
    assert adopted[5].content == fresh[5].content


def test_different_tool_calls_or_type_or_extra_fields_are_edits() -> None:
    first = history()
    for change in ("tool_calls", "type", "extra"):
        known = KnownMessages()
        known.adopt(first)
        fresh = copies(first)
        if change == "tool_calls":
            call = {"name": "lookup", "args": {"q": "other"}, "id": "c1", "type": "tool_call"}
            fresh[5] = AIMessage("", tool_calls=[call], id="a1")
        elif change == "type":
            fresh[3] = HumanMessage(fresh[3].content, id=fresh[3].id)
        else:
            fresh[4] = HumanMessage(fresh[4].content, id=fresh[4].id, origin="elsewhere")
        adopted = known.adopt(fresh)
        assert all(a is b for a, b in zip(adopted, fresh, strict=True)), change


def test_a_shorter_list_or_one_without_ids_is_left_alone() -> None:
    known, first = KnownMessages(), history()
    known.adopt(first)
    shorter = copies(first)[:5]
    assert all(a is b for a, b in zip(known.adopt(shorter), shorter, strict=True))
    anonymous = [HumanMessage("hi"), AIMessage("hello")]
    assert known.adopt(anonymous) == anonymous
    assert known.adopt([]) == []


def test_the_runs_next_call_matches_its_copies_by_pointer(monkeypatch: pytest.MonkeyPatch) -> None:
    known, first = KnownMessages(), history()
    known.adopt(first)
    fresh = copies(first)
    compared: list[int] = []
    real = known_messages._adoptable

    def spy(messages: list[BaseMessage], seen: list[BaseMessage]) -> int:
        compared.append(len(seen))
        return real(messages, seen)

    monkeypatch.setattr(known_messages, "_adoptable", spy)
    known.adopt(fresh)  # the turn's first call: fields compared once
    after_tool = [*fresh, AIMessage("more", id="x1"), HumanMessage("and", id="x2")]
    adopted = known.adopt(after_tool)  # the same copies again: pointers only
    assert compared == [len(first)]
    assert all(a is b for a, b in zip(adopted, first, strict=False))
    assert adopted[-2:] == after_tool[-2:]
    third = [*after_tool, AIMessage("done", id="x3")]  # and once more, a step later
    again = known.adopt(third)
    assert compared == [len(first)]
    assert all(a is b for a, b in zip(again, first, strict=False))
    assert again[len(first) :] == third[len(first) :]


def test_the_copies_are_not_kept_alive() -> None:
    known, first = KnownMessages(), history()
    known.adopt(first)
    fresh = copies(first)
    known.adopt([*fresh, HumanMessage("next", id="h-next")])
    refs = [weakref.ref(m) for m in fresh]
    del fresh
    gc.collect()
    assert all(r() is None for r in refs)


def test_histories_keyed_by_their_first_message_do_not_evict_each_other() -> None:
    known = KnownMessages(size=2)
    a, b = history(2), [HumanMessage("other", id="o1"), AIMessage("x", id="o2")]
    known.adopt(a)
    known.adopt(b)
    adopted = known.adopt(copies(a))
    assert all(x is y for x, y in zip(adopted, a, strict=True))


@tool
def lookup(q: str) -> str:
    """Look a record up."""
    return f"record {q}: " + "details " * 40


def agent_script(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        call = {"name": "lookup", "args": {"q": last.text[-3:]}, "id": f"c{len(messages)}"}
        return AIMessage("", tool_calls=[{**call, "type": "tool_call"}])
    return AIMessage(f"done after {len(messages)} messages")


class NoAdoption:
    def adopt(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        return list(messages)


def run(*, adopt: bool, turns: int = 8) -> list[list[BaseMessage]]:
    model = ScriptedChatModel(respond=agent_script, profile={"max_input_tokens": 2_500})
    middleware = ContextKitMiddleware.for_model(model)
    if not adopt:
        middleware.assembler._known = NoAdoption()  # type: ignore[assignment]
    agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(turns):
        agent.invoke({"messages": [HumanMessage(f"turn {turn}: look up {turn:03d}")]}, config)
    return [list(request) for request in model.requests]


def test_a_checkpointed_agent_sends_the_same_requests_with_adoption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    adopted: list[int] = []
    real = known_messages._adoptable

    def spy(messages: list[BaseMessage], seen: list[BaseMessage]) -> int:
        adopted.append(real(messages, seen))
        return adopted[-1]

    monkeypatch.setattr(known_messages, "_adoptable", spy)
    with_adoption, without = run(adopt=True), run(adopt=False)
    # Each turn after the first starts from the checkpointer's copies, and adopts them.
    assert len([n for n in adopted if n]) >= 6
    assert len(with_adoption) == 16
    strip = [[(type(m), m.content) for m in r] for r in without]
    assert [[(type(m), m.content) for m in r] for r in with_adoption] == strip


def test_a_copy_or_a_known_message_edited_in_place_between_the_runs_calls_is_not_traded() -> None:
    # The run's next call passes the same copies: matched by pointers, but a content
    # reassigned since on either side means the request must carry the new text.
    for edited_side in ("copy", "known"):
        known, first = KnownMessages(), history()
        known.adopt(first)
        fresh = copies(first)
        known.adopt(fresh)
        (fresh if edited_side == "copy" else first)[2].content = "edited in place"
        adopted = known.adopt([*fresh, HumanMessage("next", id="h-next")])
        assert [m.text for m in adopted[: len(fresh)]] == [m.text for m in fresh], edited_side


_STEPS = st.lists(
    st.one_of(
        st.just(("copy", 0)),  # a checkpointer's run: equal copies of the whole list
        st.just(("again", 0)),  # the run's next call: the same objects again
        st.tuples(st.just("append"), st.integers(0, 3)),
        st.tuples(st.just("edit"), st.integers(0, 60)),  # a content reassigned in place
        st.tuples(st.just("edit-old"), st.integers(0, 60)),  # on an object a call saw before
        st.tuples(st.just("replace"), st.integers(0, 60)),  # add_messages: a new object
    ),
    max_size=14,
)


@given(steps=_STEPS)
@settings(max_examples=150, deadline=None)
def test_adoption_never_changes_what_is_sent(steps: list[tuple[str, int]]) -> None:
    """Whatever happened between calls, the adopted list equals the list passed, field for field."""
    known = KnownMessages()
    current = history(2)
    seen: list[BaseMessage] = []  # every object a call was given
    for n, (kind, value) in enumerate(steps):
        if kind == "copy":
            current = copies(current)
        elif kind == "append":
            current = [
                *current,
                *(HumanMessage(f"new {n}.{i}", id=f"n{n}.{i}") for i in range(value)),
            ]
        elif kind == "edit" and current:
            current[value % len(current)].content = f"edited {n}"
        elif kind == "edit-old" and seen:
            seen[value % len(seen)].content = f"edited old {n}"
        elif kind == "replace" and current:
            i = value % len(current)
            current = [
                *current[:i],
                current[i].model_copy(update={"content": f"new {n}"}),
                *current[i + 1 :],
            ]
        adopted = known.adopt(current)
        assert equal_copies(adopted, current), (kind, n)
        seen += current
