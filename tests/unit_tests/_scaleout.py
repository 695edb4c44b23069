"""The scripted conversation the scale-out test runs, shared by the test and its workers.

Everything here is a pure function of its arguments, so a turn gives the same requests
whichever process serves it: the turns of each thread (`script`), the scripted model's
replies (`respond`, a function of the request alone), the large log the `fetch_log` tool
returns, and the deterministic clock and note ids a worker runs under (`Turn.clock`,
`note_id_for`). Real note ids hold the time and random digits; the workers replace
both, so two runs of the script can be compared request by request.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from provider_stubs.openai_stub import Reply, ToolCall, content_text

WINDOW = 4_000
MAX_TOKENS = 300
PAGE_CHARS = 2_000
NAMESPACE = ("notes", "shared")
SYSTEM_PROMPT = "You are the operations assistant. Keep notes of what you learn."

_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
_TAG = re.compile(r"\[(t\d+) #(\d+)\] (\w+)(?: (\S+))?(?: (.*))?", re.DOTALL)
_POINTER = re.compile(r"Read the rest with the note tool: (\{[^}]*\})")
_TEXT = (
    "replica lag stayed under two seconds while the nightly export ran, the queue drained "
    "by dawn, invoice batch totals matched the ledger, and the on-call engineer confirmed "
    "that the rollback plan for the billing service is still valid"
)
_WORDS = _TEXT.split()


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn: which thread, its number there, what it asks, its place in the run."""

    thread: str
    number: int
    action: str
    arg: str
    index: int

    @property
    def tag(self) -> str:
        return f"[{self.thread} #{self.number}]"

    @property
    def text(self) -> str:
        """The user message: the tag the scripted model reads, then the request."""
        rest = self.arg.split(" ", 1)[-1]
        tail = {
            "chat": f"please review the status of area {self.arg}.",
            "remember": f"remember this: {self.arg}.",
            "revise": f"the fact changed: {rest}.",
            "fetch": "fetch the deploy log and tell me what it says.",
            "follow": "read the part of that log you did not see.",
        }[self.action]
        name = self.arg.split(" ", 1)[0] if self.action in ("revise", "fetch", "follow") else ""
        head = f"{self.tag} {self.action}" + (f" {name}" if name else "")
        return f"{head} {tail}"

    @property
    def clock(self) -> str:
        """The time the worker's note store sees during this turn (ISO 8601)."""
        return (_EPOCH + timedelta(minutes=self.index)).isoformat()


def note_id_for(thread: str, number: int, serial: int) -> str:
    """The id the `serial`-th note created during turn `number` of `thread` gets."""
    return f"note_{thread}_{number:02d}_{serial}"


def script(*, threads: int, turns: int, seed: int) -> list[Turn]:
    """The run: `turns` turns of each of `threads` threads, interleaved by `seed`.

    Each thread remembers facts (note create), revises one of them (note update), chats,
    and fetches a large log (offloaded) whose hidden part it reads in the next turn.
    """
    rng = random.Random(seed)  # noqa: S311 - a seeded script, not a secret
    plans: dict[str, list[tuple[str, str]]] = {}
    for t in range(1, threads + 1):
        thread = f"t{t}"
        plan: list[tuple[str, str]] = []
        for number in range(turns):
            if number in (2, 7):
                plan.append(("fetch", f"log-{thread}-{number}"))
            elif number in (3, 8):
                plan.append(("follow", f"log-{thread}-{number - 1}"))
            elif number in (1, 5, 9):
                plan.append(("remember", f"{thread} fact {number}: {_sentence(thread, number)}"))
            elif number in (6, 10):
                first = note_id_for(thread, 1, 1)
                plan.append(("revise", f"{first} {thread} fact 1 is now revision {number}"))
            else:
                plan.append(("chat", f"{thread}-{number}"))
        plans[thread] = plan
    order = [thread for thread in plans for _ in plans[thread]]
    rng.shuffle(order)
    counters = dict.fromkeys(plans, 0)
    run = []
    for index, thread in enumerate(order):
        number = counters[thread]
        counters[thread] += 1
        action, arg = plans[thread][number]
        run.append(Turn(thread, number, action, arg, index))
    return run


def _sentence(thread: str, number: int, words: int = 40) -> str:
    rng = random.Random(f"{thread}/{number}")  # noqa: S311 - seeded text
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def deploy_log(name: str, lines: int = 320) -> str:
    """The `fetch_log` tool's result: ~4,000 tokens, a pure function of the name."""
    out = []
    for n in range(1, lines + 1):
        digest = hashlib.sha256(f"{name}:{n}".encode()).hexdigest()[:12]
        out.append(f"{name} line {n}: step {n % 17} finished, checksum {digest}, status ok")
    return "\n".join(out)


# -- the scripted model -------------------------------------------------------------------


def thread_of(body: dict[str, Any]) -> str | None:
    """The thread a request belongs to (its first tag), or None."""
    for message in body.get("messages") or []:
        found = _TAG.search(content_text(message.get("content")))
        if found:
            return found.group(1)
    return None


def _current(messages: list[dict[str, Any]]) -> tuple[int, re.Match[str]]:
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.get("role") == "user":
            found = _TAG.match(content_text(message.get("content")))
            if found:
                return position, found
    msg = "no tagged user turn in the request"
    raise ValueError(msg)


def respond(kind: str, messages: list[dict[str, Any]]) -> Reply:  # noqa: PLR0911 - per action
    """The scripted model: a pure function of the request (see the module)."""
    if kind != "agent":
        return _recap(messages)
    position, found = _current(messages)
    thread, number, action = found.group(1), int(found.group(2)), found.group(3)
    after = messages[position + 1 :]
    tool_results = [m for m in after if m.get("role") == "tool"]
    call_id = f"call_{thread}_{number}_{len(tool_results)}"
    tag = f"[{thread} #{number}]"
    turn_text = content_text(messages[position].get("content"))
    if action == "chat":
        return Reply(text=f"{tag} status review: {_sentence(thread, number, 90)}.")
    if tool_results:
        result = content_text(tool_results[-1].get("content"))
        offloaded = "[offloaded:" in result
        first = result.splitlines()[0][:80] if result else ""
        return Reply(text=f"{tag} done ({action}; offloaded={offloaded}): {first}")
    if action == "remember":
        fact = turn_text.split("remember this: ", 1)[1].rstrip(".")
        args = {"action": "create", "title": f"{thread} fact {number}", "content": fact}
        return Reply(tool_calls=(ToolCall("note", {**args, "note_type": "conclusion"}, call_id),))
    if action == "revise":
        note_id = found.group(4)
        fact = turn_text.split("the fact changed: ", 1)[1].rstrip(".")
        note_args = {"action": "update", "note_id": note_id, "content": fact}
        return Reply(tool_calls=(ToolCall("note", note_args, call_id),))
    if action == "fetch":
        return Reply(tool_calls=(ToolCall("fetch_log", {"name": found.group(4)}, call_id),))
    # follow: the pointer line of the log's preview, wherever it is in the request.
    for message in reversed(messages[:position]):
        if message.get("role") != "tool":
            continue
        pointer = _POINTER.search(content_text(message.get("content")))
        if pointer and found.group(4) in content_text(message.get("content")):
            return Reply(tool_calls=(ToolCall("note", json.loads(pointer.group(1)), call_id),))
    return Reply(text=f"{tag} no pointer to follow")


def _recap(messages: list[dict[str, Any]]) -> Reply:
    """A recap naming every turn the request shows, in order (a function of the request)."""
    seen: list[str] = []
    for message in messages:
        for thread, number in re.findall(
            r"\[(t\d+) #(\d+)\]", content_text(message.get("content"))
        ):
            tag = f"{thread}#{number}"
            if tag not in seen:
                seen.append(tag)
    return Reply(text="Recap: turns " + ", ".join(seen) + " were handled; notes were kept.")
