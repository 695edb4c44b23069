"""Every message list a provider accepts is accepted; a broken one is repaired (issue 28).

The rules are checked against the providers' own adapters, run offline: langchain-openai's
`_convert_message_to_dict` (its output judged by `OpenAIStub.handle`, which rejects what
OpenAI rejects), langchain-anthropic's `_format_messages` (it raises, or warns when it
hoists a system message, and warnings are errors here) and langchain-google-genai's
`_parse_chat_history` (it drops a late system message when there is no leading one).
"""

from __future__ import annotations

import itertools
import logging
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from provider_stubs.openai_stub import OpenAIStub, Reply

from langchain_contextkit import ContextKitMiddleware, find_message_problems, repair_messages
from langchain_contextkit.agent.ledger import ledger_record
from langchain_contextkit.agent.middleware import LEDGER_KEY
from langchain_contextkit.agent.plan import WindowAssembler
from langchain_contextkit.compaction.compactor import _new_problems
from langchain_contextkit.messages.lists import SystemPlacement, system_placement_for, unit_starts
from langchain_contextkit.reducers.agent import _without_new_problems
from langchain_contextkit.testing import ScriptedChatModel

openai_base = pytest.importorskip("langchain_openai.chat_models.base")
anthropic = pytest.importorskip("langchain_anthropic.chat_models")
gemini = pytest.importorskip("langchain_google_genai.chat_models")

PLACEMENTS: tuple[SystemPlacement, ...] = ("anywhere", "after_user_turn", "leading")


def _invalid(call_id: str | None, name: str = "track") -> AIMessage:
    """An AI message whose one call has broken JSON arguments (as a parser leaves it)."""
    bad = {"type": "invalid_tool_call", "name": name, "args": '{"parcel": "P-', "id": call_id}
    return AIMessage("", invalid_tool_calls=[{**bad, "error": "not JSON"}])


def _calls(*ids: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "track", "args": {"p": i}, "id": i} for i in ids])


def _result(call_id: str, text: str = "r") -> ToolMessage:
    return ToolMessage(text, tool_call_id=call_id, name="track")


def openai_status(request: list[BaseMessage]) -> int:
    """What OpenAI answers to `request` as ChatOpenAI would send it (200 or 400)."""
    stub = OpenAIStub(lambda _kind, _messages: Reply(text="ok"), window=1_000_000)
    body = {"model": "m", "messages": [openai_base._convert_message_to_dict(m) for m in request]}
    return stub.handle(body)[0]


def anthropic_format(request: list[BaseMessage], *, in_place: bool) -> tuple[Any, list[Any]]:
    """ChatAnthropic's formatting of `request` behind a system prompt; a hoist is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return anthropic._format_messages(
            [SystemMessage("Be brief."), *request],
            model="claude-opus-4-8",
            mid_conversation_system_messages=in_place,
        )


# --- invalid_tool_calls are calls -----------------------------------------------------------


def test_invalid_tool_calls_are_calls_as_the_adapters_send_them() -> None:
    ai = _calls("c1")
    ai.invalid_tool_calls = _invalid("i1").invalid_tool_calls
    answered = [HumanMessage("q"), ai, _result("c1"), _result("i1", "error"), AIMessage("done")]
    assert find_message_problems(answered) == []
    assert unit_starts(answered) == [0, 1, 4]  # the error result stays with its call
    sent = openai_base._convert_message_to_dict(ai)
    assert [c["id"] for c in sent["tool_calls"]] == ["c1", "i1"]
    assert openai_status(answered) == 200
    _, turns = anthropic_format(answered, in_place=False)
    uses = [b["id"] for t in turns for b in t["content"] if isinstance(b, dict) and "id" in b]
    assert "i1" in uses
    # Unanswered, OpenAI rejects it, and so do the rules.
    unanswered = [HumanMessage("q"), _invalid("i1"), HumanMessage("next")]
    assert [p.code for p in find_message_problems(unanswered)] == ["unanswered_tool_call"]
    assert openai_status(unanswered) == 400


def test_an_invalid_call_without_an_id_is_left_out_of_the_request() -> None:
    messages = [HumanMessage("q"), _invalid(None), AIMessage("a")]
    assert [p.code for p in find_message_problems(messages)] == ["tool_call_without_id"]
    fixed, repairs = repair_messages(messages)
    assert [r.kind for r in repairs] == ["call_without_id"]
    assert find_message_problems(fixed) == []
    assert openai_status(fixed) == 200
    assert messages[1].invalid_tool_calls  # the caller's message is not changed


# --- late system messages, per provider -----------------------------------------------------


def test_system_placement_for_reads_the_adapter() -> None:
    chat_openai = pytest.importorskip("langchain_openai").ChatOpenAI(model="gpt-4o", api_key="k")
    chat_anthropic = pytest.importorskip("langchain_anthropic").ChatAnthropic
    chat_gemini = pytest.importorskip("langchain_google_genai").ChatGoogleGenerativeAI
    assert system_placement_for(chat_openai) == "anywhere"
    assert system_placement_for(chat_openai.bind_tools([])) == "anywhere"
    assert system_placement_for(chat_anthropic(model="claude-opus-4-8", api_key="k")) == (
        "after_user_turn"
    )
    assert system_placement_for(chat_anthropic(model="claude-sonnet-4-5", api_key="k")) == (
        "leading"
    )
    assert system_placement_for(chat_gemini(model="gemini-2.5-flash", google_api_key="k")) == (
        "leading"
    )
    assert system_placement_for(ScriptedChatModel(responses=[])) == "leading"
    flagged = ScriptedChatModel(responses=[], profile={"mid_conversation_system_messages": True})
    assert system_placement_for(flagged) == "anywhere"
    assert system_placement_for(None) == "leading"


LATE_SYSTEM_LISTS = [
    [HumanMessage("q"), SystemMessage("mind the budget"), AIMessage("a")],
    [HumanMessage("q"), AIMessage("a"), SystemMessage("mind the budget"), HumanMessage("q2")],
    [HumanMessage("q"), _calls("c1"), _result("c1"), SystemMessage("mind"), SystemMessage("it")],
    [HumanMessage("q"), AIMessage("a"), SystemMessage("one"), SystemMessage("two"), AIMessage("b")],
]


@pytest.mark.parametrize("messages", LATE_SYSTEM_LISTS)
def test_a_late_system_message_is_sent_as_each_adapter_takes_it(
    messages: list[BaseMessage],
) -> None:
    texts = [m.text for m in messages if isinstance(m, SystemMessage)]
    # OpenAI: in place, untouched.
    fixed, repairs = repair_messages(messages, system_messages="anywhere")
    assert fixed == messages
    assert repairs == []
    assert openai_status(fixed) == 200
    # Anthropic with in-place system turns: kept where it is allowed, a note elsewhere;
    # never hoisted (a warning, an error here) and never a second system prompt (a raise).
    fixed, _ = repair_messages(messages, system_messages="after_user_turn")
    anthropic_format(fixed, in_place=True)
    # Anthropic without them, and Gemini: notes in place, nothing hoisted or dropped.
    fixed, repairs = repair_messages(messages)
    assert {r.kind for r in repairs} == {"system_note"}
    assert not any(isinstance(m, SystemMessage) for m in fixed)
    anthropic_format(fixed, in_place=False)
    instruction, contents = gemini._parse_chat_history(fixed, model="gemini-2.5-flash")
    assert instruction is None
    assert all(text in str(contents) for text in texts)


# --- a caller's broken history -----------------------------------------------------------------


def test_a_broken_history_is_repaired_in_the_request_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = [
        _result("c0", "stray"),  # orphan at the start
        HumanMessage("q"),
        _calls("c1", "c2"),
        _result("c9", "not ours"),  # orphan inside the block, before c1's result
        _result("c1", "one"),
        _result("c1", "one again"),  # a second answer
        HumanMessage("and c2?"),  # c2 never answered
    ]
    snapshot = list(broken)
    with caplog.at_level(logging.WARNING, logger="langchain_contextkit.messages.lists"):
        fixed, repairs = repair_messages(broken)
    assert broken == snapshot
    assert all(map(lambda a, b: a is b, broken, snapshot))
    assert find_message_problems(fixed) == []
    assert openai_status(fixed) == 200
    assert sorted(r.kind for r in repairs) == [
        "duplicate_result",
        "orphan_result",
        "orphan_result",
        "unanswered_call",
    ]
    assert [r.index for r in repairs] == sorted(r.index for r in repairs)
    assert "repaired the request's messages" in caplog.text
    # Nothing read is lost: the stray results stay, as notes after their block.
    text = " ".join(m.text for m in fixed)
    assert all(word in text for word in ("stray", "not ours", "one again"))
    synthetic = next(m for m in fixed if isinstance(m, ToolMessage) and m.tool_call_id == "c2")
    assert synthetic.status == "error"
    assert "No result was recorded" in synthetic.text
    assert repair_messages(fixed) == (fixed, [])


def test_no_assertion_error_from_the_reducer_or_the_compactor(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = [HumanMessage("q"), _calls("c1"), _result("c1"), AIMessage("a")]
    bad = [HumanMessage("q"), _calls("c1"), AIMessage("a")]  # a layout bug would look so
    with caplog.at_level(logging.WARNING):
        mended = _without_new_problems(before, bad)
        assert find_message_problems(mended) == []
        assert _new_problems(before, bad, require_human_first=False)
    assert not _new_problems(before, before, require_human_first=False)
    assert "reduction produced an invalid message list" in caplog.text
    assert "compaction produced an invalid message list" in caplog.text


@pytest.mark.parametrize("model_type", [None, "openai-chat"])
def test_the_assembler_repairs_the_request_and_counts_it(model_type: str | None) -> None:
    model = _typed_model(model_type, window=4000)
    history = [
        HumanMessage("q"),
        _calls("c1"),  # unanswered
        HumanMessage("again"),
        SystemMessage("Reminder: be brief."),
        _result("c7", "stray"),  # orphan
        HumanMessage("now?"),
    ]
    assembly = WindowAssembler(window=4000).assemble(history, model=model)
    placement = system_placement_for(model)
    assert find_message_problems(assembly.messages, system_messages=placement) == []
    late_system = any(isinstance(m, SystemMessage) for m in assembly.messages)
    assert late_system == (placement == "anywhere")
    notes = 0 if placement == "anywhere" else 1
    assert assembly.ledger.repairs == 2 + notes
    assert ledger_record(assembly.ledger)["repairs"] == 2 + notes
    assert isinstance(history[4], ToolMessage)  # the caller's list is unchanged


# --- end to end: create_agent + ContextKitMiddleware.for_model ---------------------------------


@tool
def track(parcel: str) -> str:
    """Track a parcel by its id."""
    return f"Parcel {parcel}: " + "scanned at hub H-7, " * 10 + "out for delivery."


def _typed_model(llm_type: str | None, *, window: int, **profile: Any) -> ScriptedChatModel:
    """A scripted model that an adapter type (`_llm_type`) makes look like a provider's."""
    limits = {"max_input_tokens": window, "max_output_tokens": 256, **profile}
    if llm_type is None:
        return ScriptedChatModel(respond=_respond(), profile=limits)

    class Typed(ScriptedChatModel):
        @property
        def _llm_type(self) -> str:
            return str(llm_type)

    # Late system messages stay in place for these: checked per provider below instead.
    return Typed(respond=_respond(), profile=limits, strict=False)


def _respond() -> Any:
    ids = itertools.count(1)

    def respond(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        text = last.text
        if isinstance(last, ToolMessage):
            return AIMessage(f"Done: {text[:24]}")
        if _is_summary_request(messages):
            facts = sorted(
                {w.strip(".,") for m in messages for w in m.text.split() if "FACT-" in w}
            )
            return AIMessage("Recap: " + ", ".join(facts) + ". Parcels were tracked.")
        turn = sum(isinstance(m, HumanMessage) and m.text.startswith("Turn ") for m in messages)
        n = next(ids)
        if turn % 3 == 0:
            return AIMessage(f"Answer {n}.")
        if turn % 3 == 1:
            return AIMessage(
                "", tool_calls=[{"name": "track", "args": {"parcel": f"P-{n}"}, "id": f"c{n}"}]
            )
        # Broken JSON arguments: create_agent answers the call with an error result. (Not
        # beside a valid call: create_agent's tool node then fails on its own, ours aside.)
        return _invalid(f"bad{n}")

    return respond


def _is_summary_request(request: list[BaseMessage]) -> bool:
    last = request[-1]
    return isinstance(last, HumanMessage) and not last.text.startswith(("Turn ", "["))


def _agent_requests(model: ScriptedChatModel) -> list[list[BaseMessage]]:
    """The agent's own requests (the in-place summary requests left out)."""
    return [r for r in model.requests if not _is_summary_request(r)]


def _run(model: ScriptedChatModel, summaries: str, turns: int, *, reminders: bool) -> list[Any]:
    middleware = ContextKitMiddleware.for_model(model, summaries=summaries, ledger_size=1000)
    agent = create_agent(
        model,
        [track],
        system_prompt="You track parcels. " * 20,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    state: dict[str, Any] = {}
    for turn in range(1, turns + 1):
        new: list[BaseMessage] = [HumanMessage(f"Turn {turn}: FACT-{turn:02d} code {4000 + turn}.")]
        if reminders and turn % 4 == 0:  # before the question, or after it (current turn)
            note = SystemMessage(f"Reminder {turn}: answer in one line.")
            new = [note, *new] if turn % 8 else [*new, note]
        state = agent.invoke({"messages": new}, config)
    return list(state[LEDGER_KEY])


@pytest.mark.parametrize("summaries", ["model", "extractive"])
def test_invalid_tool_calls_through_the_agent_never_fail_a_turn(summaries: str) -> None:
    model = _typed_model(None, window=2500)
    ledgers = _run(model, summaries, 30, reminders=False)
    assert any(entry["compacted"] for entry in ledgers)
    requests = _agent_requests(model)
    assert len(requests) >= 30
    with_errors = 0
    for request in requests:  # the strict model checked each; OpenAI takes each too
        assert openai_status(request) == 200
        for i, message in enumerate(request):
            if isinstance(message, AIMessage) and message.invalid_tool_calls:
                ids = {c["id"] for c in message.invalid_tool_calls}
                answers = [m for m in request[i + 1 :] if isinstance(m, ToolMessage)]
                assert ids <= {m.tool_call_id for m in answers}
                with_errors += 1
    assert with_errors >= 10


@pytest.mark.parametrize("summaries", ["model", "extractive"])
@pytest.mark.parametrize(
    ("llm_type", "profile"),
    [
        (None, {}),
        ("openai-chat", {}),
        ("anthropic-chat", {"mid_conversation_system_messages": True}),
    ],
)
def test_late_system_messages_through_the_agent(
    summaries: str, llm_type: str | None, profile: dict[str, Any]
) -> None:
    model = _typed_model(llm_type, window=2500, **profile)
    ledgers = _run(model, summaries, 24, reminders=True)
    assert any(entry["compacted"] for entry in ledgers)
    placement = system_placement_for(model)
    requests = _agent_requests(model)
    for request in requests:
        assert find_message_problems(request, system_messages=placement) == []
        if placement == "anywhere":
            assert openai_status(request) == 200
        else:
            anthropic_format(request, in_place=placement == "after_user_turn")
    late = [
        any(
            isinstance(m, SystemMessage)
            for m in r[next(i for i, m in enumerate(r) if not isinstance(m, SystemMessage)) :]
        )
        for r in requests
    ]
    assert any(late) == (placement != "leading")  # kept in place only where it is taken
    # The latest reminder reached the model, in place or as a note.
    assert any("Reminder 24" in m.text for m in requests[-1])
    if placement == "leading":
        assert any(entry["repairs"] for entry in ledgers)


@pytest.mark.parametrize("summaries", ["model", "extractive"])
def test_a_broken_caller_history_is_repaired_and_state_untouched(summaries: str) -> None:
    model = _typed_model(None, window=4000)
    middleware = ContextKitMiddleware.for_model(model, summaries=summaries)
    agent = create_agent(model, [track], middleware=[middleware])
    history = [
        HumanMessage("Turn 1: FACT-01."),
        _calls("c1"),  # never answered
        HumanMessage("Turn 2: FACT-02."),
        _result("c5", "an orphan result"),
        HumanMessage("Turn 3: FACT-03."),
    ]
    state = agent.invoke({"messages": history})
    request = _agent_requests(model)[0]
    assert find_message_problems(request) == []
    assert any("an orphan result" in m.text for m in request)
    assert state[LEDGER_KEY][0]["repairs"] == 2
    stored = state["messages"]
    assert isinstance(stored[3], ToolMessage)
    assert stored[3].tool_call_id == "c5"
    assert not any(isinstance(m, ToolMessage) and m.tool_call_id == "c1" for m in stored)


# --- properties ------------------------------------------------------------------------------

_ids = st.sampled_from(["c1", "c2", "c3"])
_text = st.sampled_from(["alpha", "beta", "gamma", ""])
_message = st.one_of(
    st.builds(HumanMessage, st.sampled_from(["h1", "h2", "h3"])),
    st.builds(SystemMessage, st.sampled_from(["s1", "s2"])),
    st.builds(AIMessage, _text),
    st.builds(
        lambda text, ids: AIMessage(
            text, tool_calls=[{"name": "f", "args": {}, "id": c} for c in ids]
        ),
        _text,
        st.lists(_ids, min_size=1, max_size=3),
    ),
    st.builds(lambda c: _invalid(c, "f"), st.one_of(_ids, st.none())),
    st.builds(lambda c, t: ToolMessage(t, tool_call_id=c), _ids, _text),
)


def _said(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, (HumanMessage, AIMessage)) and m.text]


@given(st.lists(_message, max_size=14), st.sampled_from(PLACEMENTS))
@settings(max_examples=400, deadline=None)
def test_repair_gives_a_valid_list_keeps_every_text_and_is_idempotent(
    messages: list[BaseMessage], placement: SystemPlacement
) -> None:
    fixed, repairs = repair_messages(messages, system_messages=placement)
    assert find_message_problems(fixed, system_messages=placement) == []
    said = iter(_said(fixed))
    assert all(text in said for text in _said(messages))  # in order, none lost
    assert bool(repairs) == bool(find_message_problems(messages, system_messages=placement))
    again, more = repair_messages(fixed, system_messages=placement)
    assert more == []
    assert again == fixed


_AGENT: dict[str, Any] = {}


def _property_agent() -> tuple[Any, ScriptedChatModel]:
    if not _AGENT:
        model = ScriptedChatModel(
            respond=lambda _m: AIMessage("ok"),
            profile={"max_input_tokens": 3000, "max_output_tokens": 256},
        )
        middleware = ContextKitMiddleware.for_model(model, summaries="extractive")
        _AGENT["agent"] = create_agent(model, [track], middleware=[middleware])
        _AGENT["model"] = model
    return _AGENT["agent"], _AGENT["model"]


@given(st.lists(_message, max_size=12))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_middleware_never_raises_on_any_such_list(messages: list[BaseMessage]) -> None:
    agent, model = _property_agent()
    copies = [m.model_copy() for m in messages]  # the graph gives messages ids
    state = agent.invoke({"messages": [*copies, HumanMessage("Turn 1: go")]})
    assert state["messages"][-1].text == "ok"
    assert find_message_problems(model.requests[-1]) == []  # the strict model checked it too
