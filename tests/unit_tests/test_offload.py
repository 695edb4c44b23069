"""Issue 19, item 5: large tool results offloaded, shown as head + tail + a pointer.

The text is real and noisy, read from the machine at test time (a gzip'd man page, else a
standard-library module), never copied into the repository.
"""

from __future__ import annotations

import gzip
import itertools
import os
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _offload_pointer import POINTER, pointer_call
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langchain_contextkit import (
    ConfigError,
    ContextKitMiddleware,
    NoteOffloadStore,
    NoteTool,
    OffloadConfig,
    StoreNoteStore,
    TerminalTool,
    ToolResultOffloader,
    WindowAssembler,
    WorkspaceOffloadStore,
    context_node,
    find_message_problems,
)
from langchain_contextkit.agent.middleware import LEDGER_KEY
from langchain_contextkit.agent.offload_stores import offload_key
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from collections.abc import Callable

SIZE = 60_000
WINDOW = 8_000
MAX_OUTPUT = 500


def _noisy_text() -> str:
    """60,000 characters of real text from this machine: a man page's roff, else Python."""
    pages = sorted(Path("/usr/share/man").glob("man*/*.gz"), key=lambda p: -p.stat().st_size)
    for page in pages[:20]:
        try:
            text = gzip.decompress(page.read_bytes()).decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError):
            continue
        if len(text) >= SIZE and "\0" not in text:
            return text[:SIZE]
    text = Path(typing.__file__).read_text(encoding="utf-8")
    while len(text) < SIZE:
        text += text
    return text[:SIZE]


BIG = _noisy_text()
SMALL = "status: ok\n"


@tool
def fetch(page: str) -> str:
    """Fetch a page of documentation by name ("big" or "small")."""
    return BIG if page == "big" else SMALL


def _script(*, parallel: bool = False, turns: int = 1) -> Callable[[list[BaseMessage]], AIMessage]:
    """Turn n: fetch the big page (and, in parallel, the small one), then follow the pointer."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        humans = sum(isinstance(m, HumanMessage) for m in messages)
        if isinstance(last, HumanMessage):
            if humans >= 2 and turns >= 2:
                preview = next(
                    m.text for m in messages if isinstance(m, ToolMessage) and POINTER in m.text
                )
                name, args = pointer_call(preview)
                return AIMessage("", tool_calls=[{"name": name, "args": args, "id": "read-2"}])
            calls = [{"name": "fetch", "args": {"page": "big"}, "id": "fetch-1"}]
            if parallel:
                calls.append({"name": "fetch", "args": {"page": "small"}, "id": "fetch-2"})
            return AIMessage("", tool_calls=calls)
        if isinstance(last, ToolMessage) and last.name == "fetch" and turns == 1:
            preview = next(
                m.text for m in messages if isinstance(m, ToolMessage) and POINTER in m.text
            )
            name, args = pointer_call(preview)
            return AIMessage("", tool_calls=[{"name": name, "args": args, "id": "read-1"}])
        return AIMessage("Done.")

    return respond


def _model(
    respond: Callable[[list[BaseMessage]], AIMessage], window: int = WINDOW
) -> ScriptedChatModel:
    return ScriptedChatModel(respond=respond, context_window=window, max_output_tokens=MAX_OUTPUT)


def _terminal(root: Path) -> TerminalTool:
    return TerminalTool(root, sandbox="none")


def _tool_message(request: list[BaseMessage], call_id: str) -> ToolMessage:
    return next(m for m in request if isinstance(m, ToolMessage) and m.tool_call_id == call_id)


def _expected_page(args: dict[str, Any]) -> str:
    """What `tail -n +A file | head -n K` prints of BIG, as the terminal reports it."""
    words = args["command"].split()
    first, count = int(words[2].lstrip("+")), int(words[-1])
    lines = BIG.split("\n")
    return "\n".join(lines[first - 1 : first - 1 + count]).rstrip("\n")


# -- the agent path, workspace folder ----------------------------------------------------


def _workspace_agent(root: Path, respond: Callable[..., AIMessage], **agent: Any) -> Any:
    terminal = _terminal(root)
    model = _model(respond)
    middleware = ContextKitMiddleware.for_model(
        model, summaries="extractive", offload=WorkspaceOffloadStore.for_terminal(terminal)
    )
    return model, create_agent(model, [fetch, terminal], middleware=[middleware], **agent)


def _check_workspace_run(root: Path, model: ScriptedChatModel, state: dict[str, Any]) -> None:
    # The second request shows head + pointer + tail, not the whole.
    shown = _tool_message(model.requests[1], "fetch-1").text
    assert POINTER in shown
    assert len(shown) < SIZE // 10
    line = next(line for line in shown.split("\n") if POINTER in line)
    head, tail = shown.split("\n" + line + "\n")
    assert BIG.startswith(head)
    assert BIG.endswith(tail)
    # The stored copy is the original, byte for byte, inside the root.
    files = list((root / ".contextkit" / "tool_results").iterdir())
    assert len(files) == 1
    assert files[0].read_bytes() == BIG.encode("utf-8")
    # The state's history still holds the whole result.
    stored = _tool_message(state["messages"], "fetch-1")
    assert stored.content == BIG
    # The model followed the pointer with the real terminal and got the stored lines.
    name, args = pointer_call(shown)
    assert name == "terminal"
    read = _tool_message(model.requests[2], "read-1")
    assert read.text == _expected_page(args)
    assert read.text in BIG
    ledger = state[LEDGER_KEY][-1]
    assert ledger["offloaded"] == 1
    assert ledger["offloaded_tokens"] > 1_000
    assert ledger["offload_failed"] == 0
    # The read-back is the model's own request: shown as it came.
    assert POINTER not in read.text


def test_workspace_offload_agent(tmp_path: Path) -> None:
    model, agent = _workspace_agent(tmp_path, _script())
    state = agent.invoke({"messages": [HumanMessage("Fetch the big page and read on.")]})
    _check_workspace_run(tmp_path, model, state)


async def test_workspace_offload_agent_async(tmp_path: Path) -> None:
    model, agent = _workspace_agent(tmp_path, _script())
    state = await agent.ainvoke({"messages": [HumanMessage("Fetch the big page and read on.")]})
    _check_workspace_run(tmp_path, model, state)


# -- the agent path, note store ----------------------------------------------------------


def _note_agent(
    notes: StoreNoteStore,
    respond: Callable[..., AIMessage],
    *,
    window: int = WINDOW,
    page_chars: int = 8_000,
) -> Any:
    note_tool = NoteTool(store=notes)
    model = _model(respond, window)
    offload = NoteOffloadStore(notes, page_chars=page_chars)
    middleware = ContextKitMiddleware.for_model(model, summaries="extractive", offload=offload)
    return model, create_agent(model, [fetch, note_tool], middleware=[middleware])


def _check_note_run(
    notes: StoreNoteStore,
    model: ScriptedChatModel,
    state: dict[str, Any],
    page_chars: int = 8_000,
) -> None:
    shown = _tool_message(model.requests[1], "fetch-1").text
    assert POINTER in shown
    assert len(shown) < SIZE // 10
    name, args = pointer_call(shown)
    assert name == "note"
    assert args["action"] == "read"
    offload = NoteOffloadStore(notes, page_chars=page_chars)
    key = offload_key(_tool_message(state["messages"], "fetch-1"), BIG)
    parts = offload.note_ids(key, BIG)
    # The stored copy (one note, or its parts in order) is the original, byte for byte.
    assert "".join(notes.get(note_id).content for note_id, _ in parts) == BIG
    assert _tool_message(state["messages"], "fetch-1").content == BIG
    # The model read the note the pointer names with the real NoteTool.
    read = _tool_message(model.requests[2], "read-1")
    wanted = notes.get(args["note_id"]).content
    assert read.text.endswith("\n\n" + wanted)
    assert wanted in BIG
    assert state[LEDGER_KEY][-1]["offloaded"] == 1


def test_note_offload_agent_parts(tmp_path: Path) -> None:
    # Pages of 8,000 characters: the 60,000 are stored as 8 notes, read one at a time.
    notes = StoreNoteStore(InMemoryStore(), namespace=("offload",))
    model, agent = _note_agent(notes, _script())
    state = agent.invoke({"messages": [HumanMessage("Fetch the big page and read on.")]})
    _check_note_run(notes, model, state)
    assert len(notes.list_notes()) == 8
    _, args = pointer_call(_tool_message(model.requests[1], "fetch-1").text)
    assert args["note_id"].endswith("_8000c_p1")  # the part holding the first hidden line


def test_note_offload_agent_one_note_read_back_whole() -> None:
    # A large window (threshold 12,000 tokens) and pages as large as the result.
    notes = StoreNoteStore(InMemoryStore(), max_content_chars=100_000)
    model, agent = _note_agent(notes, _script(), window=128_000, page_chars=100_000)
    state = agent.invoke({"messages": [HumanMessage("Fetch the big page and read on.")]})
    _check_note_run(notes, model, state, page_chars=100_000)
    assert len(notes.list_notes()) == 1
    read = _tool_message(model.requests[2], "read-1")
    assert read.artifact["note"]["content"] == BIG  # the whole result, back through NoteTool


async def test_note_offload_agent_async() -> None:
    notes = StoreNoteStore(InMemoryStore(), namespace=("offload",))
    model, agent = _note_agent(notes, _script())
    state = await agent.ainvoke({"messages": [HumanMessage("Fetch the big page and read on.")]})
    _check_note_run(notes, model, state)


def test_note_offload_shared_store_other_process_reads_it() -> None:
    """Two stores over one BaseStore (two workers on one Postgres): the same note ids."""
    shared = InMemoryStore()
    writer, reader = StoreNoteStore(shared), StoreNoteStore(shared)
    message = ToolMessage(BIG, tool_call_id="call-9", name="fetch")
    key = offload_key(message, BIG)
    NoteOffloadStore(writer).save(key, BIG)
    ids = NoteOffloadStore(reader).note_ids(key, BIG)
    assert "".join(reader.get(note_id).content for note_id, _ in ids) == BIG


# -- stateless = checkpointed; the pointer is byte-stable ----------------------------------


def _normal(request: list[BaseMessage]) -> list[tuple[Any, ...]]:
    return [
        (
            m.type,
            m.content,
            getattr(m, "tool_call_id", None),
            [(c["name"], c["args"], c["id"]) for c in getattr(m, "tool_calls", [])],
        )
        for m in request
    ]


def test_stateless_caller_gets_the_checkpointed_request(tmp_path: Path) -> None:
    first, second = HumanMessage("Fetch the big page."), HumanMessage("Read on.")
    saved_root, stateless_root = tmp_path / "a", tmp_path / "b"
    saved_root.mkdir()
    stateless_root.mkdir()
    saved_model, saved = _workspace_agent(
        saved_root, _script(turns=2), checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    saved.invoke({"messages": [first]}, config)
    saved.invoke({"messages": [second]}, config)

    model, agent = _workspace_agent(stateless_root, _script(turns=2))
    state = agent.invoke({"messages": [first]})
    agent.invoke({"messages": [*state["messages"], second]})

    assert len(model.requests) == len(saved_model.requests) == 4
    for mine, theirs in zip(model.requests, saved_model.requests, strict=True):
        assert _normal(mine) == _normal(theirs)
    previews = [_tool_message(r, "fetch-1").text for r in model.requests[1:]]
    assert len(set(previews)) == 1  # byte-identical on every later call
    assert POINTER in previews[0]
    # The second turn followed the pointer and read the stored lines.
    _, args = pointer_call(previews[0])
    assert _tool_message(model.requests[3], "read-2").text == _expected_page(args)


# -- parallel calls ------------------------------------------------------------------------


def test_parallel_calls_one_huge(tmp_path: Path) -> None:
    model, agent = _workspace_agent(tmp_path, _script(parallel=True))
    state = agent.invoke({"messages": [HumanMessage("Fetch both pages.")]})
    request = model.requests[1]
    assert find_message_problems(request) == []
    assert POINTER in _tool_message(request, "fetch-1").text
    assert _tool_message(request, "fetch-2").text == SMALL
    assert [m.tool_call_id for m in request if isinstance(m, ToolMessage)] == [
        "fetch-1",
        "fetch-2",
    ]
    assert all(find_message_problems(r) == [] for r in model.requests)
    assert _tool_message(state["messages"], "fetch-1").content == BIG


# -- hostile names, failures ---------------------------------------------------------------


def _conversation(name: str, call_id: str, text: str = BIG) -> list[BaseMessage]:
    return [
        HumanMessage("go"),
        AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id}]),
        ToolMessage(text, tool_call_id=call_id, name=name),
    ]


@pytest.mark.parametrize(
    ("name", "call_id"),
    [
        ("../../../../etc/evil", "../../../tmp/x"),
        ("/abs/path", "..\\..\\win"),
        ("..", ".."),
        ("name\0with\nnul", "id/with/slashes/" + "x" * 300),
    ],
)
def test_hostile_names_stay_inside_the_root(tmp_path: Path, name: str, call_id: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    store = WorkspaceOffloadStore(root, reader=name)
    offloader = ToolResultOffloader(OffloadConfig(store=store), token_counter=len)
    outcome = offloader.offload(_conversation(name, call_id), room=WINDOW, tools=[name])
    assert outcome.count == 1
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) == 1
    folder = (root / ".contextkit" / "tool_results").resolve()
    assert written[0].resolve().parent == folder
    assert written[0].read_bytes() == BIG.encode()
    assert all(c.isalnum() or c in "_-." for c in written[0].name)


def test_folder_outside_the_root_is_refused(tmp_path: Path) -> None:
    for folder in ("../out", "/etc", ".", "a/../../b"):
        with pytest.raises(ConfigError):
            WorkspaceOffloadStore(tmp_path, folder=folder)


def test_symlinked_folder_is_not_written_through(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / ".contextkit").symlink_to(outside)
    store = WorkspaceOffloadStore(root)
    offloader = ToolResultOffloader(OffloadConfig(store=store), token_counter=len)
    messages = _conversation("fetch", "c1")
    outcome = offloader.offload(messages, room=WINDOW, tools=["terminal"])
    assert (outcome.count, outcome.failed) == (0, 1)
    assert outcome.messages[-1].content == BIG
    assert not any(p.is_file() for p in outside.rglob("*"))


def test_write_failure_keeps_the_result_whole_and_is_recorded(tmp_path: Path) -> None:
    # Runs as root too: a file where the folder should be, which no one can write into.
    (tmp_path / ".contextkit").write_text("in the way")
    terminal = _terminal(tmp_path)
    model = _model(_script())
    middleware = ContextKitMiddleware.for_model(
        model,
        summaries="extractive",
        offload=WorkspaceOffloadStore.for_terminal(terminal),
        reduce_trajectory=True,
    )
    messages = _conversation("fetch", "fetch-1", BIG[:12_000])
    assembly = middleware.assembler.assemble(
        messages, tools=[fetch, terminal], model=model, budget=None
    )
    assert assembly.ledger.offload_failed == 1
    assert assembly.ledger.offloaded == 0
    assert all(POINTER not in m.text for m in assembly.messages)


class _BrokenNotes(StoreNoteStore):
    def create(self, **kwargs: Any) -> Any:
        msg = "the database is down"
        raise OSError(msg)


def test_note_store_that_raises_keeps_the_result_whole() -> None:
    notes = _BrokenNotes(InMemoryStore())
    offloader = ToolResultOffloader(OffloadConfig(store=NoteOffloadStore(notes)))
    messages = _conversation("fetch", "c1")
    outcome = offloader.offload(messages, room=WINDOW, tools=["note"])
    assert (outcome.count, outcome.failed) == (0, 1)
    assert outcome.messages[-1].content == BIG


async def test_note_store_that_raises_keeps_the_result_whole_async() -> None:
    class Broken(StoreNoteStore):
        async def acreate(self, **kwargs: Any) -> Any:
            msg = "the database is down"
            raise OSError(msg)

    offloader = ToolResultOffloader(OffloadConfig(store=NoteOffloadStore(Broken(InMemoryStore()))))
    outcome = await offloader.aoffload(_conversation("fetch", "c1"), room=WINDOW, tools=["note"])
    assert (outcome.count, outcome.failed) == (0, 1)
    assert outcome.messages[-1].content == BIG


# -- idempotence, determinism, policy -------------------------------------------------------


def test_writes_are_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = WorkspaceOffloadStore(tmp_path)
    key = offload_key(ToolMessage(BIG, tool_call_id="c1", name="fetch"), BIG)
    store.save(key, BIG)
    replaced: list[Any] = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda *a: replaced.append(a) or real_replace(*a))
    store.save(key, BIG)  # a fresh process: no memo, same content, no rewrite
    assert replaced == []
    notes = StoreNoteStore(InMemoryStore())
    NoteOffloadStore(notes).save(key, BIG)
    before = [n.updated_at for n in notes.list_notes()]
    NoteOffloadStore(notes).save(key, BIG)
    assert [n.updated_at for n in notes.list_notes()] == before


def test_fresh_offloaders_render_the_same_bytes(tmp_path: Path) -> None:
    messages = _conversation("fetch", "c1")
    views = []
    for _ in range(2):
        store = WorkspaceOffloadStore(tmp_path)
        offloader = ToolResultOffloader(OffloadConfig(store=store))
        views.append(offloader.offload(messages, room=WINDOW, tools=["terminal"]).messages[-1])
    assert views[0].content == views[1].content
    again = ToolResultOffloader(OffloadConfig(store=WorkspaceOffloadStore(tmp_path)))
    first = again.offload(messages, room=WINDOW, tools=["terminal"]).messages[-1]
    assert again.offload(messages, room=WINDOW, tools=["terminal"]).messages[-1] == first


def test_threshold_share_and_floor(tmp_path: Path) -> None:
    config = OffloadConfig(store=WorkspaceOffloadStore(tmp_path))
    assert config.threshold(500) == 1_000  # the floor on a tiny window
    assert config.threshold(200_000) == 20_000  # a tenth of the trajectory budget
    offloader = ToolResultOffloader(config, token_counter=len)
    under = _conversation("fetch", "c1", "x" * 999)
    assert offloader.offload(under, room=500, tools=["terminal"]).count == 0


def test_no_offload_without_the_reader_bound(tmp_path: Path) -> None:
    offloader = ToolResultOffloader(OffloadConfig(store=WorkspaceOffloadStore(tmp_path)))
    outcome = offloader.offload(_conversation("fetch", "c1"), room=WINDOW, tools=["fetch"])
    assert outcome.count == 0
    assert not (tmp_path / ".contextkit").exists()
    loose = OffloadConfig(store=WorkspaceOffloadStore(tmp_path), require_reader=False)
    assert ToolResultOffloader(loose).offload(_conversation("f", "c"), room=WINDOW).count == 1


def test_list_content_is_not_offloaded(tmp_path: Path) -> None:
    offloader = ToolResultOffloader(OffloadConfig(store=WorkspaceOffloadStore(tmp_path)))
    messages = _conversation("fetch", "c1")
    messages[-1] = ToolMessage(
        [{"type": "text", "text": BIG}, {"type": "image_url", "image_url": {"url": "x"}}],
        tool_call_id="c1",
        name="fetch",
    )
    outcome = offloader.offload(messages, room=WINDOW, tools=["terminal"])
    assert outcome.count == 0
    assert outcome.messages[-1] is messages[-1]


def test_bad_configuration_fails_at_construction(tmp_path: Path) -> None:
    store = WorkspaceOffloadStore(tmp_path)
    with pytest.raises(ConfigError):
        OffloadConfig(store=store, share=0)
    with pytest.raises(ConfigError):
        OffloadConfig(store=store, min_tokens=0)
    with pytest.raises(ConfigError):
        OffloadConfig(store=typing.cast("Any", "a folder"))
    with pytest.raises(ConfigError):
        WindowAssembler(window=WINDOW, offload=typing.cast("Any", tmp_path))
    with pytest.raises(ConfigError):
        WorkspaceOffloadStore.for_terminal(
            TerminalTool(tmp_path, sandbox="none", allowed_commands={"ls", "cat"})
        )


def test_assembler_counts_the_preview_in_the_ledger(tmp_path: Path) -> None:
    store = WorkspaceOffloadStore(tmp_path)
    assembler = WindowAssembler(window=WINDOW, offload=store)
    messages = _conversation("fetch", "c1")
    assembly = assembler.assemble(messages, tools=[_terminal(tmp_path)])
    ledger = assembly.ledger
    assert ledger.offloaded == 1
    assert ledger.prompt <= WINDOW - ledger.output_reserve
    assert messages[-1].content == BIG  # the input list is never changed
    assert POINTER in assembly.messages[-1].text


# -- end to end: ChatOpenAI over local HTTP, a small window ---------------------------------

STUB_WINDOW = 4_000
STUB_OUTPUT = 300
TURNS = 6


def _stub_script() -> Callable[[str, list[dict[str, Any]]], Any]:
    from provider_stubs.openai_stub import Reply, ToolCall, content_text

    ids = itertools.count(1)  # unique call ids, whatever compaction leaves in the request

    def respond(kind: str, messages: list[dict[str, Any]]) -> Reply:
        if kind != "agent":
            return Reply(text="- (recap)")
        last = messages[-1]
        if last.get("role") == "user":
            return Reply(tool_calls=(ToolCall("fetch", {"page": "big"}, f"fetch-{next(ids)}"),))
        text = content_text(last.get("content"))
        if last.get("role") == "tool" and POINTER in text:
            name, args = pointer_call(text)
            return Reply(tool_calls=(ToolCall(name, args, f"read-{next(ids)}"),))
        return Reply(text="Done.")

    return respond


@pytest.mark.allow_hosts(["127.0.0.1"])
def test_openai_stub_small_window_no_400_and_fits(tmp_path: Path) -> None:
    pytest.importorskip("langchain_openai")
    from provider_stubs.openai_stub import OpenAIStub

    from langchain_contextkit import tiktoken_counter

    terminal = TerminalTool(tmp_path, sandbox="none", max_output_chars=2_000)
    with OpenAIStub(_stub_script(), window=STUB_WINDOW) as stub:
        llm = stub.chat_model(max_tokens=STUB_OUTPUT)
        middleware = ContextKitMiddleware.for_model(
            llm,
            summaries="extractive",
            token_counter=tiktoken_counter("cl100k_base"),  # the stub's own tokenizer
            offload=WorkspaceOffloadStore.for_terminal(terminal),
        )
        agent = create_agent(
            llm, [fetch, terminal], middleware=[middleware], checkpointer=InMemorySaver()
        )
        config: Any = {"configurable": {"thread_id": "stub"}}
        for turn in range(TURNS):
            state = agent.invoke(
                {"messages": [HumanMessage(f"Turn {turn}: fetch, read on.")]}, config
            )
        records = list(stub.records)
    assert [(r.status, r.error) for r in records if r.status != 200] == []
    assert max(r.prompt_tokens for r in records) <= STUB_WINDOW - STUB_OUTPUT
    ledgers = state[LEDGER_KEY]
    assert sum(entry["offloaded"] > 0 for entry in ledgers) >= 2 * TURNS
    assert any(entry["compacted"] for entry in ledgers)  # previews compact like any turn
    # Every fetched result is whole in state; each turn's read got its page back.
    fetched = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "fetch"]
    assert len(fetched) == TURNS
    assert all(m.content == BIG for m in fetched)
    reads = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "terminal"]
    assert len(reads) == TURNS
    assert all(m.text and m.text in BIG for m in reads)
    assert len(list((tmp_path / ".contextkit" / "tool_results").iterdir())) == TURNS


def test_context_node_offloads_too(tmp_path: Path) -> None:
    terminal = _terminal(tmp_path)
    model = _model(_script())
    node = context_node(
        model=model, tools=[fetch, terminal], offload=WorkspaceOffloadStore.for_terminal(terminal)
    )
    out = node.invoke({"messages": _conversation("fetch", "c1")})
    assert POINTER in out["llm_input_messages"][-1].text
    assert out["contextkit_ledger"][-1]["offloaded"] == 1
