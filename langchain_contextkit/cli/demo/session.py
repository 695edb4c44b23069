"""The demo's agent session: `create_agent` with `ContextKitMiddleware`, turn by turn.

`DemoSession` copies the sample project to a workspace, builds the agent and runs the
conversation, reporting each model call as soon as its ledger is in the state, and checks
at the end which planted facts the model could still see in its last request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit.agent.ledger import CallLedger
from langchain_contextkit.agent.middleware import LEDGER_KEY, ContextKitMiddleware
from langchain_contextkit.agent.plan import RETRIEVAL_ID
from langchain_contextkit.agent.window_budget import WindowBudgetConfig
from langchain_contextkit.cli.demo.project import copy_project
from langchain_contextkit.cli.demo.script import FACTS, SYSTEM_PROMPT, TURNS, scripted_reply
from langchain_contextkit.compaction.compactor import RECAP_ID_PREFIX, HistoryCompactor
from langchain_contextkit.notes import FileNoteStore
from langchain_contextkit.prompts import PromptRegistry
from langchain_contextkit.quality import GateResult, QualityGate
from langchain_contextkit.retrieval.sources.docs import DocsSource
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tools import NoteTool, TerminalTool

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Sequence
    from pathlib import Path

    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "PARTS",
    "CallRecord",
    "DemoGate",
    "DemoSession",
    "FactSeen",
    "GateFailure",
    "NoteActivity",
    "SessionSettings",
]

PARTS = ("system", "summary", "notes", "docs", "history", "turn")
"""Where a fact can be in a request: the retrieval block is split by its sources."""
_MOVE_CHARS = 200
_RAG_RATIO = 0.3


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionSettings:
    """What the session runs with."""

    workspace: Path
    window: int
    output_reserve: int
    turns: int
    model: BaseChatModel | None = None
    """None: the scripted agent."""
    ledger_path: Path | None = None
    """Where the middleware appends every call's ledger (JSON lines); None: nowhere."""


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One model call: its turn, its ledger and what the model did."""

    turn: int
    ledger: CallLedger
    move: str


@dataclass(frozen=True, slots=True)
class FactSeen:
    """Whether a planted fact was in the model's last request, and in which parts."""

    label: str
    needle: str
    parts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GateFailure:
    """The gate checked on purpose on a request with parts removed."""

    removed: tuple[str, ...]
    messages: int
    """Messages left in the request."""
    result: GateResult


class DemoGate:
    """The demo's quality gate: fixed thresholds, and the planted facts stated so far.

    A `QualityGate` is static; this one rebuilds it for the current user turn (set by
    the session before each turn), so a fact is required from the turn that states it.
    """

    def __init__(self, *, max_request_tokens: int, max_retrieval_share: float) -> None:
        """Fix the thresholds; the facts follow `turn`."""
        self.max_request_tokens = max_request_tokens
        self.max_retrieval_share = max_retrieval_share
        self.turn = 1

    def for_turn(self, turn: int) -> QualityGate:
        """The gate of calls in user turn `turn` (1-based)."""
        return QualityGate(
            max_request_tokens=self.max_request_tokens,
            max_retrieval_share=self.max_retrieval_share,
            required_facts=[fact.needle for fact in FACTS if fact.turn <= turn],
        )

    def check(self, target: object, *, messages: Sequence[BaseMessage] | None = None) -> GateResult:
        """`QualityGate.check` with the current turn's gate."""
        return self.for_turn(self.turn).check(target, messages=messages)


@dataclass(slots=True)
class NoteActivity:
    """What the agent did with its notes (successful tool calls only)."""

    created: int = 0
    updated: int = 0
    read: int = 0
    searched: int = 0
    on_disk: int = 0


class _LastRequest(AgentMiddleware[AgentState[Any], Any, Any]):
    """Records the request that reaches the model (inside `ContextKitMiddleware`)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[BaseMessage] = []

    def _keep(self, request: ModelRequest[Any]) -> None:
        system = [request.system_message] if request.system_message else []
        self.messages = [*system, *request.messages]

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        self._keep(request)
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        self._keep(request)
        return await handler(request)


@dataclass(slots=True)
class DemoSession:
    """The sample project, the agent over it, and what happened so far."""

    settings: SessionSettings
    files: list[str] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    sandbox: str = "none"
    _agent: Any = None
    _store: FileNoteStore | None = None
    _recorder: _LastRequest = field(default_factory=_LastRequest)
    _messages: list[BaseMessage] = field(default_factory=list)
    _titles: dict[str, str] = field(default_factory=dict)
    gate: DemoGate = field(init=False)

    def __post_init__(self) -> None:
        """Build the gate from the settings (the window, the output reserve)."""
        settings = self.settings
        self.gate = DemoGate(
            max_request_tokens=settings.window - settings.output_reserve,
            max_retrieval_share=_RAG_RATIO + 0.05,
        )

    @property
    def project(self) -> Path:
        """The copy of the sample project the terminal explores."""
        return self.settings.workspace / "project"

    @property
    def notes_dir(self) -> Path:
        """Where `FileNoteStore` keeps the agent's notes."""
        return self.settings.workspace / "notes"

    @property
    def turns(self) -> int:
        """How many user turns the session runs."""
        return max(1, min(self.settings.turns, len(TURNS)))

    def setup(self) -> None:
        """Copy the project, build the tools, the middleware and the agent."""
        settings = self.settings
        self.files = copy_project(self.project)
        self._store = FileNoteStore(self.notes_dir)
        terminal = TerminalTool(self.project, max_output_chars=3000)
        self.sandbox = terminal.sandbox_active
        model = settings.model or ScriptedChatModel(respond=scripted_reply)
        middleware = ContextKitMiddleware(
            window=settings.window,
            sources=[DocsSource.from_folder(self.project, name="docs", k=6)],
            note_store=self._store,
            compactor=HistoryCompactor(
                keep_recent=2,
                trigger_tokens=settings.window * 3 // 4,
                max_summary_tokens=max(200, settings.window // 16),
            ),
            budget_config=WindowBudgetConfig(
                desired_output_tokens=settings.output_reserve, rag_ratio=_RAG_RATIO
            ),
            keep_recent_steps=1,  # the session's longest turn reads seven files
            ledger_size=len(TURNS) * 10,
            ledger_path=settings.ledger_path,
            # Checked on every call; the result lands in the call's ledger ("gate" in each
            # ledger line) and the report counts the failures. `deliberate_failure` then
            # checks the same gate on the last request with its memory taken out.
            quality_gate=self.gate,
            on_gate_fail="log",
        )
        stack: list[AgentMiddleware[Any, Any, Any]] = [middleware, self._recorder]
        self._agent = create_agent(
            model,
            tools=[terminal, NoteTool(store=self._store)],
            system_prompt=SYSTEM_PROMPT,
            middleware=stack,
            checkpointer=InMemorySaver(),
        )

    def run_turn(self, number: int) -> Iterator[CallRecord]:
        """Send user turn `number` (1-based); yield each model call as it completes."""
        config = {"configurable": {"thread_id": "contextkit-demo"}}
        question = HumanMessage(TURNS[number - 1].user)
        self.gate.turn = number
        start = len(self._messages) + 1  # the question itself is appended first
        seen = self.calls[-1].ledger.call if self.calls else 0
        moves = 0
        for state in self._agent.stream({"messages": [question]}, config, stream_mode="values"):
            self._messages = list(state.get("messages", []))
            self._learn_titles(self._messages[start:])
            replies = [m for m in self._messages[start:] if isinstance(m, AIMessage)]
            for entry in state.get(LEDGER_KEY, []):
                if entry["call"] <= seen or moves >= len(replies):
                    continue
                move = _move(replies[moves], self._titles)
                record = CallRecord(number, CallLedger(**entry), move)
                moves += 1
                seen = entry["call"]
                self.calls.append(record)
                yield record

    def facts(self) -> list[FactSeen]:
        """The planted facts (of the turns run) and where the last request shows each."""
        texts = _part_texts(self._recorder.messages)
        return [
            FactSeen(
                fact.label,
                fact.needle,
                tuple(part for part in PARTS if fact.needle in texts[part]),
            )
            for fact in FACTS
            if fact.turn <= self.turns
        ]

    def deliberate_failure(self) -> GateFailure:
        """The gate on the last request with its summary and retrieval block removed.

        Provoked on purpose: without the recap and the retrieved notes, a fact planted
        early (the change freeze's date) is only in the session's memory, so the gate,
        healthy on every call, should fail on its required facts.
        """
        messages = [
            m
            for m in self._recorder.messages
            if m.id != RETRIEVAL_ID
            and not (isinstance(m.id, str) and m.id.startswith(RECAP_ID_PREFIX))
        ]
        result = self.gate.for_turn(self.turns).check(messages)
        return GateFailure(
            removed=("summary", "retrieval block"),
            messages=len(messages),
            result=result,
        )

    def _learn_titles(self, messages: list[BaseMessage]) -> None:
        """Note ids and titles from the note tool's artifacts, to name notes in moves."""
        for message in messages:
            artifact = getattr(message, "artifact", None)
            if not isinstance(message, ToolMessage) or not isinstance(artifact, dict):
                continue
            notes = [artifact.get("note"), *artifact.get("hits", []), *artifact.get("notes", [])]
            for note in notes:
                if isinstance(note, dict) and "id" in note and "title" in note:
                    self._titles[str(note["id"])] = str(note["title"])

    def note_activity(self) -> NoteActivity:
        """Successful note tool calls by action, and how many notes are on disk."""
        results = {m.tool_call_id: m for m in self._messages if isinstance(m, ToolMessage)}
        activity = NoteActivity()
        counters = {"create": "created", "update": "updated", "read": "read", "search": "searched"}
        for message in self._messages:
            if not isinstance(message, AIMessage):
                continue
            for call in message.tool_calls:
                result = results.get(call.get("id") or "")
                name = counters.get(str(call["args"].get("action")))
                if call["name"] == "note" and name and result and result.status != "error":
                    setattr(activity, name, getattr(activity, name) + 1)
        if self._store is not None:
            activity.on_disk = self._store.summary(recent=0).total
        return activity

    def conversation(self) -> list[BaseMessage]:
        """The session's messages so far (the thread's state: tool calls and results too)."""
        return list(self._messages)

    def last_answer(self) -> str:
        """The model's last answer in text."""
        for message in reversed(self._messages):
            if isinstance(message, AIMessage) and not message.tool_calls and message.text:
                return message.text
        return ""


def _move(message: AIMessage, titles: dict[str, str]) -> str:
    """One line for what the model did at a call: its tool calls, or its answer."""
    if not message.tool_calls:
        return "answer: " + " ".join(message.text.split())[:_MOVE_CHARS]
    moves = []
    for call in message.tool_calls:
        args = call.get("args") or {}
        if call["name"] == "terminal":
            moves.append(f"$ {args.get('command', '')}")
        elif call["name"] == "note":
            action = str(args.get("action", "?"))
            note_id = str(args.get("note_id") or "")
            detail = args.get("title") or args.get("query") or titles.get(note_id, note_id)
            moves.append(f"note {action}: {detail}" if detail else f"note {action}")
        else:
            moves.append(f"{call['name']} {json.dumps(args, ensure_ascii=False)}")
    return " ; ".join(moves)


def _part_texts(messages: list[BaseMessage]) -> dict[str, str]:
    """The request's text by part (tool-call arguments included)."""
    last_human = max(
        (i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=len(messages)
    )
    texts: dict[str, list[str]] = {part: [] for part in PARTS}
    for index, message in enumerate(messages):
        if message.id == RETRIEVAL_ID:
            for part, text in _block_sections(message.text):
                texts[part].append(text)
            continue
        if isinstance(message.id, str) and message.id.startswith(RECAP_ID_PREFIX):
            part = "summary"
        elif index == 0 and message.type == "system":
            part = "system"
        elif index >= last_human:
            part = "turn"
        else:
            part = "history"
        texts[part].append(message.text)
        if isinstance(message, AIMessage):
            texts[part].extend(
                json.dumps(c["args"], ensure_ascii=False) for c in message.tool_calls
            )
    return {part: "\n".join(chunks) for part, chunks in texts.items()}


def _block_sections(text: str) -> list[tuple[str, str]]:
    """The retrieval block cut at its section headings: (``notes`` or ``docs``, text)."""
    prompts = PromptRegistry()
    headings = {prompts.heading(name): name for name in ("notes", "docs")}
    sections: list[tuple[str, str]] = []
    part, lines = "docs", list[str]()
    for line in text.splitlines():
        if line in headings:
            sections.append((part, "\n".join(lines)))
            part, lines = headings[line], []
        lines.append(line)
    sections.append((part, "\n".join(lines)))
    return sections
