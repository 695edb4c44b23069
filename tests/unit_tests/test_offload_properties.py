"""Offloaded results read back byte-exact through the tools, for any text (issue 19, item 5)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _offload_pointer import pointer_call, pointer_line
from hypothesis import given, settings, strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langchain_contextkit import (
    NoteOffloadStore,
    NoteTool,
    OffloadConfig,
    StoreNoteStore,
    TerminalTool,
    ToolResultOffloader,
    WorkspaceOffloadStore,
    count_tokens,
)
from langchain_contextkit.agent.offload_stores import offload_key

ROOM = 1_000  # the trajectory budget; with the config below the threshold is 60 tokens

# Any Unicode but surrogates (a str holding one cannot be stored as UTF-8), CR and tabs
# included; lines of any length, the last one with or without its line end.
_LINE = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\n"), max_size=120)


def _long(lines: list[str], end: str) -> str:
    """The lines joined, repeated until the text is well over the threshold."""
    text = "\n".join(lines)
    while len(text) < 1_500 or count_tokens(text) < 300:
        text = f"{text}\n{text}\nrow {len(text)}"  # a run of blank lines counts ~nothing
    return text + end


_TEXT = st.builds(
    _long, st.lists(_LINE, min_size=1, max_size=200), st.sampled_from(["", "\n", "\r\n", "\n\n"])
)


def _request(text: str) -> list[Any]:
    call = {"name": "fetch", "args": {"page": "x"}, "id": "call-1"}
    return [
        AIMessage("", tool_calls=[call]),
        ToolMessage(text, tool_call_id="call-1", name="fetch"),
    ]


def _offloaded(store: Any, text: str, tool: Any) -> str:
    config = OffloadConfig(store=store, share=0.01, min_tokens=60, preview_tokens=40)
    outcome = ToolResultOffloader(config).offload(_request(text), room=ROOM, tools=[tool])
    assert outcome.count == 1
    shown = outcome.messages[1].text
    head, tail = shown.split(pointer_line(shown), 1)
    # What is shown is the text's own head and tail around the pointer line.
    assert text.startswith(head.removesuffix("\n"))
    assert text.endswith(tail.removeprefix("\n"))
    return shown


@settings(max_examples=40, deadline=None)
@given(text=_TEXT, page_chars=st.integers(200, 3_000))
def test_a_note_offloaded_result_reads_back_byte_exact_through_the_note_tool(
    text: str, page_chars: int
) -> None:
    notes = StoreNoteStore(InMemoryStore(), namespace=("offload",))
    store = NoteOffloadStore(notes, page_chars=page_chars)
    tool = NoteTool(store=notes)
    shown = _offloaded(store, text, tool)
    name, args = pointer_call(shown)
    assert name == tool.name
    # The pointer's read works as the model would send it; every part, read the same way
    # and joined in order, is the result byte for byte.
    first = tool.invoke({"type": "tool_call", "name": name, "args": args, "id": "r0"})
    ids = [note_id for note_id, _ in store.note_ids(offload_key(_request(text)[1], text), text)]
    assert args["note_id"] in ids
    assert first.artifact["note"]["content"] == notes.get(args["note_id"]).content
    parts = []
    for n, note_id in enumerate(ids):
        call = {"action": "read", "note_id": note_id}
        read = tool.invoke({"type": "tool_call", "name": name, "args": call, "id": f"r{n + 1}"})
        parts.append(read.artifact["note"]["content"])
    assert "".join(parts).encode("utf-8") == text.encode("utf-8")


@settings(max_examples=25, deadline=None)
@given(text=_TEXT)
def test_a_workspace_offloaded_result_is_stored_byte_exact_and_the_pointer_reads_its_lines(
    text: str,
) -> None:
    with tempfile.TemporaryDirectory() as root:
        terminal = TerminalTool(root, sandbox="none")
        store = WorkspaceOffloadStore.for_terminal(terminal)
        shown = _offloaded(store, text, terminal)
        key = offload_key(_request(text)[1], text)
        assert Path(store.path(key)).read_bytes() == text.encode("utf-8")
        name, args = pointer_call(shown)
        assert name == terminal.name
        # tail -n +A | head -n K: the lines A .. A+K-1 as `tail` and `head` count them.
        words = args["command"].split()
        first, count = int(words[2].lstrip("+")), int(words[-1])
        wanted = "".join(_lines(text)[first - 1 : first - 1 + count])
        read = terminal.invoke({"type": "tool_call", "name": name, "args": args, "id": "r"})
        assert read.status == "success", read.text
        assert _printed(read.text) == _printed(wanted)


def _lines(text: str) -> list[str]:
    """Lines as `head`/`tail` count them: each ends at a line feed (the last may not)."""
    out = text.split("\n")
    lines = [line + "\n" for line in out[:-1]]
    return lines + ([out[-1]] if out[-1] else [])


def _printed(text: str) -> str:
    """Lines as the terminal reports them: final line ends off, NUL shown as U+2400.

    The one change the terminal makes to what a command prints (`tools.terminal._report`):
    stores and provider APIs reject NUL inside text.
    """
    return text.rstrip("\n").replace("\0", "\u2400")
