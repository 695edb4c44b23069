"""A model recap's floor is carried beside it, never rebuilt from the model's own recap.

A verbose summariser copies every line it was shown (the user's pasted log lines, full of
numbers, without saying whose they are) into its recap. Were the next floor (the
extractive recap the model's may not keep fewer facts than) extended from that recap,
the copied lines would crowd the user's facts out of the floor itself, and a fact the
model then dropped would have nothing to bring it back: `bench/bench_never_fail.py`
measured 21-29 of 30 facts at 4k against extractive's 30 before the floor was carried.
"""

from __future__ import annotations

import gettext
import struct
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import ContextKitMiddleware, HistoryCompactor, RunningSummary
from langchain_contextkit.testing import ScriptedChatModel

TURNS = 30
LOCALE = Path("/usr/share/locale")


def _catalogue_text(language: str) -> str:
    """The language's translated messages that Debian installs (read, never copied in)."""
    text = ""
    for path in sorted((LOCALE / language / "LC_MESSAGES").glob("*.mo")):
        try:
            with path.open("rb") as handle:
                catalogue = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
        except (OSError, UnicodeDecodeError, struct.error):  # a malformed catalogue
            continue
        text += "\n".join(
            v for k, v in sorted(catalogue.items(), key=str) if k and isinstance(v, str)
        )
        if len(text) > 100_000:
            break
    return text


TEXT = _catalogue_text("ar")
pytestmark = pytest.mark.skipif(len(TEXT) < 20_000, reason="needs the Arabic catalogues")


def piece(index: int, chars: int) -> str:
    start = (index * 7919 * chars) % max(1, len(TEXT) - chars)
    return TEXT[start : start + chars]


def code(turn: int) -> str:
    return f"{(turn * 482_711) % 900_000 + 100_000}"


def user_turn(turn: int) -> str:
    return (
        f"Turn {turn}. Please remember: locker L{turn} opens with {code(turn)}.\n{piece(turn, 600)}"
    )


@tool
def read_manual(page: int) -> str:
    """Read a section of the manual."""
    return piece(1000 + page, 1200)


def _is_recap_request(messages: list[BaseMessage]) -> bool:
    last = messages[-1]
    return isinstance(last, HumanMessage) and "ummar" in last.text[:400]


def verbose(messages: list[BaseMessage]) -> AIMessage:
    """A recap request answered with the facts, then every line it was shown, unlabelled."""
    # Everything it was shown: an in-place view, or a transcript request's one message.
    shown = "\n".join(m.text for m in messages)
    turns = "\n".join(m.text for m in messages if not isinstance(m, SystemMessage))
    facts = [
        f"- User: locker L{turn} opens with {code(turn)}"
        for turn in range(1, TURNS + 1)
        if code(turn) in shown
    ]
    copied = [f"- {line}" for line in turns.splitlines() if line.strip() and not line.endswith(":")]
    return AIMessage("\n".join(["Facts:", *facts, *copied]))


def respond(messages: list[BaseMessage]) -> AIMessage:
    if _is_recap_request(messages):
        return verbose(messages)
    if isinstance(messages[-1], HumanMessage):
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        call = {"name": "read_manual", "args": {"page": turn}, "id": f"c{len(messages)}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage("Noted, that section is read.")


def _run(summaries: str) -> tuple[int, dict[str, Any]]:
    model = ScriptedChatModel(respond=respond, context_window=4_000, max_output_tokens=256)
    middleware = ContextKitMiddleware.for_model(model, summaries=summaries)  # type: ignore[arg-type]
    agent = create_agent(
        model,
        [read_manual],
        system_prompt="You read manual pages for the user.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": summaries}}
    for turn in range(1, TURNS + 1):
        agent.invoke({"messages": [HumanMessage(user_turn(turn))]}, config)
    last = next(r for r in reversed(model.requests) if not _is_recap_request(r))
    shown = "\n".join(m.text for m in last)
    kept = sum(code(turn) in shown for turn in range(1, TURNS + 1))
    return kept, agent.get_state(config).values


def test_a_verbose_summariser_keeps_as_many_facts_as_extractive() -> None:
    extractive, _ = _run("extractive")
    default, state = _run("model")
    assert extractive == TURNS  # the baseline holds them all at this window
    assert default >= extractive
    summary = RunningSummary.from_state(state["contextkit_summary"])
    assert summary is not None
    assert summary.floor is not None  # a model's recap carries its floor
    # The floor holds every fact the recap covers: the first turns aged out long ago.
    assert code(1) in summary.floor


@pytest.mark.parametrize("floor", [None, "Facts:\n- User: locker L1 opens with 582711."])
def test_the_floor_survives_state(floor: str | None) -> None:
    summary = RunningSummary("Facts:\n- User: L1 582711", 12, "m12", "d" * 16, floor)
    stored = summary.to_dict()
    assert ("floor" in stored) is (floor is not None)
    assert RunningSummary.from_state(stored) == summary


def test_the_next_floor_extends_the_floor_not_the_models_recap() -> None:
    """A fact the model's recap lost but its floor kept comes back at the next compaction."""
    model_text = "Facts:\n- User: locker L2 opens with 165422."  # L1 lost by the model
    floor = "Facts:\n- User: locker L1 opens with 582711.\n- User: locker L2 opens with 165422."
    history: list[BaseMessage] = []
    for turn in range(3, 9):
        history += [HumanMessage(f"Turn {turn}: the weather is fine."), AIMessage("Noted.")]
    compactor = HistoryCompactor(trigger_tokens=60, keep_recent=2, max_summary_tokens=200)

    def lossy(text: str, instruction: str) -> str:
        return "Facts:\n- User: locker L2 opens with 165422."

    carried = compactor.compact_view(
        history, summary=RunningSummary(model_text, 0, floor=floor), summarize=lossy
    )
    rebuilt = compactor.compact_view(
        history, summary=RunningSummary(model_text, 0), summarize=lossy
    )
    assert carried.summary is not None
    assert rebuilt.summary is not None
    assert "582711" in carried.summary.text  # the floor in force brought L1 back
    assert "582711" not in rebuilt.summary.text  # without it, nothing could
    assert carried.summary.floor is not None
    assert "582711" in carried.summary.floor
