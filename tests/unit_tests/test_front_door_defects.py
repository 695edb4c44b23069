"""Defects a new user met at the front door, and the seeds' constructor shapes.

Each test here failed before its fix: schemas of every Runnable we ship on Python < 3.12,
a notes index that is a folder, a chat model passed where a compactor belongs, stacked
middlewares, `ScriptedChatModel(context_window=...)` ignored, and the seed shapes
`NoteTool(workspace=...)`, `ScriptedLLM([...])`, `TerminalTool(workspace=...)` and sync
reducers.
"""

from __future__ import annotations

import asyncio
import shutil
from typing import TYPE_CHECKING, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph

from langchain_contextkit import (
    CallableSource,
    CompactionMiddleware,
    ConfigError,
    ContextBuilder,
    ContextConfig,
    ContextKitMiddleware,
    FileNoteStore,
    HistoryCompactor,
    NoteError,
    PlanStep,
    PlanTrajectory,
    WindowBudget,
    WindowBudgetConfig,
    compaction_node,
    context_node,
    reduce_agent,
    reduce_agent_sync,
    reduce_plan,
    reduce_plan_sync,
    reducer_node,
)
from langchain_contextkit.agent.nodes import ContextGraphState
from langchain_contextkit.notes.file_store import INDEX_FILE, JOURNAL_FILE
from langchain_contextkit.retrieval.builder.retriever import BudgetedRetriever
from langchain_contextkit.retrieval.sources.notes import NoteSource
from langchain_contextkit.testing import ScriptedChatModel, ScriptedLLM
from langchain_contextkit.tools import NoteTool, TerminalTool

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_core.runnables import Runnable


def _fact(query: str) -> list[str]:
    return [f"About {query}: meals are capped at 80 per day."]


# --- 3. the schemas of every Runnable we ship ------------------------------------------------


def shipped_runnables(tmp_path: Path) -> dict[str, Runnable[Any, Any]]:
    source = CallableSource("rag", _fact)
    builder = ContextBuilder(ContextConfig.for_window(None, fallback_window=8000), sources=[source])
    model = ScriptedChatModel(["ok"], context_window=4000)
    store = FileNoteStore(tmp_path / "notes")
    return {
        "builder": builder,
        "builder | llm": builder | model,
        "budgeted retriever": BudgetedRetriever(sources=[source], budget=500),
        "callable source": source,
        "note source": NoteSource(name="notes", store=store),
        "note tool": NoteTool(store=store),
        "terminal tool": TerminalTool(tmp_path, sandbox="none"),
        "context_node": context_node(model=model),
        "compaction_node": compaction_node(HistoryCompactor()),
        "reducer_node": reducer_node("agent", budget=500),
    }


def test_every_runnable_we_ship_has_its_schemas_and_graph(tmp_path: Path) -> None:
    for name, runnable in shipped_runnables(tmp_path).items():
        assert runnable.get_input_schema().model_json_schema(), name
        assert isinstance(runnable.get_input_jsonschema(), dict), name
        assert isinstance(runnable.get_output_jsonschema(), dict), name
        graph = runnable.get_graph()
        assert graph.nodes, name
    schema = ContextBuilder(ContextConfig(max_tokens=1000)).get_input_jsonschema()
    assert "query" in str(schema)


# --- 4. the store's own files in the way --------------------------------------------------------


@pytest.mark.parametrize("name", [INDEX_FILE, JOURNAL_FILE])
def test_a_folder_where_the_index_or_journal_belongs_is_a_clear_note_error(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / "notes"
    tool = NoteTool(workspace=root)
    tool.invoke({"action": "create", "title": "Ingest lag", "content": "Batch size 5000."})
    (root / name).unlink()
    (root / name).mkdir()
    # The model sees what is wrong (not a raw IsADirectoryError traceback)...
    answer = tool.invoke({"action": "list"})
    assert "is a folder" in answer
    assert name in answer
    # ... and so does whoever opens the store.
    with pytest.raises(NoteError, match="move it away"):
        FileNoteStore(root)
    # Moved away, the index is rebuilt from the note files.
    shutil.rmtree(root / name)
    assert "Ingest lag" in NoteTool(workspace=root).invoke({"action": "list"})


def test_a_symlink_where_the_index_belongs_is_replaced_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me")
    root = tmp_path / "notes"
    store = FileNoteStore(root)
    store.create(title="Plan", content="Refactor first.")
    (root / INDEX_FILE).unlink()
    (root / INDEX_FILE).symlink_to(secret)
    assert [info.title for info in FileNoteStore(root).list_notes()] == ["Plan"]
    assert not (root / INDEX_FILE).is_symlink()
    assert secret.read_text() == "do not read me"


# --- 5. bad arguments to the middlewares, and stacking them --------------------------------------


def test_a_chat_model_where_a_compactor_belongs_fails_at_construction() -> None:
    model = ScriptedChatModel(["x"], context_window=4000)
    with pytest.raises(ConfigError, match=r"CompactionMiddleware\(HistoryCompactor\(model\)\)"):
        CompactionMiddleware(model)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"compactor=HistoryCompactor\(model\)"):
        ContextKitMiddleware(compactor=model)  # type: ignore[arg-type]


def test_the_two_middlewares_cannot_be_stacked_in_one_agent() -> None:
    model = ScriptedChatModel(["x"], context_window=4000)
    with pytest.raises(AssertionError, match="duplicate middleware"):
        create_agent(
            model, middleware=[CompactionMiddleware(), ContextKitMiddleware.for_model(model)]
        )
    # Each alone is fine.
    create_agent(model, middleware=[CompactionMiddleware()])
    create_agent(model, middleware=[ContextKitMiddleware.for_model(model)])


# --- 6 and 10. ScriptedChatModel / ScriptedLLM, the seed's shapes --------------------------------


def test_scripted_llm_takes_its_responses_positionally_and_sets_its_window() -> None:
    llm = ScriptedLLM(["first", "second"], context_window=200_000, max_output_tokens=8_000)
    assert ScriptedLLM is ScriptedChatModel
    assert llm.invoke("q").content == "first"
    assert llm.invoke("q").content == "second"
    budget = WindowBudget.for_run(llm=llm, cfg=WindowBudgetConfig())
    assert budget is not None
    assert (budget.window, budget.output_reserve) == (200_000, 4096)
    # Was: the window frozen by for_model; now read from the called model's profile.
    assembler = ContextKitMiddleware.for_model(llm).assembler
    assert (assembler.window, assembler.budget_for(model=llm).window) == (None, 200_000)


def test_scripted_llm_refuses_what_it_cannot_honour() -> None:
    with pytest.raises(ConfigError, match="context_window"):
        ScriptedLLM(context_window=0)
    with pytest.raises(ConfigError, match="once"):
        ScriptedLLM(["a"], responses=["b"])
    with pytest.raises(ConfigError, match="disagree"):
        ScriptedLLM(context_window=1000, profile={"max_input_tokens": 2000})


# --- 9 and 11. NoteTool(workspace=...) and TerminalTool(workspace=...) ----------------------------


def test_note_tool_builds_a_file_store_in_its_workspace(tmp_path: Path) -> None:
    tool = NoteTool(workspace=tmp_path / "project_notes", max_notes=1)
    assert isinstance(tool.store, FileNoteStore)
    assert tool.store.workspace == (tmp_path / "project_notes").resolve()
    tool.invoke({"action": "create", "title": "One", "content": "first"})
    assert "is full" in tool.invoke({"action": "create", "title": "Two", "content": "second"})
    with pytest.raises(ConfigError, match=r"store=.*or workspace="):
        NoteTool()
    with pytest.raises(ConfigError, match=r"store=.*or workspace="):
        NoteTool(store=tool.store, workspace=tmp_path)
    with pytest.raises(ConfigError, match="max_notes belongs to the store"):
        NoteTool(store=tool.store, max_notes=5)


def test_terminal_tool_takes_the_workspace_by_either_word(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("BATCH_SIZE = 5000\n")
    by_root = TerminalTool(tmp_path, sandbox="none")
    by_workspace = TerminalTool(workspace=tmp_path, sandbox="none")
    command = {"command": "grep -n BATCH app.py"}
    assert by_root.invoke(command) == by_workspace.invoke(command)
    with pytest.raises(ConfigError, match="once"):
        TerminalTool()
    with pytest.raises(ConfigError, match="once"):
        TerminalTool(tmp_path, workspace=tmp_path)


# --- 12. sync entry points for the reducers ------------------------------------------------------


def _loop(steps: int) -> list[Any]:
    messages: list[Any] = [HumanMessage("Find the cheapest fare.")]
    for day in range(steps):
        call = {"name": "search", "args": {"day": day}, "id": f"c{day}"}
        messages += [
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"Day {day}: fare {300 + day} EUR. " * 8, tool_call_id=f"c{day}"),
        ]
    return messages


def test_the_sync_reducers_give_what_the_async_ones_give() -> None:
    messages = _loop(8)
    assert reduce_agent_sync(messages, 300, keep_recent_steps=2) == asyncio.run(
        reduce_agent(messages, 300, keep_recent_steps=2)
    )
    plan = PlanTrajectory(
        goal="Ship v2",
        steps=[
            PlanStep(number=n, description=f"step {n}", status="done", result=f"Result {n}. " * 20)
            for n in range(1, 6)
        ],
    )
    assert reduce_plan_sync(plan, 240, keep_recent=1) == asyncio.run(
        reduce_plan(plan, 240, keep_recent=1)
    )


async def test_a_sync_reducer_also_works_inside_a_running_event_loop() -> None:
    messages = _loop(8)
    assert reduce_agent_sync(messages, 400, keep_recent_steps=1) == await reduce_agent(
        messages, 400, keep_recent_steps=1
    )


def test_a_plain_sync_graph_node_can_reduce_without_asyncio() -> None:
    def reduce_node(state: ContextGraphState) -> dict[str, Any]:
        return {
            "llm_input_messages": reduce_agent_sync(state["messages"], 400, keep_recent_steps=1)
        }

    builder = StateGraph(ContextGraphState)
    builder.add_node("reduce", reduce_node)
    builder.add_edge(START, "reduce")
    state = builder.compile().invoke({"messages": _loop(8)})
    assert len(state["llm_input_messages"]) < len(state["messages"])
