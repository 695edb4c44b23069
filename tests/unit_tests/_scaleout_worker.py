"""One agent worker process of the scale-out test: JSON commands on stdin, answers on stdout.

Run as ``python _scaleout_worker.py '<config JSON>'`` (the test starts it). It builds the
deployment the README describes: `create_agent` with `ContextKitMiddleware.for_model` over
a `ChatOpenAI` pointed at the test's `OpenAIStub`, a `NoteTool` on a `StoreNoteStore` over
`PostgresStore`, large tool results offloaded to that store (`NoteOffloadStore`), and a
`PostgresSaver` checkpointer. Each command is one line:

- ``{"op": "turn", "thread": ..., "number": ..., "text": ..., "clock": ...}``: run a turn;
- ``{"op": "resume", "thread": ..., "number": ..., "clock": ...}``: go on from the thread's
  last checkpoint (after a worker died in the middle of a turn);
- ``{"op": "quit"}``.

Each answer is one line: ``{"ok": true, "pid": ..., "memo": {...}}`` or ``{"ok": false,
"error": ...}``; ``memo`` shows the per-process state the middleware holds. Note ids and the
note store's clock are made deterministic (see `_scaleout`) so that two runs compare.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from typing import Any

import _scaleout
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore

import langchain_contextkit.notes.store as notes_base
from langchain_contextkit import ContextKitMiddleware, NoteTool, StoreNoteStore
from langchain_contextkit.agent.offload_stores import NoteOffloadStore
from langchain_contextkit.notes import langgraph_store as graph_store


class _Clock:
    """The turn being served: its time and the notes created so far (deterministic ids)."""

    def __init__(self) -> None:
        self.now = datetime.fromisoformat("2026-01-01T00:00:00+00:00")
        self.thread = "t0"
        self.number = 0
        self.serial = 0

    def set(self, command: dict[str, Any]) -> None:
        self.now = datetime.fromisoformat(command["clock"])
        self.thread = command["thread"]
        self.number = command["number"]
        self.serial = 0

    def utc_now(self) -> datetime:
        return self.now

    def new_note_id(self, now: datetime | None = None) -> str:
        self.serial += 1
        return _scaleout.note_id_for(self.thread, self.number, self.serial)


CLOCK = _Clock()
notes_base.utc_now = CLOCK.utc_now
notes_base.new_note_id = CLOCK.new_note_id
graph_store.new_note_id = CLOCK.new_note_id


@tool
def fetch_log(name: str) -> str:
    """Fetch a deploy log by name."""
    return _scaleout.deploy_log(name)


def _memo(middleware: ContextKitMiddleware) -> dict[str, Any]:
    return {"calibration": middleware._calibration.to_dict()}


def _answer(answer: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def main() -> None:
    config = json.loads(sys.argv[1])
    model = ChatOpenAI(
        base_url=config["base_url"],
        api_key="x",
        model="gpt-4o-mini",
        max_tokens=_scaleout.MAX_TOKENS,
        max_retries=0,
        timeout=120,
        disable_streaming=True,
        use_responses_api=False,
        profile={"max_input_tokens": _scaleout.WINDOW, "max_output_tokens": _scaleout.MAX_TOKENS},
    )
    with (
        PostgresStore.from_conn_string(config["dsn"]) as store,
        PostgresSaver.from_conn_string(config["dsn"]) as saver,
    ):
        notes = StoreNoteStore(store, namespace=_scaleout.NAMESPACE)
        note_tool = NoteTool(store=notes)
        middleware = ContextKitMiddleware.for_model(
            model, offload=NoteOffloadStore(notes, page_chars=_scaleout.PAGE_CHARS)
        )
        agent = create_agent(
            model,
            tools=[note_tool, fetch_log],
            middleware=[middleware],
            system_prompt=_scaleout.SYSTEM_PROMPT,
            checkpointer=saver,
            store=store,
        )
        _answer({"ok": True, "pid": os.getpid(), "ready": True})
        for line in sys.stdin:
            command = json.loads(line)
            if command["op"] == "quit":
                break
            CLOCK.set(command)
            thread = {"configurable": {"thread_id": command["thread"]}}
            payload = (
                None if command["op"] == "resume" else {"messages": [HumanMessage(command["text"])]}
            )
            try:
                agent.invoke(payload, thread, durability="sync")
            except Exception as error:  # noqa: BLE001 - reported to the test, which fails
                answer: dict[str, Any] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
            else:
                answer = {"ok": True, "pid": os.getpid(), "memo": _memo(middleware)}
            _answer(answer)


if __name__ == "__main__":
    main()
