"""NoteTool (the standard LangChain tool suite, actions, errors, artifacts) and NoteSource."""

from __future__ import annotations

import pytest
from langchain_core.messages import ToolMessage
from langchain_tests.unit_tests import ToolsUnitTests
from langgraph.store.memory import InMemoryStore

from langchain_contextkit import FileNoteStore, NoteSource, NoteTool, StoreNoteStore
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval.result import RetrievalResult
from langchain_contextkit.tools import NoteToolInput


class TestNoteToolStandard(ToolsUnitTests):
    @property
    def tool_constructor(self):
        return NoteTool

    @property
    def tool_constructor_params(self):
        return {"store": StoreNoteStore(InMemoryStore())}

    @property
    def tool_invoke_params_example(self):
        return {
            "action": "create",
            "title": "Phase 1",
            "content": "Models refactored.",
            "note_type": "task_state",
            "tags": ["refactoring"],
        }


@pytest.fixture(params=["file", "memory"])
def tool(request, tmp_path):
    if request.param == "file":
        return NoteTool(store=FileNoteStore(tmp_path))
    return NoteTool(store=StoreNoteStore(InMemoryStore()))


def call(tool, **args) -> ToolMessage:
    message = tool.invoke({"name": "note", "id": "call-1", "type": "tool_call", "args": args})
    assert isinstance(message, ToolMessage)
    return message


async def acall(tool, **args) -> ToolMessage:
    message = await tool.ainvoke(
        {"name": "note", "id": "call-1", "type": "tool_call", "args": args}
    )
    assert isinstance(message, ToolMessage)
    return message


def test_schema_is_the_seed_contract():
    schema = NoteToolInput.model_json_schema()
    assert set(schema["properties"]) == {
        "action",
        "title",
        "content",
        "note_type",
        "tags",
        "note_id",
        "query",
        "limit",
    }
    assert schema["required"] == ["action"]
    assert schema["properties"]["action"]["enum"] == [
        "create",
        "read",
        "update",
        "delete",
        "list",
        "search",
        "summary",
    ]


def test_every_action(tool):
    created = call(
        tool,
        action="create",
        title="依赖冲突",
        content="库 A 需要 B<2",
        note_type="blocker",
        tags=["dependency"],
    )
    assert created.status == "success"
    note = created.artifact["note"]
    assert created.content == f"Created note {note['id']}: 依赖冲突"
    assert note["type"] == "blocker"

    read = call(tool, action="read", note_id=note["id"])
    assert read.content.startswith(f"{note['id']} [blocker] 依赖冲突 #dependency (updated ")
    assert read.content.endswith("\n\n库 A 需要 B<2")
    assert read.artifact["note"]["content"] == "库 A 需要 B<2"

    updated = call(tool, action="update", note_id=note["id"], content="已固定 B==1.9")
    assert updated.content.startswith(f"Updated note {note['id']}")
    assert updated.artifact["note"]["content"] == "已固定 B==1.9"

    call(tool, action="create", title="Plan", content="next: tests", note_type="action")
    listed = call(tool, action="list", note_type="blocker")
    assert listed.content.splitlines()[0] == "1 note, newest first:"
    assert [n["id"] for n in listed.artifact["notes"]] == [note["id"]]

    found = call(tool, action="search", query="固定", limit=3)
    assert found.content.splitlines()[0] == "1 note:"
    assert found.content.splitlines()[2] == "  已固定 B==1.9"
    assert found.artifact["hits"][0]["score"] > 0

    summary = call(tool, action="summary")
    assert summary.content.splitlines()[0] == "2 notes (blocker 1, action 1)."
    assert summary.artifact["summary"]["total"] == 2

    deleted = call(tool, action="delete", note_id=note["id"])
    assert deleted.content == f"Deleted note {note['id']}: 依赖冲突"
    assert call(tool, action="list", note_type="blocker").content == "No notes match."


def test_plain_invoke_returns_the_text(tool):
    text = tool.invoke({"action": "create", "title": "t", "content": "c"})
    assert text.startswith("Created note note_")


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        ({"action": "create", "title": "t"}, "create needs content"),
        ({"action": "create"}, "create needs title and content"),
        ({"action": "read"}, "read needs note_id"),
        ({"action": "read", "note_id": "note_20250101_000000_0"}, "no note with id"),
        ({"action": "read", "note_id": "../../etc/passwd"}, "invalid note_id"),
        ({"action": "update", "note_id": "note_20250101_000000_0"}, "at least one of"),
        ({"action": "delete", "note_id": "note_20250101_000000_0"}, "use list or search"),
        ({"action": "search"}, "search needs a query"),
        ({"action": "create", "title": "a\nb", "content": "c"}, "single line"),
        ({"action": "create", "title": "t", "content": "c", "note_type": "todo"}, "note_type"),
        ({"action": "explode"}, "action"),
        ({"action": "list", "limit": 0}, "limit"),
    ],
)
def test_mistakes_come_back_as_actionable_errors(tool, args, hint):
    message = call(tool, **args)
    assert message.status == "error"
    assert hint in message.content


def test_a_full_store_says_what_to_do(tmp_path):
    tool = NoteTool(store=FileNoteStore(tmp_path, max_notes=1))
    call(tool, action="create", title="a", content="x")
    message = call(tool, action="create", title="b", content="x")
    assert message.status == "error"
    assert "update or delete an existing note" in message.content


def test_other_failures_propagate(tmp_path):
    class Broken(StoreNoteStore):
        def summary(self, *, recent=5):
            raise OSError("disk on fire")

    tool = NoteTool(store=Broken(InMemoryStore()))
    with pytest.raises(OSError, match="disk on fire"):
        call(tool, action="summary")


async def test_async_actions(tool):
    created = await acall(tool, action="create", title="async", content="body", tags=["x"])
    note_id = created.artifact["note"]["id"]
    assert (await acall(tool, action="read", note_id=note_id)).artifact["note"]["id"] == note_id
    await acall(tool, action="update", note_id=note_id, title="renamed")
    assert "renamed" in (await acall(tool, action="list", tags=["x"])).content
    assert (await acall(tool, action="search", query="body")).artifact["hits"]
    assert (await acall(tool, action="summary")).artifact["summary"]["total"] == 1
    assert (await acall(tool, action="delete", note_id=note_id)).status == "success"
    missing = await acall(tool, action="read", note_id=note_id)
    assert missing.status == "error"


# -- NoteSource -------------------------------------------------------------------------------


@pytest.fixture
def notes_store():
    store = StoreNoteStore(InMemoryStore())
    store.create(title="Refactor plan", content="Refactor the models first.", tags=["plan"])
    store.create(title="Old blocker", content="Flaky network.", note_type="blocker")
    store.create(title="CI is red", content="Tests time out.", note_type="blocker")
    store.create(title="Refactor result", content="Models refactored, 85% coverage.")
    return store


def test_note_source_puts_blockers_first(notes_store):
    source = NoteSource(name="notes", store=notes_store, k=3)
    results = source.fetch("refactor")
    heads = [r.content.splitlines()[0] for r in results]
    assert heads[:2] == ["[blocker] CI is red", "[blocker] Old blocker"]
    assert heads[2].startswith("[general] Refactor")
    assert all(isinstance(r, RetrievalResult) and r.source == "notes" for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert results[0].metadata["note_type"] == "blocker"
    assert results[0].metadata["note_id"].startswith("note_")


def test_note_source_without_pinned_blockers(notes_store):
    results = NoteSource(name="notes", store=notes_store, max_blockers=0, k=2).fetch("refactor")
    assert {r.metadata["note_type"] for r in results} == {"general"}
    assert len(results) == 2


def test_note_source_deduplicates(notes_store):
    results = NoteSource(name="notes", store=notes_store, k=10).fetch("CI time out")
    ids = [r.metadata["note_id"] for r in results]
    assert len(ids) == len(set(ids))
    assert results[0].content == "[blocker] CI is red\nTests time out."


async def test_note_source_async_and_retriever_paths(notes_store):
    source = NoteSource(name="notes", store=notes_store, k=2)
    assert [r.content for r in await source.afetch("refactor")] == [
        r.content for r in source.fetch("refactor")
    ]
    docs = await source.ainvoke("refactor")
    assert docs[0].metadata["contextkit_source"] == "notes"
    assert source.invoke("refactor", k=1)[0].page_content.startswith("[blocker]")


def test_note_source_checks_its_arguments(notes_store):
    with pytest.raises(ConfigError):
        NoteSource(name="notes", store="not a store")
    with pytest.raises(ConfigError):
        NoteSource(name="notes", store=notes_store, max_blockers=-1)
