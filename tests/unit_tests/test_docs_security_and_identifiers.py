"""Issue 15: links out of the docs folder, FIFOs named ``*.md``, identifiers in BM25.

Every test here failed before the fix: a symlink out of the folder put the file it points
to into the prompt, a FIFO hung `load_folder` (and `contextkit build`) for ever, and the
section headed ``KestrelConsumerLag`` lost to an intro that used its words in passing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from langgraph.store.memory import InMemoryStore

from langchain_contextkit import FileNoteStore, StoreNoteStore
from langchain_contextkit.cli import main
from langchain_contextkit.notes._fts import index_text, query_terms
from langchain_contextkit.retrieval.sources import folder as docs_module
from langchain_contextkit.retrieval.sources.docs import DocsSource
from langchain_contextkit.retrieval.sources.folder import LoadedFolder, load_folder

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_contextkit import NoteStore

OUTSIDE_TEXT = "root:x:0:0:zanzibar-secret-marker:/root:/bin/bash"
LEAVES = "symlink leaves the folder"
NEEDS_FIFO = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
# A regression must fail, not hang CI: every load that could block runs in a thread.
HANG_SECONDS = 10


def _symlink_or_skip(link: Path, target: Path) -> None:
    try:
        link.symlink_to(target, target_is_directory=target.is_dir())
    except (OSError, NotImplementedError) as exc:  # Windows without the privilege
        pytest.skip(f"cannot create symbolic links here: {exc}")


def _in_thread(call: Callable[[], object], *, release: Path | None = None) -> object:
    """Run `call` in a daemon thread; fail (never hang) if it does not return in time.

    A reader stuck opening the FIFO `release` is set free (a writer opens and closes it),
    so a regression leaves no thread blocked behind.
    """
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread below
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=HANG_SECONDS)
    if thread.is_alive():
        if release is not None:
            with contextlib.suppress(OSError):
                os.close(os.open(release, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still running after {HANG_SECONDS} s: it blocked on a non-regular file")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome.get("value")


def _build(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["build", *argv, "--window", "4000"])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# -- 1. symbolic links out of the folder --------------------------------------------------


@pytest.fixture
def linked_docs(tmp_path: Path) -> Path:
    """A docs folder with a file link and a folder link leaving it, and links inside it."""
    outside = tmp_path / "outside"
    (outside / "private").mkdir(parents=True)
    (outside / "passwd").write_text(OUTSIDE_TEXT + "\n", encoding="utf-8")
    (outside / "private" / "keys.md").write_text(f"# Keys\n\n{OUTSIDE_TEXT}\n", encoding="utf-8")
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / ".git").mkdir()
    (docs / ".git" / "config").write_text(f"url = https://{OUTSIDE_TEXT}@example.com\n", "utf-8")
    (docs / "guide" / "meals.md").write_text("# Meals\n\nMeals are capped at 80.\n", "utf-8")
    _symlink_or_skip(docs / "leak.md", outside / "passwd")
    _symlink_or_skip(docs / "linked", outside / "private")
    _symlink_or_skip(docs / "relative-leak.md", Path("..") / "outside" / "passwd")
    _symlink_or_skip(docs / "alias.md", Path("guide") / "meals.md")  # stays inside
    _symlink_or_skip(docs / "git.md", Path(".git") / "config")  # inside, but hidden
    _symlink_or_skip(docs / "guide-again", docs / "guide")  # a folder link inside
    return docs


def _text(loaded: LoadedFolder) -> str:
    return "\n".join(chunk.text for chunk in loaded.chunks)


def test_links_out_of_the_folder_are_skipped_with_the_reason(linked_docs: Path) -> None:
    loaded = load_folder(linked_docs)
    assert OUTSIDE_TEXT not in _text(loaded)
    assert "zanzibar" not in _text(loaded)
    assert loaded.files == ("alias.md", "guide/meals.md")  # a link inside is read
    assert {(s.path, s.reason) for s in loaded.skipped} == {
        ("leak.md", LEAVES),
        ("relative-leak.md", LEAVES),
        ("linked", LEAVES),  # the folder link is not entered, and said so
        ("git.md", "symlink points into a hidden file or folder"),
    }


def test_a_folder_given_through_a_link_is_still_read(linked_docs: Path, tmp_path: Path) -> None:
    # The root is resolved once: a link to the docs folder is not itself "leaving" it.
    root_link = tmp_path / "docs-link"
    _symlink_or_skip(root_link, linked_docs)
    loaded = load_folder(root_link)
    assert loaded.files == ("alias.md", "guide/meals.md")
    assert OUTSIDE_TEXT not in _text(loaded)


def test_docs_source_from_folder_is_confined(linked_docs: Path) -> None:
    source = DocsSource.from_folder(linked_docs)
    assert all(OUTSIDE_TEXT not in chunk.text for chunk in source.index.chunks)
    assert source.fetch("zanzibar secret root") == []


def test_contextkit_build_keeps_the_link_out_and_says_why(
    linked_docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _build(
        capsys, "root zanzibar secret marker meals", "--docs", str(linked_docs)
    )
    assert status == 0, err
    assert OUTSIDE_TEXT not in out
    assert "/bin/bash" not in out
    assert "Meals are capped at 80." in out
    assert f"contextkit: skipped leak.md: {LEAVES}" in err
    assert f"contextkit: skipped linked: {LEAVES}" in err
    assert "contextkit: skipped git.md: symlink points into a hidden file or folder" in err


def test_following_links_is_an_explicit_choice(linked_docs: Path) -> None:
    loaded = load_folder(linked_docs, follow_symlinks=True)
    # Links lead anywhere now; the folder linked twice is entered once, by its first name.
    assert loaded.files == (
        "alias.md",
        "git.md",
        "leak.md",
        "relative-leak.md",
        "guide/meals.md",
        "linked/keys.md",
    )
    assert OUTSIDE_TEXT in _text(loaded)
    assert loaded.skipped == ()
    source = DocsSource.from_folder(linked_docs, follow_symlinks=True)
    assert source.fetch("keys")[0].metadata["path"] == "linked/keys.md"


def test_following_links_cannot_loop(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "doc.md").write_text("# Doc\n\nbody\n", encoding="utf-8")
    _symlink_or_skip(tmp_path / "a" / "up", tmp_path)  # a link to an ancestor
    loaded = _in_thread(lambda: load_folder(tmp_path, follow_symlinks=True))
    assert isinstance(loaded, LoadedFolder)
    assert loaded.files == ("a/doc.md",)


# -- 2. FIFOs, sockets and slow reads -----------------------------------------------------


@NEEDS_FIFO
def test_a_fifo_named_md_is_skipped_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("# Real\n\nreal text\n", encoding="utf-8")
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    loaded = _in_thread(lambda: load_folder(tmp_path), release=fifo)
    assert isinstance(loaded, LoadedFolder)
    assert loaded.files == ("real.md",)
    assert [(s.path, s.reason) for s in loaded.skipped] == [
        ("pipe.md", "not a regular file (a FIFO)")
    ]


@NEEDS_FIFO
@pytest.mark.parametrize("follow", [False, True])
def test_a_link_to_a_fifo_is_skipped_too(tmp_path: Path, follow: bool) -> None:
    fifo = tmp_path / "pipe.fifo"  # not a document ending: reached only through the links
    os.mkfifo(fifo)
    (tmp_path / "real.md").write_text("real text\n", encoding="utf-8")
    _symlink_or_skip(tmp_path / "relative.md", Path("pipe.fifo"))
    _symlink_or_skip(tmp_path / "absolute.md", fifo)
    options = {"follow_symlinks": True} if follow else {}  # the default, as callers use it
    loaded = _in_thread(lambda: load_folder(tmp_path, **options), release=fifo)
    assert isinstance(loaded, LoadedFolder)
    assert loaded.files == ("real.md",)
    assert [(s.path, s.reason) for s in loaded.skipped] == [
        ("absolute.md", "not a regular file (a FIFO)"),
        ("relative.md", "not a regular file (a FIFO)"),
    ]


@NEEDS_FIFO
def test_contextkit_build_with_a_fifo_finishes_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "meals.md").write_text("# Meals\n\nMeals are capped at 80.\n", encoding="utf-8")
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    status = _in_thread(
        lambda: main(["build", "meals", "--docs", str(tmp_path), "--window", "4000"]), release=fifo
    )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "Meals are capped at 80." in captured.out
    assert "contextkit: skipped pipe.md: not a regular file (a FIFO)" in captured.err


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets here")
def test_a_socket_named_md_is_skipped() -> None:
    # A short folder: a socket's path must fit in about 100 bytes.
    with tempfile.TemporaryDirectory(prefix="ck") as folder:
        root = Path(folder)
        (root / "real.md").write_text("real text\n", encoding="utf-8")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(str(root / "sock.md"))
            loaded = _in_thread(lambda: load_folder(root))
        assert isinstance(loaded, LoadedFolder)
        assert loaded.files == ("real.md",)
        assert [(s.path, s.reason) for s in loaded.skipped] == [
            ("sock.md", "not a regular file (a socket)")
        ]


def test_a_read_that_does_not_finish_in_time_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slow.md").write_text("x" * 200_000, encoding="utf-8")  # several blocks
    ticks = iter(range(0, 10**6, 7))  # every look at the clock: 7 more seconds gone
    monkeypatch.setattr(docs_module, "_clock", lambda: float(next(ticks)))
    loaded = load_folder(tmp_path)
    assert loaded.files == ()
    assert [(s.path, s.reason) for s in loaded.skipped] == [
        ("slow.md", "read did not finish within 10 s")
    ]


def test_unreadable_files_still_say_why(tmp_path: Path) -> None:
    (tmp_path / "bin.md").write_bytes(b"abc\x00def")
    (tmp_path / "gbk.txt").write_bytes("中文".encode("gbk"))
    _symlink_or_skip(tmp_path / "gone.md", tmp_path / "missing.md")  # a dangling link inside
    reasons = {s.path: s.reason for s in load_folder(tmp_path).skipped}
    assert reasons["bin.md"] == "binary file"
    assert reasons["gbk.txt"].startswith("not UTF-8 text")
    assert reasons["gone.md"].startswith("cannot read: ")


# -- 3. identifiers in the BM25 index -------------------------------------------------------

INTRO = """\
# Kestrel

Kestrel is the event bus every service publishes to. Each consumer reads its topics at its
own pace, and a consumer that falls behind shows lag. This guide explains how Kestrel is
run, how a consumer is deployed, and which alerts watch lag, throughput and disk space.
"""

RUNBOOK = """\
# Alert runbook

## DiskAlmostFull

A broker's data disk is above 90 percent. Extend the volume or shorten the retention.

## KestrelConsumerLag

Fires when a group is more than 10,000 messages behind for ten minutes. Check the group's
dashboard, then restart the stuck pods; scale out if the backlog keeps growing.

## BrokerDown

A broker stopped answering health checks. Page the on-call engineer.
"""


@pytest.fixture
def alert_docs(tmp_path: Path) -> Path:
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "overview.md").write_text(INTRO, encoding="utf-8")
    (tmp_path / "runbooks" / "alerts.md").write_text(RUNBOOK, encoding="utf-8")
    (tmp_path / "onboarding.md").write_text(
        "# Onboarding\n\nCollect your badge, then meet your buddy.\n", encoding="utf-8"
    )
    return tmp_path


QUERIES = [
    "KestrelConsumerLag",
    "kestrel consumer lag",
    "kestrel_consumer_lag",
    "kestrel-consumer-lag",
    "why is kestrel consumer lag firing?",
]


@pytest.mark.parametrize("query", QUERIES)
def test_the_section_headed_by_the_identifier_ranks_first(alert_docs: Path, query: str) -> None:
    hits = DocsSource.from_folder(alert_docs).fetch(query)
    assert hits[0].metadata == {
        "path": "runbooks/alerts.md",
        "headings": ["Alert runbook", "KestrelConsumerLag"],
    }


def test_contextkit_build_puts_the_matching_section_first(
    alert_docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _build(
        capsys, "kestrel consumer lag", "--docs", str(alert_docs), "--top", "1"
    )
    assert status == 0, err
    assert "[runbooks/alerts.md › Alert runbook › KestrelConsumerLag]" in out
    assert "event bus" not in out


def test_identifiers_are_indexed_and_queried_whole_and_in_parts() -> None:
    assert query_terms("KestrelConsumerLag") == ["KestrelConsumerLag", "Kestrel", "Consumer", "Lag"]
    assert query_terms("max_retry_count") == ["maxretrycount", "max", "retry", "count"]
    # Each term once, whatever its case: HTTPServer's parts are already there.
    assert query_terms("http2Server HTTPServer") == [
        "http2Server",
        "http",
        "2",
        "Server",
        "HTTPServer",
        "http2ServerHTTPServer",
    ]
    assert "kestrelconsumerlag" in query_terms("kestrel consumer lag")
    assert "lagkestrel" not in query_terms("lag, kestrel")  # punctuation ends a run
    assert index_text("KestrelConsumerLag.").split() == [
        "KestrelConsumerLag",
        "Kestrel",
        "Consumer",
        "Lag",
        ".",
    ]
    assert index_text("see kestrel-consumer-lag").split() == [
        "see",
        "kestrel-consumer-lag",
        "kestrelconsumerlag",
    ]
    assert index_text("plain words stay as they are") == "plain words stay as they are"


def test_chinese_bigrams_are_unchanged_next_to_identifiers() -> None:
    assert query_terms("依赖冲突 locks") == ["依赖", "赖冲", "冲突", "locks"]
    assert query_terms("KafkaConsumer消费延迟") == [
        "KafkaConsumer",
        "Kafka",
        "Consumer",
        "消费",
        "费延",
        "延迟",
    ]
    assert index_text("依赖冲突").split() == ["依", "赖", "冲", "突", "依赖", "赖冲", "冲突"]


# -- 3b. identifiers in the note search -----------------------------------------------------


@pytest.fixture(params=["file", "memory"])
def note_store(request: pytest.FixtureRequest, tmp_path: Path) -> NoteStore:
    if request.param == "file":
        return FileNoteStore(tmp_path / "notes")
    return StoreNoteStore(InMemoryStore(), namespace=("notes", "issue-15"))


@pytest.mark.parametrize(
    "query", ["retry_backoff_ms", "retryBackoffMs", "RetryBackoffMs", "retry backoff ms"]
)
def test_note_search_finds_a_snake_case_identifier_in_any_spelling(
    note_store: NoteStore, query: str
) -> None:
    target = note_store.create(
        title="Client settings", content="Set retry_backoff_ms to 500 on the payment client."
    )
    note_store.create(
        title="Retries",
        content="Every retry waits: retry with backoff, retry again, and back off before "
        "each retry. The backoff doubles on each retry.",
    )
    hits = note_store.search(query)
    assert hits, query
    assert hits[0].note.id == target.id, query


def test_note_search_finds_a_camel_case_title_by_its_words(note_store: NoteStore) -> None:
    target = note_store.create(title="KestrelConsumerLag", content="Restart the stuck pods.")
    note_store.create(title="Kestrel", content="The consumer reads; lag is watched.")
    assert note_store.search("kestrel consumer lag")[0].note.id == target.id
    assert note_store.search("kestrel_consumer_lag")[0].note.id == target.id
