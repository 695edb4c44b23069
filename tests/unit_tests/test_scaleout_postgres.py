"""Several agent processes, one PostgreSQL: every turn of a thread may land on any worker.

Three worker processes (`_scaleout_worker.py`, each a `create_agent` +
`ContextKitMiddleware.for_model(ChatOpenAI)` + `NoteTool` on `PostgresStore`, checkpointed
by `PostgresSaver`) serve 60 turns of five threads; each turn goes to a worker drawn by a
seeded generator, so the threads' turns run concurrently on different processes, all on
one notes namespace. The same script also runs in a single worker process against its own
database and stub, and the two runs must agree request by request and state key by state
key. In the middle of the run a worker is SIGKILLed while the stub holds its request, and
a new worker resumes the thread from the last checkpoint.

Turns are routed before the run (`routes_for`); each worker takes its turns in script
order and a turn waits only for the previous turn of its thread, so up to three turns of
different threads run at once. The kill is timed by the stub: it holds the killed turn's
second model call (the one after its note was written and checkpointed), the test then
SIGKILLs that worker (its own child, by pid), checks what the checkpoint and the store
hold, and sends ``resume`` to a new worker. Note ids and the note store's clock are made
deterministic in the workers (`_scaleout`), so the two runs compare byte for byte.

The throwaway server comes from the `postgres_url` fixture (conftest, `_postgres`). Run
``python -m pytest tests/unit_tests/test_scaleout_postgres.py -s`` to see the figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _postgres import LOCALHOST, create_database
from _scaleout import NAMESPACE, WINDOW, Turn, deploy_log, note_id_for, respond, script, thread_of
from provider_stubs.openai_stub import OpenAIStub

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = LOCALHOST

WORKER = Path(__file__).with_name("_scaleout_worker.py")
THREADS, TURNS, SEED = 5, 12, 21
WORKERS = 3
TIMEOUT = 120.0  # seconds any one answer may take on a loaded machine
KILLED_THREAD, KILLED_TURN = "t3", 5  # a `remember` turn: killed after its note is written
STATE_KEYS = ("contextkit_ledger", "contextkit_calibration")


# -- the stub, recording every body by thread, with a trap that holds one request ---------


class RecordingStub(OpenAIStub):
    """`OpenAIStub` that keeps each request body by thread and attempt, and can hold one."""

    def __init__(self) -> None:
        super().__init__(respond, window=WINDOW)
        self.bodies: dict[str, list[tuple[object, str, int]]] = defaultdict(list)
        self.attempt: dict[str, object] = {}
        self.trap: Callable[[str | None, dict[str, Any]], bool] | None = None
        self.caught: dict[str, Any] | None = None
        self.caught_event = threading.Event()
        self.release = threading.Event()
        self._books = threading.Lock()

    def handle(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        thread = thread_of(body)
        trap = self.trap
        if trap is not None and trap(thread, body):
            self.trap = None
            self.caught = body
            self.caught_event.set()
            self.release.wait(TIMEOUT)  # the worker is killed meanwhile: nobody reads this
            return 503, {"error": {"message": "held", "type": "server_error"}}
        status, payload = super().handle(body)
        with self._books:
            attempt = self.attempt.get(thread or "")
            self.bodies[thread or "?"].append((attempt, _canonical(body), status))
        return status, payload


def _canonical(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, ensure_ascii=False)


# -- worker processes ---------------------------------------------------------------------


class Worker:
    """One worker process: a command line in, an answer line out."""

    def __init__(self, name: str, dsn: str, base_url: str, log: Path) -> None:
        self.name = name
        self._log = log.open("a")
        config = json.dumps({"dsn": dsn, "base_url": base_url})
        # tests/unit_tests for `_scaleout`, tests/ for the `provider_stubs` it imports.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, WORKER.parents[:2]))}
        self.process = subprocess.Popen(  # noqa: S603 - our own worker, fixed arguments
            [sys.executable, str(WORKER), config],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        self.ready = False

    def _read(self) -> dict[str, Any] | None:
        line = self.process.stdout.readline() if self.process.stdout else ""
        return json.loads(line) if line else None

    def wait_ready(self) -> None:
        if not self.ready:
            answer = self._read()
            assert answer is not None, f"worker {self.name} died at start: see {self._log.name}"
            self.ready = True

    def call(self, command: dict[str, Any]) -> dict[str, Any] | None:
        """Send one command; the answer, or None when the process died meanwhile."""
        self.wait_ready()
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                if self.ready and self.process.stdin:
                    self.process.stdin.write('{"op": "quit"}\n')
                    self.process.stdin.close()
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a broken pipe to a killed worker
                    pipe.close()
        self._log.close()


def _command(op: str, turn: Turn) -> dict[str, Any]:
    return {
        "op": op,
        "thread": turn.thread,
        "number": turn.number,
        "text": turn.text,
        "clock": turn.clock,
    }


@dataclass
class Run:
    """What one run of the script left: who served which turn, answers, events."""

    served: dict[int, str] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)
    memos: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    killed: dict[str, Any] = field(default_factory=dict)
    spans: dict[int, tuple[float, float]] = field(default_factory=dict)
    seconds: float = 0.0


def routes_for(turns: list[Turn], workers: int, seed: int) -> list[int]:
    """A worker per turn, drawn by `seed`; a `follow` turn never goes where its fetch went."""
    rng = random.Random(seed)  # noqa: S311 - a seeded route, not a secret
    last: dict[str, int] = {}
    routes = []
    for turn in turns:
        choices = list(range(workers))
        if turn.action == "follow":
            choices.remove(last[turn.thread])
        route = rng.choice(choices)
        routes.append(route)
        last[turn.thread] = route
    return routes


def run_script(  # noqa: C901, PLR0915 - one scheduler, read top to bottom
    turns: list[Turn],
    routes: list[int],
    make_worker: Callable[[str], Worker],
    stub: RecordingStub,
    *,
    on_kill: Callable[[Run], None] | None = None,
    after_turn: Callable[[Turn], None] | None = None,
) -> Run:
    """Serve `turns`, each on worker `routes[i]`, concurrently where threads allow.

    Every worker takes its turns in script order, and a turn waits for the one before it
    in its thread, so the run cannot deadlock. With `on_kill`, the worker serving the
    trapped request is SIGKILLed once the stub holds it, `on_kill` inspects what is left,
    and a new worker resumes the thread from its last checkpoint. `after_turn` runs once a
    turn is answered, before the thread's next turn may start.
    """
    run = Run()
    count = max(routes) + 1
    workers = [make_worker(f"w{n}") for n in range(count)]
    done = {turn.index: threading.Event() for turn in turns}
    previous: dict[int, int] = {}
    last_of: dict[str, int] = {}
    for turn in turns:
        if turn.thread in last_of:
            previous[turn.index] = last_of[turn.thread]
        last_of[turn.thread] = turn.index
    lock = threading.Lock()
    started = time.monotonic()

    def kill_when_caught(slot: int, index: int) -> None:
        if not stub.caught_event.wait(TIMEOUT):
            return
        with lock:
            process = workers[slot].process
        os.kill(process.pid, signal.SIGKILL)  # our own child, by its pid
        process.wait(TIMEOUT)
        run.killed = {"slot": slot, "index": index, "pid": process.pid}

    def serve(slot: int) -> None:
        for turn in turns:
            if routes[turn.index] != slot:
                continue
            before = previous.get(turn.index)
            if before is not None and not done[before].wait(TIMEOUT):
                run.errors.append(f"turn {turn.index} waited too long for turn {before}")
                return
            stub.attempt[turn.thread] = turn.index
            watcher = None
            if on_kill is not None and (turn.thread, turn.number) == (KILLED_THREAD, KILLED_TURN):
                watcher = threading.Thread(target=kill_when_caught, args=(slot, turn.index))
                watcher.start()
            with lock:
                worker = workers[slot]
            begun = time.monotonic()
            answer = worker.call(_command("turn", turn))
            if watcher is not None:
                watcher.join(TIMEOUT)
            if answer is None and run.killed and on_kill is not None:
                on_kill(run)
                replacement = make_worker(f"w{slot}-after-kill")
                with lock:
                    workers[slot] = replacement
                worker.close()
                stub.attempt[turn.thread] = ("resume", turn.index)
                answer = replacement.call(_command("resume", turn))
                worker = replacement
            if answer is None or not answer.get("ok"):
                run.errors.append(f"turn {turn.index} on {worker.name}: {answer}")
                done[turn.index].set()
                continue
            run.served[turn.index] = worker.name
            run.pids[turn.index] = answer["pid"]
            run.spans[turn.index] = (begun, time.monotonic())
            run.memos.append({"worker": worker.name, "turn": turn.index, **answer["memo"]})
            if after_turn is not None:
                after_turn(turn)
            done[turn.index].set()

    try:
        for worker in workers:  # they start (import, connect) in parallel
            worker.wait_ready()
        slots = [threading.Thread(target=serve, args=(n,)) for n in range(count)]
        for slot in slots:
            slot.start()
        for slot in slots:
            slot.join()
    finally:
        stub.release.set()
        for worker in workers:
            worker.close()
    run.seconds = time.monotonic() - started
    return run


# -- reading what a run left in PostgreSQL ------------------------------------------------


def _message_row(message: Any) -> tuple[Any, ...]:
    calls = tuple(
        (call["name"], json.dumps(call["args"], sort_keys=True), call["id"])
        for call in getattr(message, "tool_calls", None) or ()
    )
    return (
        message.type,
        message.content,
        calls,
        getattr(message, "tool_call_id", None),
        getattr(message, "name", None),
    )


def thread_states(dsn: str, threads: list[str]) -> dict[str, dict[str, Any]]:
    """Per thread: its last checkpoint's values and the chain of checkpoints, oldest first."""
    from langgraph.checkpoint.postgres import PostgresSaver

    out = {}
    with PostgresSaver.from_conn_string(dsn) as saver:
        for thread in threads:
            config = {"configurable": {"thread_id": thread}}
            latest = saver.get_tuple(config)
            assert latest is not None, f"no checkpoint for {thread}"
            history = [t.checkpoint["channel_values"] for t in saver.list(config)][::-1]
            out[thread] = {"values": latest.checkpoint["channel_values"], "history": history}
    return out


def notes_in(dsn: str) -> dict[str, dict[str, Any]]:
    from langgraph.store.postgres import PostgresStore

    from langchain_contextkit import StoreNoteStore

    with PostgresStore.from_conn_string(dsn) as store:
        notes = StoreNoteStore(store, namespace=NAMESPACE, max_notes=None)
        return {info.id: notes.get(info.id).to_dict() for info in notes.list_notes()}


def _summary_row(summary: dict[str, Any] | None, messages: list[Any]) -> dict[str, Any] | None:
    """The running summary with its last id replaced by that message's position."""
    if summary is None:
        return None
    row = dict(summary)
    last_id = row.pop("last_id", None)
    ids = [m.id for m in messages]
    row["last"] = ids.index(last_id) if last_id in ids else None
    return row


# -- the test -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def databases(postgres_url):
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    urls = {}
    for name in ("single", "multi"):
        url = create_database(postgres_url, f"scaleout_{name}")
        with PostgresStore.from_conn_string(url) as store:
            store.setup()
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
        urls[name] = url
    return urls


def test_three_workers_serve_threads_as_one_process_would(databases, tmp_path):  # noqa: PLR0915
    turns = script(threads=THREADS, turns=TURNS, seed=SEED)
    threads = sorted({turn.thread for turn in turns})
    by_thread = {t: [turn for turn in turns if turn.thread == t] for t in threads}
    routes = routes_for(turns, WORKERS, SEED)
    logs = tmp_path

    from langgraph.store.postgres import PostgresStore

    from langchain_contextkit import StoreNoteStore

    kill_checks: dict[str, Any] = {}

    def inspect_after_kill(run: Run) -> None:
        """Nothing half-written: the last checkpoint is whole, the note has its index entry."""
        state = thread_states(databases["multi"], [KILLED_THREAD])[KILLED_THREAD]
        messages = state["values"]["messages"]
        kill_checks["last_message"] = _message_row(messages[-1])
        kill_checks["ledgers"] = len(state["values"].get("contextkit_ledger") or [])
        with PostgresStore.from_conn_string(databases["multi"]) as store:

            def keys() -> set[str]:
                found = store.search(NAMESPACE, limit=1000)
                return {item.key for item in found if item.key.startswith("note_")}

            # The other workers go on serving turns meanwhile: the raw keys are read
            # before and after the two listings, so a note another worker creates
            # between the reads is told apart from one a listing misses.
            kill_checks["keys_before"] = keys()
            kill_checks["watcher_ids"] = {i.id for i in watcher.list_notes()}
            fresh = StoreNoteStore(store, namespace=NAMESPACE, max_notes=None)
            kill_checks["fresh_ids"] = {i.id for i in fresh.list_notes()}
            kill_checks["keys"] = keys()
        kill_checks["seconds"] = run.seconds

    with (
        RecordingStub() as single_stub,
        RecordingStub() as multi_stub,
        PostgresStore.from_conn_string(databases["multi"]) as watched,
    ):
        # A long-lived reader of the shared namespace, warm before the kill.
        watcher = StoreNoteStore(watched, namespace=NAMESPACE, max_notes=None)
        watcher.list_notes()
        multi_stub.trap = lambda thread, body: (
            thread == KILLED_THREAD
            and body["messages"][-1].get("tool_call_id") == f"call_{KILLED_THREAD}_{KILLED_TURN}_0"
        )
        results: dict[str, Run] = {}
        offloaded_by_fetcher: dict[int, int] = {}

        def after_turn(turn: Turn) -> None:
            """After a fetch: its worker has stored the log whole, before anyone reads it."""
            if turn.action == "fetch":
                prefix = f"note_offload_fetch_log-call_{turn.thread}_{turn.number}_0-"
                keys = [i.key for i in watched.search(NAMESPACE, limit=1000)]
                offloaded_by_fetcher[turn.index] = sum(k.startswith(prefix) for k in keys)

        def single() -> None:
            results["single"] = run_script(
                turns,
                [0] * len(turns),
                lambda name: Worker(
                    f"single-{name}", databases["single"], single_stub.base_url, logs / "single.log"
                ),
                single_stub,
            )

        reference = threading.Thread(target=single)
        reference.start()
        results["multi"] = run_script(
            turns,
            routes,
            lambda name: Worker(name, databases["multi"], multi_stub.base_url, logs / "multi.log"),
            multi_stub,
            on_kill=inspect_after_kill,
            after_turn=after_turn,
        )
        reference.join()
    single_run, multi_run = results["single"], results["multi"]
    log_text = "".join(p.read_text() for p in logs.glob("*.log"))
    assert not single_run.errors, (single_run.errors, log_text[-3000:])
    assert not multi_run.errors, (multi_run.errors, log_text[-3000:])

    # Every turn served; by three processes (four: one was killed and replaced).
    assert len(multi_run.served) == len(turns) == len(single_run.served)
    assert len(set(multi_run.pids.values())) == WORKERS + 1
    assert len(set(single_run.pids.values())) == 1

    # 0 HTTP 400 (nor any other failure) at either stub.
    for stub in (single_stub, multi_stub):
        assert [r.status for r in stub.records if r.status != 200] == []

    # Concurrency: turns of different threads that write notes overlapped in time.
    writers = [t for t in turns if t.action in ("remember", "revise", "fetch")]
    overlaps = sum(
        1
        for a in writers
        for b in writers
        if a.index < b.index
        and a.thread != b.thread
        and multi_run.spans[a.index][0] < multi_run.spans[b.index][1]
        and multi_run.spans[b.index][0] < multi_run.spans[a.index][1]
    )
    assert overlaps >= 3, overlaps
    # Each worker's own memory differs (its calibration learnt on whatever it served) ...
    assert len({json.dumps(m["calibration"]) for m in multi_run.memos}) > 1

    # The kill: the held request was the killed turn's second call; nothing half-written.
    assert multi_run.killed, "the trap never caught the request"
    assert multi_stub.caught is not None
    assert kill_checks["last_message"][0] == "tool"  # the note's result, checkpointed
    assert note_id_for(KILLED_THREAD, KILLED_TURN, 1) in kill_checks["keys"]
    before, after = kill_checks["keys_before"], kill_checks["keys"]
    if before == after:  # nothing written between the reads: all three agree exactly
        assert kill_checks["watcher_ids"] == kill_checks["fresh_ids"] == after
    for listed in (kill_checks["watcher_ids"], kill_checks["fresh_ids"]):
        assert before <= listed <= after  # no note missed, none listed without its row

    # ... yet thread by thread, the multi-worker run sent what the single process sent.
    compared = _check_requests(threads, single_stub, multi_stub, multi_run)
    # State: same ledgers, calibration, recap; the history whole, in the checkpoints.
    multi_states = thread_states(databases["multi"], threads)
    compactions, offloads = _check_states(
        by_thread, thread_states(databases["single"], threads), multi_states
    )
    assert compactions >= THREADS, "the window is meant to force compaction in every thread"
    assert offloads >= 2 * THREADS
    # Offloaded results: read back by a worker other than the one that fetched them.
    _check_offload_reads(turns, by_thread, multi_run, multi_states, offloaded_by_fetcher)
    # Notes: none lost, none duplicated, the same in both databases.
    _check_notes(turns, by_thread, notes_in(databases["single"]), notes_in(databases["multi"]))

    print(  # noqa: T201 - the run's figures, shown with -s
        f"\nscale-out: {len(turns)} turns, {len(threads)} threads, {compared} requests compared, "
        f"{compactions} compactions, {offloads} offloads, {overlaps} overlaps; "
        f"multi {multi_run.seconds:.1f}s, single {single_run.seconds:.1f}s; "
        f"memos {multi_run.memos[-3:]}"
    )


def _without_redone(
    records: list[tuple[object, str, int]], index: int, stub: RecordingStub
) -> list[str]:
    """The thread's bodies with the killed attempt's requests that the new worker redid.

    The killed attempt's requests (`lost`) that reached the stub, then the resumed
    attempt's: the resumed worker starts from the last checkpoint, so it may redo the
    last few of `lost` (a recap call made before the held request), and must redo them
    exactly; its first agent request is the one the stub held.
    """
    lost = [body for attempt, body, _ in records if attempt == index]
    resumed = [body for attempt, body, _ in records if attempt == ("resume", index)]
    assert stub.caught is not None
    assert _canonical(stub.caught) in resumed, "the new worker did not resend the held request"
    for keep in range(len(lost) + 1):
        if lost[keep:] == resumed[: len(lost) - keep]:
            break
    else:  # pragma: no cover - the assertion below says what went wrong
        keep = len(lost)
    assert lost[keep:] == resumed[: len(lost) - keep], "the resumed worker sent other requests"
    out: list[str] = []
    for attempt, body, _ in records:
        if attempt == index:
            if len(out) - _first(records, index) < keep:
                out.append(body)  # the killed attempt's requests nobody redid
            continue
        out.append(body)
    return out


def _first(records: list[tuple[object, str, int]], index: int) -> int:
    """How many of the thread's records came before attempt `index`."""
    return next(n for n, (attempt, _, _) in enumerate(records) if attempt == index)


def _check_checkpoint_chain(thread: str, history: list[dict[str, Any]]) -> None:
    """Every checkpoint whole: a recap only with the ledger of the call that made it."""
    previous_summary, previous_ledgers = None, 0
    previous_messages = 0
    for values in history:
        messages = values.get("messages") or []
        assert len(messages) >= previous_messages, f"{thread}: history shrank"
        previous_messages = len(messages)
        ledgers = values.get("contextkit_ledger") or []
        summary = values.get("contextkit_summary")
        if summary != previous_summary:
            assert len(ledgers) == previous_ledgers + 1, f"{thread}: recap without its ledger"
            assert ledgers[-1]["compacted"], f"{thread}: recap, but its call did not compact"
        previous_summary, previous_ledgers = summary, len(ledgers)


def _check_requests(
    threads: list[str], single_stub: RecordingStub, multi_stub: RecordingStub, multi_run: Run
) -> int:
    """Each thread's request bodies equal, one by one; returns how many were compared."""
    compared = 0
    for thread in threads:
        single_bodies = [body for _, body, _ in single_stub.bodies[thread]]
        multi_records = multi_stub.bodies[thread]
        if thread == KILLED_THREAD:
            multi_bodies = _without_redone(multi_records, multi_run.killed["index"], multi_stub)
        else:
            multi_bodies = [body for _, body, _ in multi_records]
        mismatch = next(
            (
                n
                for n, (a, b) in enumerate(zip(single_bodies, multi_bodies, strict=False))
                if a != b
            ),
            None,
        )
        assert mismatch is None, f"{thread}: request {mismatch} differs"
        assert len(single_bodies) == len(multi_bodies), thread
        compared += len(single_bodies)
    return compared


def _untimed(value: object) -> object:
    """A ledger list without its wall times (they differ from run to run)."""
    if not isinstance(value, list):
        return value
    timing = {"model_ms", "middleware_ms"}
    return [
        {k: v for k, v in item.items() if k not in timing} if isinstance(item, dict) else item
        for item in value
    ]


def _check_states(
    by_thread: dict[str, list[Turn]],
    single_states: dict[str, dict[str, Any]],
    multi_states: dict[str, dict[str, Any]],
) -> tuple[int, int]:
    """Same state keys and history in both runs, every checkpoint whole.

    Returns:
        The compactions and offloads the multi-worker run's ledgers record.
    """
    compactions = offloads = 0
    for thread, thread_turns in by_thread.items():
        values, other = single_states[thread]["values"], multi_states[thread]["values"]
        for key in STATE_KEYS:
            assert _untimed(values.get(key)) == _untimed(other.get(key)), (thread, key)
        s_messages, m_messages = values["messages"], other["messages"]
        assert _summary_row(values.get("contextkit_summary"), s_messages) == _summary_row(
            other.get("contextkit_summary"), m_messages
        ), thread
        rows = [_message_row(m) for m in m_messages]
        assert rows == [_message_row(m) for m in s_messages], thread
        humans = [row[1] for row in rows if row[0] == "human"]
        assert humans == [turn.text for turn in thread_turns]
        finals = [row for row in rows if row[0] == "ai" and not row[2]]
        assert len(finals) == len(thread_turns)
        ledgers = other["contextkit_ledger"]
        compactions += sum(1 for ledger in ledgers if ledger["compacted"])
        offloads += sum(ledger.get("offloaded", 0) for ledger in ledgers)
        _check_checkpoint_chain(thread, multi_states[thread]["history"])
    return compactions, offloads


def _check_offload_reads(
    turns: list[Turn],
    by_thread: dict[str, list[Turn]],
    multi_run: Run,
    multi_states: dict[str, dict[str, Any]],
    offloaded_by_fetcher: dict[int, int],
) -> None:
    """Every `follow` turn read the hidden part of its log, on another worker."""
    for turn in turns:
        if turn.action != "follow":
            continue
        fetch = next(
            t for t in by_thread[turn.thread] if t.number == turn.number - 1 and t.action == "fetch"
        )
        assert multi_run.pids[turn.index] != multi_run.pids[fetch.index]
        assert offloaded_by_fetcher[fetch.index] > 1, "the fetching worker stored every part"
        rows = [_message_row(m) for m in multi_states[turn.thread]["values"]["messages"]]
        start = rows.index(("human", turn.text, (), None, None))
        read = next(row for row in rows[start:] if row[0] == "tool")
        assert read[4] == "note", read
        log = deploy_log(turn.arg)
        body = read[1].split("\n\n", 1)[1]
        assert body in log, "the note holds a page of the log"
        assert body not in log[:400], "and it is the hidden part, not the head"


def _check_notes(
    turns: list[Turn],
    by_thread: dict[str, list[Turn]],
    single_notes: dict[str, dict[str, Any]],
    multi_notes: dict[str, dict[str, Any]],
) -> None:
    """No note lost or duplicated, each as its last write left it, offloads whole."""
    assert multi_notes == single_notes
    expected = {
        note_id_for(turn.thread, turn.number, 1) for turn in turns if turn.action == "remember"
    }
    assert {n for n in multi_notes if not n.startswith("note_offload_")} == expected
    for turn in turns:
        if turn.action == "fetch":
            prefix = f"note_offload_fetch_log-call_{turn.thread}_{turn.number}_0-"
            parts = sorted(
                (n for n in multi_notes if n.startswith(prefix)),
                key=lambda n: int(n.rsplit("_p", 1)[1]),
            )
            assert len(parts) > 1, prefix
            assert "".join(multi_notes[n]["content"] for n in parts) == deploy_log(turn.arg)
    for thread, thread_turns in by_thread.items():
        revised = [turn for turn in thread_turns if turn.action == "revise"][-1]
        first = multi_notes[note_id_for(thread, 1, 1)]
        assert first["content"] == revised.arg.split(" ", 1)[1]
