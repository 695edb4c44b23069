"""One behaviour suite for every note store: files, LangGraph InMemoryStore, PostgresStore.

The Postgres run starts a throwaway PostgreSQL cluster (initdb + pg_ctl, as `nobody` when
we are root, which initdb requires) on 127.0.0.1 for this module, and skips only where no
server binaries exist. Set PG_BIN to point at another installation's bin folder.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime

import pytest
from _postgres import LOCALHOST
from langgraph.store.memory import InMemoryStore

from langchain_contextkit import (
    FileNoteStore,
    InvalidNoteError,
    NoteLimitError,
    NoteNotFoundError,
    NoteStore,
    StoreNoteStore,
)
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.notes.model import NOTE_TYPES

# -- a throwaway PostgreSQL server (the `postgres_url` fixture: conftest + _postgres) --


@pytest.fixture(scope="module")
def postgres_store(postgres_url):
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_url) as store:
        store.setup()
        yield store


# -- the stores under test --------------------------------------------------------------

KINDS = [
    "file",
    "memory",
    pytest.param("postgres", marks=LOCALHOST),
]


@pytest.fixture(params=KINDS)
def open_store(request, tmp_path):
    """A factory of stores that share one backing: call it twice for two 'processes'."""
    kind = request.param
    if kind == "file":
        return lambda **limits: FileNoteStore(tmp_path / "notes", **limits)
    backing = InMemoryStore() if kind == "memory" else request.getfixturevalue("postgres_store")
    namespace = ("notes", uuid.uuid4().hex)  # each test its own notes
    return lambda **limits: StoreNoteStore(backing, namespace=namespace, **limits)


@pytest.fixture
def store(open_store) -> NoteStore:
    return open_store()


TRICKY = [
    "---",
    "--- a: b # c",
    "title: [x, y] {z: 1} &anchor *alias !!python/object",
    "依赖冲突 - 第一阶段",
    "emoji 🚀 and ünïcödé",
    "'quoted' \"double\"",
    "  leading and trailing spaces  ",
    "yes",
    "null",
    "2025-01-19T15:30:00",
    "123",
]
TRICKY_CONTENT = "---\nid: fake\ntitle: fake\n---\n\n# Heading\n\n---\n...\n\ttab\r\nCRLF\n\n\n"


# -- create / read ----------------------------------------------------------------------


def test_create_then_get_round_trips(store):
    note = store.create(
        title="Phase 1", content="done", note_type="task_state", tags=["a", "b", "a"]
    )
    assert note.id.startswith("note_")
    assert note.tags == ("a", "b")
    assert note.created_at == note.updated_at
    assert store.get(note.id) == note


@pytest.mark.parametrize("text", TRICKY)
def test_yaml_like_titles_and_tags_round_trip(store, text):
    note = store.create(title=text, content=TRICKY_CONTENT, tags=[text, "plain"])
    again = store.get(note.id)
    assert again.title == text
    assert again.tags == (text, "plain")
    assert again.content == TRICKY_CONTENT


def test_ids_have_the_seed_shape_and_are_unique(store):
    ids = {store.create(title=f"n{i}", content="x").id for i in range(30)}
    assert len(ids) == 30
    for note_id in ids:
        prefix, date, time, suffix = note_id.split("_")
        assert prefix == "note"
        assert len(date) == 8
        assert len(time) == 6
        assert suffix


def test_every_note_type_is_accepted(store):
    for kind in NOTE_TYPES:
        assert store.create(title=kind, content="", note_type=kind).type == kind


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"title": "", "content": "x"}, InvalidNoteError),
        ({"title": "two\nlines", "content": "x"}, InvalidNoteError),
        ({"title": "t" * 201, "content": "x"}, InvalidNoteError),
        ({"title": "t", "content": "x", "note_type": "todo"}, InvalidNoteError),
        ({"title": "t", "content": "x", "tags": "not-a-list"}, InvalidNoteError),
        ({"title": "t", "content": "x", "tags": [""]}, InvalidNoteError),
        ({"title": "t", "content": "x", "tags": [str(i) for i in range(21)]}, InvalidNoteError),
        ({"title": "t", "content": 5}, InvalidNoteError),
        ({"title": "t", "content": "\ud800"}, InvalidNoteError),
    ],
)
def test_bad_fields_are_refused(store, fields, error):
    with pytest.raises(error):
        store.create(**fields)
    assert store.list_notes() == []


def test_content_cap(open_store):
    store = open_store(max_content_chars=10)
    store.create(title="ok", content="x" * 10)
    with pytest.raises(NoteLimitError, match="over this store's cap of 10"):
        store.create(title="too long", content="x" * 11)
    note = store.list_notes()[0]
    with pytest.raises(NoteLimitError):
        store.update(note.id, content="x" * 11)


def test_max_notes(open_store):
    store = open_store(max_notes=3)
    notes = [store.create(title=f"n{i}", content="x") for i in range(3)]
    with pytest.raises(NoteLimitError, match="max_notes=3"):
        store.create(title="one more", content="x")
    store.delete(notes[0].id)
    store.create(title="fits again", content="x")
    assert len(store.list_notes()) == 3


@pytest.mark.parametrize("limits", [{"max_notes": 0}, {"max_content_chars": -1}])
def test_bad_limits_fail_at_construction(open_store, limits):
    with pytest.raises(ConfigError):
        open_store(**limits)


# -- update / delete ----------------------------------------------------------------------


def test_update_changes_only_what_is_given(store):
    note = store.create(title="Plan", content="v1", note_type="action", tags=["x"])
    updated = store.update(note.id, content="v2")
    assert (updated.title, updated.type, updated.tags, updated.content) == (
        "Plan",
        "action",
        ("x",),
        "v2",
    )
    assert updated.created_at == note.created_at
    assert updated.updated_at >= note.updated_at
    assert store.get(note.id) == updated
    retyped = store.update(note.id, note_type="conclusion", tags=[], title="Done")
    assert (retyped.title, retyped.type, retyped.tags, retyped.content) == (
        "Done",
        "conclusion",
        (),
        "v2",
    )


def test_update_without_changes_is_refused(store):
    note = store.create(title="t", content="c")
    with pytest.raises(InvalidNoteError, match="nothing to update"):
        store.update(note.id)


def test_delete(store):
    note = store.create(title="t", content="c")
    info = store.delete(note.id)
    assert info.id == note.id
    assert info.title == "t"
    for call in (store.get, store.delete):
        with pytest.raises(NoteNotFoundError, match="use list or search"):
            call(note.id)
    with pytest.raises(NoteNotFoundError):
        store.update(note.id, content="x")
    assert store.list_notes() == []


BAD_IDS = [
    "",
    "..",
    "../etc/passwd",
    "/etc/passwd",
    "note_../../x",
    "note_a/b",
    "note_a\\b",
    "note_a\x00",
    "note_a\n",
    "note_.md",
    "C:\\note_x",
    "x" * 10,
    "note_" + "a" * 200,
    5,
    None,
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_ids_are_refused(store, bad):
    for call in (store.get, store.delete, lambda i: store.update(i, content="x")):
        with pytest.raises(InvalidNoteError, match="note_id"):
            call(bad)


def test_unknown_well_formed_id_is_not_found(store):
    with pytest.raises(NoteNotFoundError):
        store.get("note_20250119_153000_0")


# -- list / summary -----------------------------------------------------------------------


def test_list_newest_first_with_filters(store):
    a = store.create(title="a", content="", note_type="blocker", tags=["x"])
    b = store.create(title="b", content="", note_type="action", tags=["y"])
    c = store.create(title="c", content="", note_type="blocker", tags=["y", "z"])
    store.update(a.id, content="touched")  # now the newest
    assert [i.id for i in store.list_notes()] == [a.id, c.id, b.id]
    assert [i.id for i in store.list_notes(note_type="blocker")] == [a.id, c.id]
    assert [i.id for i in store.list_notes(tags=["y"])] == [c.id, b.id]
    assert [i.id for i in store.list_notes(tags=["x", "z"])] == [a.id, c.id]
    assert [i.id for i in store.list_notes(limit=1)] == [a.id]
    with pytest.raises(InvalidNoteError):
        store.list_notes(limit=0)
    with pytest.raises(InvalidNoteError):
        store.list_notes(note_type="nope")


def test_summary(store):
    for kind in ["blocker", "blocker", "action"]:
        store.create(title=kind, content="", note_type=kind)
    summary = store.summary(recent=2)
    assert summary.total == 3
    assert summary.by_type == {"blocker": 2, "action": 1}
    assert len(summary.recent) == 2
    assert summary.recent[0].updated_at >= summary.recent[1].updated_at


# -- search -------------------------------------------------------------------------------


def test_search_ranks_by_relevance(store):
    store.create(title="Lunch", content="We ate noodles.")
    weak = store.create(title="Deploy notes", content="The database migration ran.")
    strong = store.create(
        title="Database migration plan",
        content="Migration of the database schema; database locks during migration.",
        tags=["database"],
    )
    hits = store.search("database migration")
    assert [h.note.id for h in hits] == [strong.id, weak.id]
    assert hits[0].score > hits[1].score > 0
    assert hits[0].note.content.startswith("Migration")


def test_search_handles_chinese(store):
    target = store.create(
        title="依赖冲突问题",
        content="发现某些第三方库版本不兼容,需要解决。影响范围:业务逻辑层的3个模块。",
        note_type="blocker",
    )
    store.create(title="重构项目 - 第一阶段", content="已完成数据模型层的重构,测试覆盖率达到85%。")
    assert store.search("版本冲突怎么解决")[0].note.id == target.id
    assert [h.note.title for h in store.search("数据模型")] == ["重构项目 - 第一阶段"]
    assert store.search("完全无关的东西") == []


def test_search_stems_and_ignores_query_syntax(store):
    note = store.create(title="Lock files", content="We lock the index while writing.")
    for query in ["locks", 'lock" OR', "title:lock", "lock*", "NOT lock", "(lock"]:
        assert [h.note.id for h in store.search(query)] == [note.id], query


def test_search_filters_by_type_and_tags(store):
    blocker = store.create(title="cache bug", content="cache", note_type="blocker", tags=["b"])
    store.create(title="cache idea", content="cache", note_type="action", tags=["a"])
    assert [h.note.id for h in store.search("cache", note_type="blocker")] == [blocker.id]
    assert [h.note.id for h in store.search("cache", tags=["b", "zzz"])] == [blocker.id]
    assert len(store.search("cache", limit=1)) == 1


def test_search_breaks_ties_by_recency(store):
    old = store.create(title="same", content="identical words here")
    new = store.create(title="same", content="identical words here")
    assert [h.note.id for h in store.search("identical")] == [new.id, old.id]
    store.update(old.id, tags=[])  # touching it makes it the newer one
    assert [h.note.id for h in store.search("identical")] == [old.id, new.id]


def test_search_without_words_lists_recent(store):
    first = store.create(title="one", content="x", note_type="blocker")
    second = store.create(title="two", content="y", note_type="blocker")
    store.create(title="three", content="z")
    hits = store.search("  ?! ", note_type="blocker")
    assert [h.note.id for h in hits] == [second.id, first.id]
    assert {h.score for h in hits} == {0.0}


def test_search_index_follows_every_change(store):
    note = store.create(title="alpha", content="first words")
    assert [h.note.id for h in store.search("alpha")] == [note.id]
    store.update(note.id, title="beta")
    assert store.search("alpha") == []
    assert [h.note.title for h in store.search("beta")] == ["beta"]
    store.delete(note.id)
    assert store.search("beta") == []


# -- two instances on one backing (two processes, two machines) ---------------------------


def test_a_second_instance_sees_every_change(open_store):
    writer, reader = open_store(), open_store()
    assert reader.search("shared") == []  # warm the reader's index while empty
    note = writer.create(title="shared note", content="visible to all")
    assert [h.note.id for h in reader.search("shared")] == [note.id]
    assert reader.get(note.id) == note
    writer.update(note.id, content="changed elsewhere")
    assert reader.get(note.id).content == "changed elsewhere"
    assert reader.search("changed")[0].note.content == "changed elsewhere"
    reader.delete(note.id)
    assert writer.list_notes() == []
    assert writer.search("shared") == []


# -- async twins --------------------------------------------------------------------------


async def test_async_twins(store):
    note = await store.acreate(title="async", content="body", note_type="action", tags=["t"])
    assert (await store.aget(note.id)) == note
    updated = await store.aupdate(note.id, content="new body")
    assert updated.content == "new body"
    assert [i.id for i in await store.alist_notes(tags=["t"])] == [note.id]
    assert [h.note.id for h in await store.asearch("body")] == [note.id]
    assert (await store.asummary()).total == 1
    assert (await store.adelete(note.id)).id == note.id
    with pytest.raises(NoteNotFoundError):
        await store.aget(note.id)


async def test_concurrent_async_creates(store):
    notes = await asyncio.gather(*(store.acreate(title=f"n{i}", content="x") for i in range(20)))
    assert len({n.id for n in notes}) == 20
    assert len(await store.alist_notes()) == 20


def test_timestamps_are_utc(store):
    note = store.create(title="t", content="c")
    assert isinstance(note.created_at, datetime)
    assert note.created_at.utcoffset() is not None
    assert not note.created_at.utcoffset()


# -- StoreNoteStore specifics ---------------------------------------------------------------


def test_store_note_store_validates_its_arguments():
    with pytest.raises(ConfigError):
        StoreNoteStore(object())  # type: ignore[arg-type]
    for namespace in [(), ("a.b",), ("",)]:
        with pytest.raises(ConfigError):
            StoreNoteStore(InMemoryStore(), namespace=namespace)


def test_store_note_store_ignores_foreign_items():
    backing = InMemoryStore()
    store = StoreNoteStore(backing)
    note = store.create(title="real", content="x")
    backing.put(("notes",), "note_broken_1", {"title": 3})
    backing.put(("notes",), "not-a-note", {"anything": True})
    backing.put(("notes", "sub"), "note_sub_1", note.to_dict())
    backing.put(("notes",), "__generation__", {"token": "changed"})  # forces a reload
    assert [i.id for i in store.list_notes()] == [note.id]
    with pytest.raises(NoteNotFoundError):
        store.get("note_broken_1")
