"""FileNoteStore: the file format, and reliability across processes, crashes and hand edits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from langchain_contextkit import FileNoteStore, InvalidNoteError, NoteNotFoundError
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.notes import _folder_index
from langchain_contextkit.notes._markdown import parse_note, render_note, split_front_matter
from langchain_contextkit.notes.model import MAX_TAG_CHARS, MAX_TITLE_CHARS, Note, utc_now

ROOT = Path(__file__).resolve().parents[2]


def _files(workspace: Path) -> set[str]:
    return {p.name for p in workspace.iterdir() if p.name.endswith(".md")}


def _index_ids(workspace: Path) -> set[str]:
    """The note ids the index plus journal on disk hold (what a fresh process would read)."""
    return {info.id for info in FileNoteStore(workspace, max_notes=None).list_notes()}


# -- the format -------------------------------------------------------------------------


def test_file_layout_matches_the_seed(tmp_path):
    store = FileNoteStore(tmp_path)
    note = store.create(
        title="项目进展 - 第一阶段",
        content="# 项目进展 - 第一阶段\n\n## 完成情况\n",
        note_type="task_state",
        tags=["refactoring", "phase1", "backend"],
    )
    text = (tmp_path / f"{note.id}.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[:5] == [
        "---",
        f"id: {note.id}",
        "title: 项目进展 - 第一阶段",
        "type: task_state",
        "tags: [refactoring, phase1, backend]",
    ]
    assert lines[5].startswith("created_at: 20")
    assert "T" in lines[5]
    assert lines[6].startswith("updated_at: ")
    assert lines[7:9] == ["---", ""]
    assert text.endswith("\n\n## 完成情况\n")
    index = json.loads((tmp_path / "notes_index.json").read_text(encoding="utf-8"))
    assert index["format"] == 1
    journal = (tmp_path / "notes_journal.jsonl").read_text(encoding="utf-8")
    assert note.id in journal


def test_a_hand_written_seed_note_is_read(tmp_path):
    FileNoteStore(tmp_path)
    (tmp_path / "note_20250119_153000_0.md").write_text(
        "---\nid: note_20250119_153000_0\ntitle: 项目进展 - 第一阶段\ntype: task_state\n"
        "tags: [refactoring, phase1, backend]\ncreated_at: 2025-01-19T15:30:00\n"
        "updated_at: 2025-01-19T15:30:00\n---\n\n# 项目进展\n\n已完成数据模型层的重构\n",
        encoding="utf-8",
    )
    store = FileNoteStore(tmp_path)
    note = store.get("note_20250119_153000_0")
    assert note.title == "项目进展 - 第一阶段"
    assert note.tags == ("refactoring", "phase1", "backend")
    assert note.created_at.isoformat() == "2025-01-19T15:30:00+00:00"
    assert note.content == "# 项目进展\n\n已完成数据模型层的重构\n"
    assert [h.note.id for h in store.search("数据模型")] == [note.id]


@pytest.mark.parametrize(
    "text",
    [
        "no front matter at all",
        "---\nnot: [closed\n---\nbody",
        "---\n- a list\n---\nbody",
        "---\ntitle: ok\ntype: weird\ntags: 5\ncreated_at: soon\n---\nbody",
        "---\nunterminated front matter",
        "---\n!!python/object/apply:os.system ['echo hacked']\n---\nbody",
    ],
)
def test_malformed_hand_written_files_still_load(text, caplog):
    note = parse_note(text, note_id="note_x_1", modified=utc_now())
    assert note.id == "note_x_1"
    assert note.type in {"general", "task_state"}
    assert note.content.endswith(("body", "at all", "front matter"))


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
_line = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=40
).filter(str.strip)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(title=_line, tags=st.lists(_line, max_size=5, unique=True), content=_text)
def test_markdown_round_trips_anything(title, tags, content):
    now = utc_now()
    note = Note(
        id="note_20250101_000000_abc",
        title=title[:MAX_TITLE_CHARS],
        type="general",
        tags=tuple(tag[:MAX_TAG_CHARS] for tag in tags),
        created_at=now,
        updated_at=now,
        content=content,
    )
    text = render_note(note)
    front, _ = split_front_matter(text)
    assert front is not None
    assert yaml.safe_load(front)["title"] == note.title
    assert parse_note(text, note_id=note.id, modified=now) == note


# -- crash safety and hand edits ----------------------------------------------------------


def test_corrupt_index_is_rebuilt(tmp_path, caplog):
    store = FileNoteStore(tmp_path)
    notes = [store.create(title=f"n{i}", content=f"body {i}") for i in range(5)]
    (tmp_path / "notes_index.json").write_text("{ this is not json", encoding="utf-8")
    # Both a fresh process and the one already running recover.
    assert {i.id for i in FileNoteStore(tmp_path).list_notes()} == {n.id for n in notes}
    (tmp_path / "notes_index.json").write_bytes(b"\x00\xff garbage")
    assert {i.id for i in store.list_notes()} == {n.id for n in notes}
    assert "corrupt" in caplog.text
    assert json.loads((tmp_path / "notes_index.json").read_text(encoding="utf-8"))["notes"]


def test_missing_index_and_journal_are_rebuilt(tmp_path):
    store = FileNoteStore(tmp_path)
    note = store.create(title="kept", content="x")
    (tmp_path / "notes_index.json").unlink()
    (tmp_path / "notes_journal.jsonl").unlink()
    assert [i.id for i in FileNoteStore(tmp_path).list_notes()] == [note.id]
    assert [i.id for i in store.list_notes()] == [note.id]


def test_corrupt_journal_line_triggers_a_rebuild(tmp_path):
    store = FileNoteStore(tmp_path)
    note = store.create(title="kept", content="x")
    with (tmp_path / "notes_journal.jsonl").open("a", encoding="utf-8") as journal:
        journal.write("not json\n")
    assert [i.id for i in FileNoteStore(tmp_path).list_notes()] == [note.id]


def test_a_torn_journal_line_is_ignored_then_dropped(tmp_path):
    store = FileNoteStore(tmp_path)
    first = store.create(title="first", content="x")
    with (tmp_path / "notes_journal.jsonl").open("a", encoding="utf-8") as journal:
        journal.write('{"op": "put", "note": {"id": "note_half')  # killed mid-write
    other = FileNoteStore(tmp_path)
    assert [i.id for i in other.list_notes()] == [first.id]
    second = other.create(title="second", content="y")
    lines = (tmp_path / "notes_journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert all(json.loads(line) for line in lines)
    assert {i.id for i in store.list_notes()} == {first.id, second.id}


def test_files_added_deleted_or_replaced_by_hand_are_noticed(tmp_path):
    store = FileNoteStore(tmp_path)
    kept = store.create(title="kept", content="x")
    gone = store.create(title="gone", content="x")
    (tmp_path / f"{gone.id}.md").unlink()
    text = render_note(
        Note(
            id="note_hand_1",
            title="added by hand",
            type="reference",
            created_at=utc_now(),
            updated_at=utc_now(),
            content="written in an editor",
        )
    )
    (tmp_path / "note_hand_1.md").write_text(text, encoding="utf-8")
    (tmp_path / "README.md").write_text("not a note", encoding="utf-8")
    assert {i.id for i in store.list_notes()} == {kept.id, "note_hand_1"}
    assert [h.note.id for h in store.search("editor")] == ["note_hand_1"]
    # An editor saving through a temporary file and a rename.
    edited = (tmp_path / f"{kept.id}.md").read_text(encoding="utf-8").replace("kept", "edited")
    (tmp_path / "tmp-edit").write_text(edited, encoding="utf-8")
    (tmp_path / "tmp-edit").replace(tmp_path / f"{kept.id}.md")
    assert store.get(kept.id).title == "edited"
    assert [h.note.id for h in store.search("edited")] == [kept.id]
    assert _index_ids(tmp_path) == {kept.id, "note_hand_1"}


def test_rebuild_index_on_request(tmp_path):
    store = FileNoteStore(tmp_path)
    store.create(title="a", content="x")
    assert store.rebuild_index() == 1


def test_journal_is_folded_into_the_index(tmp_path, monkeypatch):
    monkeypatch.setattr(_folder_index, "_COMPACT_MIN", 4)
    store = FileNoteStore(tmp_path, max_notes=None)
    reader = FileNoteStore(tmp_path, max_notes=None)
    notes = [store.create(title=f"n{i}", content="x") for i in range(12)]
    journal = (tmp_path / "notes_journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(journal) < 12
    index = json.loads((tmp_path / "notes_index.json").read_text(encoding="utf-8"))
    assert len(index["notes"]) >= 12 - len(journal)
    assert {i.id for i in reader.list_notes()} == {n.id for n in notes}
    assert _index_ids(tmp_path) == {n.id for n in notes}


def test_stale_temporary_files_are_swept(tmp_path):
    FileNoteStore(tmp_path)
    (tmp_path / ".tmp-deadbeef").write_text("left by a crash", encoding="utf-8")
    store = FileNoteStore(tmp_path)
    store.create(title="t", content="x")
    assert not list(tmp_path.glob(".tmp-*"))


# -- confinement ----------------------------------------------------------------------------


def test_nothing_is_written_outside_the_workspace(tmp_path):
    workspace = tmp_path / "notes"
    outside = tmp_path / "outside.md"
    outside.write_text("secret", encoding="utf-8")
    store = FileNoteStore(workspace)
    before = sorted(p.name for p in tmp_path.iterdir())
    attempts = ["../outside", "..", "/etc/passwd", str(outside), "note_../../outside", "note_a/b"]
    for bad in attempts:
        for call in (store.get, store.delete, lambda i: store.update(i, content="pwned")):
            with pytest.raises(InvalidNoteError):
                call(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert outside.read_text(encoding="utf-8") == "secret"


def test_symbolic_links_are_never_followed(tmp_path):
    workspace = tmp_path / "notes"
    store = FileNoteStore(workspace)
    outside = tmp_path / "outside.md"
    outside.write_text(
        "---\nid: note_evil_1\ntitle: secret\ntype: general\n---\n\nsecret", encoding="utf-8"
    )
    (workspace / "note_evil_1.md").symlink_to(outside)
    assert store.list_notes() == []
    with pytest.raises(NoteNotFoundError):
        store.get("note_evil_1")
    with pytest.raises(NoteNotFoundError):
        store.update("note_evil_1", content="pwned")
    # An index that is a link to a file elsewhere is not read, and is replaced, not written
    # through.
    index_target = tmp_path / "elsewhere.json"
    index_target.write_text("{}", encoding="utf-8")
    (workspace / "notes_index.json").unlink()
    (workspace / "notes_index.json").symlink_to(index_target)
    note = FileNoteStore(workspace).create(title="real", content="x")
    assert not (workspace / "notes_index.json").is_symlink()
    assert index_target.read_text(encoding="utf-8") == "{}"
    assert outside.read_text(encoding="utf-8").endswith("secret")
    assert [i.id for i in store.list_notes()] == [note.id]


def test_workspace_must_be_a_folder(tmp_path):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError):
        FileNoteStore(tmp_path / "file")


def test_two_instances_in_one_process_share_the_lock(tmp_path):
    a, b = FileNoteStore(tmp_path, max_notes=None), FileNoteStore(tmp_path, max_notes=None)
    notes = [(a if i % 2 else b).create(title=f"n{i}", content="x") for i in range(20)]
    assert {i.id for i in a.list_notes()} == {n.id for n in notes}


# -- several processes ----------------------------------------------------------------------

_CREATOR = textwrap.dedent(
    """
    import sys
    from langchain_contextkit import FileNoteStore

    store = FileNoteStore(sys.argv[1], max_notes=None)
    sys.stdin.readline()  # start together
    for i in range(int(sys.argv[2])):
        note = store.create(title=f"{sys.argv[3]} {i}", content=f"from {sys.argv[3]} #{i}")
        print(note.id, flush=True)
    """
)


def _python(*args: str, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # This interpreter running our own scripts.
    command = [sys.executable, "-c", *args]
    return subprocess.Popen(command, env=env, text=True, cwd=ROOT, **kwargs)  # noqa: S603


def test_two_processes_creating_200_notes_each_lose_none(tmp_path):
    FileNoteStore(tmp_path)
    workers = [
        _python(_CREATOR, str(tmp_path), "200", name, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for name in ("alpha", "beta")
    ]
    for worker in workers:
        worker.stdin.write("go\n")
        worker.stdin.flush()
    ids = []
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        ids.extend(out.split())
    assert len(ids) == 400
    assert len(set(ids)) == 400
    assert _files(tmp_path) == {f"{i}.md" for i in ids}
    assert _index_ids(tmp_path) == set(ids)
    store = FileNoteStore(tmp_path, max_notes=None)
    assert len(store.search("alpha", limit=100)) == 100
    assert store.get(ids[0]).content.startswith("from ")


_WRITER = textwrap.dedent(
    """
    import sys
    from langchain_contextkit import FileNoteStore

    store = FileNoteStore(sys.argv[1], max_notes=None)
    ids = []
    i = 0
    while True:
        note = store.create(title=f"note {i}", content=f"content {i} " * 50)
        print("create", note.id, i, flush=True)
        ids.append(note.id)
        if i % 3 == 0:
            store.update(ids[i // 2], content=f"updated {i}")
            print("update", ids[i // 2], i, flush=True)
        i += 1
    """
)


def test_sigkill_in_the_middle_of_writes_leaves_a_consistent_store(tmp_path):
    FileNoteStore(tmp_path)
    expected: dict[str, str] = {}
    for round_ in range(3):
        writer = _python(_WRITER, str(tmp_path), stdout=subprocess.PIPE)
        deadline = time.monotonic() + 30
        lines = 0
        assert writer.stdout is not None
        # Kill at a different point each round, while it is busy writing.
        while lines < 40 + 37 * round_ and time.monotonic() < deadline:
            line = writer.stdout.readline()
            if not line:
                break
            action, note_id, i = line.split()
            if action == "create":
                expected[note_id] = f"content {i} " * 50
            else:
                expected[note_id] = f"updated {i}"
            lines += 1
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        writer.stdout.close()
        store = FileNoteStore(tmp_path, max_notes=None)
        for note_id, content in expected.items():
            # Its last acknowledged write, or a later one the killed process had begun.
            assert store.get(note_id).content in {content, *(f"updated {j}" for j in range(500))}
        on_disk = {name.removesuffix(".md") for name in _files(tmp_path)}
        assert {i.id for i in store.list_notes()} == on_disk
        assert _index_ids(tmp_path) == on_disk
        assert not list(tmp_path.glob(".tmp-*"))
        for note_id in on_disk:
            store.get(note_id)  # every file parses
