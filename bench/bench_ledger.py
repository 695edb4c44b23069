"""Issue 17, an incremental ledger: what `ContextKitMiddleware.for_model(model)` costs per call.

    python bench/bench_ledger.py            # 100 / 1,000 / 10,000 messages, 500-turn loop
    python bench/bench_ledger.py --quick    # 100 / 1,000 messages, 100 turns, never fails
    python bench/bench_ledger.py --turns 200 --sizes 100 1000

Side by side in one process, no LLM: ours (the untuned default, and the same with a
counting `token_counter=` that records counter calls and characters), langchain's
`SummarizationMiddleware(model, trigger=("tokens", 0.6 * window), keep=("messages", 10))`
(its `before_model`, summarising with a fake model), and `trim_messages(...,
count_tokens_approximately, strategy="last", start_on="human", include_system=True)`.

1. Histories of about 100, 1,000 and 10,000 messages (human questions, tool calls, one in
   five with two parallel calls, tool results of 200-2,000 characters of Chinese prose,
   licences, system logs and Python source read from this machine by `corpus.py`, AI
   answers; every message has an id), windows of 8k and 128k. *cold*: the first call, a
   fresh instance and fresh message objects (new ids); *steady*: after a warm-up call,
   each of 10 steps appends one turn and times the next call (state updates applied as a
   checkpointer would: ours keeps its ledger/summary keys, the anchor its summarised
   list). Ours is timed as `wrap_model_call` minus the fake provider's handler. Peak
   memory of one call (tracemalloc) is set beside `len(pickle.dumps(history))`.
2. A `create_agent` loop at 128k (`ScriptedChatModel`: a tool call, then an answer; tool
   results of 500-1,500 characters): stateless (the caller re-sends the whole list), with
   `InMemorySaver`, and with no middleware; the middleware's own time per model call
   (inside `wrap_model_call` minus inside the handler) over the last 50 turns.
3. Log-log slopes of ours' steady per-call counter calls, characters and time vs length.

Targets (exit 1 on a FAIL, unless --quick): steady slope of counter calls and of characters
<= 0.1 at each window; median middleware time <= 1 ms per call over turns 451-500 (both
loop variants); cold call on 10,000 messages <= the anchor's firing call, each window; peak
memory of any call of ours <= 2x the history's pickled size.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import math
import pickle
import random
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse, SummarizationMiddleware
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage
from langchain_core.messages import ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _agent_script as script
import corpus

from langchain_contextkit import count_tokens, tiktoken_counter
from langchain_contextkit.middleware import LEDGER_KEY, ContextKitMiddleware
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.messages import BaseMessage

SIZES = (100, 1_000, 10_000)
WINDOWS = (8_000, 128_000)
STEPS = 10  # appended turns timed in the steady state
TURNS = 500
LOOP_WINDOW = 128_000
TAIL = 50  # loop turns measured: the last 50 (451-500 of 500)
USER = "[user]"  # marks the scripted user's messages, so the fake model tells them apart
SYSTEM = SystemMessage(script.SYSTEM_PROMPT)
TOOLS: list[Any] = [script.lookup_record]
SLOPE_TARGET, ADDED_MS_TARGET, MEMORY_TARGET = 0.1, 1.0, 2.0


def max_output(window: int) -> int:
    return 1_024 if window <= 8_000 else 4_096


# --- text and conversations ------------------------------------------------------------------


@dataclass(slots=True)
class Texts:
    prose: list[str]  # questions, answers, summaries: English and Chinese prose
    results: list[str]  # tool results: prose, logs, source code

    def take(self, rng: random.Random, lo: int, hi: int, *, prose: bool = False) -> str:
        pool, size, out = self.prose if prose else self.results, rng.randint(lo, hi), ""
        while len(out) < size:
            doc = rng.choice(pool)
            start = rng.randrange(max(1, len(doc) - size))
            out += doc[start : start + size - len(out)]
        return out


def load_texts() -> Texts:
    chinese, english = corpus.chinese_prose(), corpus.english_prose()
    logs, source = corpus.system_logs(), corpus.python_source()
    prose = chinese + english
    return Texts(prose=prose, results=[t for t in (*prose, *logs, *source) if t])


class Chat:
    """A deterministic conversation: `history(n)`, then `open_turn()` / `answer()` forever."""

    def __init__(self, texts: Texts, seed: int = 17) -> None:
        self.texts, self.rng, self.turn, self.serial = texts, random.Random(seed), 0, 0

    def _id(self) -> str:
        self.serial += 1
        return f"msg-{self.serial:06d}"

    def open_turn(self) -> list[BaseMessage]:
        self.turn += 1
        rng, turn = self.rng, self.turn
        question = f"{USER} {turn}: {self.texts.take(rng, 40, 300, prose=True)}"
        calls = [
            {"name": script.TOOL_NAME, "args": {"record_id": f"R-{turn:05d}", "section": s}}
            | {"id": f"call-{turn}-{s}", "type": "tool_call"}
            for s in (("ledger", "notes") if rng.random() < 0.2 else ("summary",))
        ]
        results = [
            ToolMessage(self.texts.take(rng, 200, 2_000), tool_call_id=c["id"], id=self._id())
            for c in calls
        ]
        ai = AIMessage("", tool_calls=calls, id=self._id())
        return [HumanMessage(question, id=self._id()), ai, *results]

    def answer(self) -> AIMessage:
        return AIMessage(self.texts.take(self.rng, 50, 400, prose=True), id=self._id())

    def history(self, n: int) -> list[BaseMessage]:
        """About `n` messages of complete turns, then one open turn (ends on a tool result)."""
        out: list[BaseMessage] = []
        while len(out) < n - 4:
            out += [*self.open_turn(), self.answer()]
        return out + self.open_turn()


def fresh(blob: bytes, tag: str) -> list[BaseMessage]:
    """New message objects with new ids: nothing memoised on the originals applies."""
    messages = pickle.loads(blob)  # noqa: S301 - our own bytes
    for m in messages:
        m.id = f"{m.id}-{tag}"
    return messages


# --- counters, the fake provider, the contenders ---------------------------------------------


class CountingCounter:
    """`count_tokens`, counting its calls and the characters it is given."""

    def __init__(self) -> None:
        self.calls = 0
        self.chars = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        return count_tokens(text)


class Truth:
    """The provider's own count (cl100k, memoised per message id), for reported usage."""

    def __init__(self) -> None:
        try:
            self.counter: Callable[[str], int] = tiktoken_counter("cl100k_base")
        except Exception:  # noqa: BLE001 - no bundled tiktoken: langchain's estimate
            self.counter = lambda text: count_tokens_approximately([HumanMessage(text)])
        self.memo: dict[tuple[str | None, int], int] = {}
        self.fixed = self.counter(SYSTEM.text) + 60 * len(TOOLS)

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        total = self.fixed
        for m in messages:
            key = (m.id, len(m.text))
            if m.id is None or key not in self.memo:
                self.memo[key] = 4 + self.counter(m.text)
            total += self.memo[key]
        return total


TRUTH: list[Truth] = []


def truth() -> Truth:
    if not TRUTH:
        TRUTH.append(Truth())
    return TRUTH[0]


def reply(text: str, messages: Sequence[BaseMessage], **kwargs: Any) -> AIMessage:
    tokens = truth()(messages)
    usage = {"input_tokens": tokens, "output_tokens": 20, "total_tokens": tokens + 20}
    return AIMessage(text, usage_metadata=cast("Any", usage), **kwargs)


class Provider:
    """The handler of a direct `wrap_model_call`: answers "ok" with usage; times itself."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        start = time.perf_counter()
        response = ModelResponse(result=[reply("ok", request.messages)])
        self.seconds += time.perf_counter() - start
        return response


def summary_model(window: int, texts: Texts) -> GenericFakeChatModel:
    text = texts.take(random.Random("summary"), 800, 1_200, prose=True)
    replies = (AIMessage(text) for _ in itertools.count())
    profile = {"max_input_tokens": window, "max_output_tokens": max_output(window)}
    return GenericFakeChatModel(messages=replies, profile=cast("Any", profile))


@dataclass(slots=True)
class Sample:
    seconds: float
    fired: bool = False  # compacted / summarised / trimmed
    calls: int = 0
    chars: int = 0


class Track:
    """One contender's view of a conversation; `call()` times one model call."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self.messages = messages

    def append(self, new: Sequence[BaseMessage]) -> None:
        self.messages = [*self.messages, *new]  # a new list each step, as add_messages makes

    def call(self) -> Sample:
        raise NotImplementedError


class Ours(Track):
    def __init__(
        self, messages: list[BaseMessage], model: Any, counter: CountingCounter | None
    ) -> None:
        super().__init__(messages)
        extra = {} if counter is None else {"token_counter": counter}
        self.mw = ContextKitMiddleware.for_model(model, **extra)
        self.model, self.counter, self.stored = model, counter or CountingCounter(), {}

    def call(self) -> Sample:
        state = {**self.stored, "messages": self.messages}
        request = ModelRequest(
            model=self.model, messages=self.messages, system_message=SYSTEM, tools=TOOLS,
            state=cast("Any", state),
        )  # fmt: skip
        provider, calls, chars = Provider(), self.counter.calls, self.counter.chars
        start = time.perf_counter()
        response = self.mw.wrap_model_call(request, provider)
        seconds = time.perf_counter() - start - provider.seconds
        update: dict[str, Any] = {}
        if isinstance(response, ExtendedModelResponse) and response.command is not None:
            update = cast("dict[str, Any]", response.command.update or {})
        self.stored.update({k: v for k, v in update.items() if k != "messages"})
        fired = bool((update.get(LEDGER_KEY) or [{}])[-1].get("compacted"))
        return Sample(seconds, fired, self.counter.calls - calls, self.counter.chars - chars)


class Anchor(Track):
    def __init__(self, messages: list[BaseMessage], model: Any, window: int) -> None:
        super().__init__(messages)
        trigger = ("tokens", int(0.6 * window))
        self.mw = SummarizationMiddleware(model, trigger=trigger, keep=("messages", 10))

    def call(self) -> Sample:
        state = cast("Any", {"messages": self.messages})
        start = time.perf_counter()
        update = self.mw.before_model(state, cast("Any", None))
        seconds = time.perf_counter() - start
        if update is not None:  # what the checkpointer's add_messages would keep
            self.messages = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
        return Sample(seconds, update is not None)


class Trim(Track):
    def __init__(self, messages: list[BaseMessage], window: int) -> None:
        super().__init__(messages)
        self.max_tokens = window - max_output(window)

    def call(self) -> Sample:
        messages = [SYSTEM, *self.messages]
        start = time.perf_counter()
        kept = trim_messages(
            messages, max_tokens=self.max_tokens, token_counter=count_tokens_approximately,
            strategy="last", start_on="human", include_system=True,
        )  # fmt: skip
        return Sample(time.perf_counter() - start, len(kept) < len(messages))


KINDS = ("ours", "ours+counter", "anchor", "trim")


def make(kind: str, messages: list[BaseMessage], window: int, texts: Texts) -> Track:
    if kind == "anchor":
        return Anchor(messages, summary_model(window, texts), window)
    if kind == "trim":
        return Trim(messages, window)
    counter = CountingCounter() if kind == "ours+counter" else None
    return Ours(messages, summary_model(window, texts), counter)


def peak_bytes(track: Track) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        track.call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- part 1: histories ---------------------------------------------------------------------


@dataclass(slots=True)
class Case:
    n: int
    window: int
    size: int  # len(pickle.dumps(history))
    cold: dict[str, list[Sample]] = field(default_factory=dict)
    steady: dict[str, list[Sample]] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)  # "<kind> cold" / "<kind> steady"


def run_case(n: int, window: int, texts: Texts, reps: int) -> Case:
    chat = Chat(texts)
    base = chat.history(n)
    blob = pickle.dumps(base)
    case = Case(n, window, len(blob), {k: [] for k in KINDS}, {k: [] for k in KINDS})
    for rep in range(reps):  # interleaved: one cold call of each contender per round
        for kind in KINDS:
            track = make(kind, fresh(blob, f"{kind}{rep}"), window, texts)
            gc.collect()
            case.cold[kind].append(track.call())
    for kind in ("ours", "anchor", "trim"):
        case.peak[f"{kind} cold"] = peak_bytes(make(kind, fresh(blob, "mem"), window, texts))
    tracks = {kind: make(kind, list(base), window, texts) for kind in KINDS}
    for track in tracks.values():
        track.call()  # warm-up
    for step in range(STEPS + 1):
        new = [chat.answer(), *chat.open_turn()]
        for kind, track in tracks.items():
            track.append(new)
            if step == STEPS:  # one more step, under tracemalloc
                if kind != "ours+counter":
                    case.peak[f"{kind} steady"] = peak_bytes(track)
                continue
            gc.collect()
            case.steady[kind].append(track.call())
    return case


def ms(samples: Sequence[Sample]) -> float:
    return statistics.median(s.seconds for s in samples) * 1e3


def fired(samples: Sequence[Sample]) -> str:
    return f"{sum(s.fired for s in samples)}/{len(samples)}"


def per_call(samples: Sequence[Sample], name: str) -> float:
    return statistics.median(getattr(s, name) for s in samples)


def mb(size: float) -> str:
    return f"{size / 1e6:.1f}"


def table(title: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [head, *rows]) + 2 for i in range(len(head))]
    print(f"\n{title}")
    for row in [head, *rows]:
        print("".join(f"{cell:>{w}}" for cell, w in zip(row, widths, strict=True)))


def report_cases(cases: Sequence[Case]) -> None:
    head = ("window", "history", "ours ms", "+counter ms", "anchor ms", "fired", "trim ms",
            "ours/anchor", "ours/trim", "calls", "chars", "ours compacted")  # fmt: skip
    for phase in ("cold", "steady"):
        rows = []
        for c in cases:
            got = getattr(c, phase)
            o, a, t = ms(got["ours"]), ms(got["anchor"]), ms(got["trim"])
            counted = got["ours+counter"]
            rows.append((
                f"{c.window:,}", f"{c.n:,}", f"{o:.2f}", f"{ms(counted):.2f}", f"{a:.2f}",
                fired(got["anchor"]), f"{t:.2f}", f"{o / a:.2f}x", f"{o / t:.2f}x",
                f"{per_call(counted, 'calls'):,.0f}", f"{per_call(counted, 'chars'):,.0f}",
                fired(got["ours"]),
            ))  # fmt: skip
        what = "first call, fresh instance" if phase == "cold" else f"median of {STEPS} steps"
        table(f"{phase} ({what}; calls/chars: ours' counter, median per call)", head, rows)
    head = ("window", "history", "pickled MB", "ours cold", "ours steady", "anchor cold",
            "anchor steady", "trim cold", "ours cold / history", "ours steady / history")  # fmt: skip
    rows = [
        (f"{c.window:,}", f"{c.n:,}", mb(c.size),
         *(mb(c.peak[f"{k} {p}"]) for k in ("ours", "anchor") for p in ("cold", "steady")),
         mb(c.peak["trim cold"]), f"{c.peak['ours cold'] / c.size:.2f}x",
         f"{c.peak['ours steady'] / c.size:.2f}x")
        for c in cases
    ]  # fmt: skip
    table("peak memory of one call, MB (tracemalloc)", head, rows)


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-9)) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum(
        (a - mx) ** 2 for a in lx
    )


def slopes(cases: Sequence[Case]) -> dict[tuple[int, str], float]:
    out: dict[tuple[int, str], float] = {}
    for window in sorted({c.window for c in cases}):
        mine = sorted((c for c in cases if c.window == window), key=lambda c: c.n)
        if len(mine) < 2:
            continue
        xs = [c.n for c in mine]
        for name in ("calls", "chars"):
            out[window, name] = slope(xs, [per_call(c.steady["ours+counter"], name) for c in mine])
        out[window, "time"] = slope(xs, [ms(c.steady["ours"]) for c in mine])
    return out


# --- part 2: the agent loop ----------------------------------------------------------------


class TimedKit(ContextKitMiddleware):
    """The untuned middleware, timing its own share of each model call."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turn = 0
        self.samples: list[tuple[int, Sample]] = []

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        inner = [0.0]

        def timed(req: ModelRequest[Any]) -> ModelResponse[Any]:
            start = time.perf_counter()
            try:
                return handler(req)
            finally:
                inner[0] += time.perf_counter() - start

        counter = self.token_counter
        calls, chars = getattr(counter, "calls", 0), getattr(counter, "chars", 0)
        start = time.perf_counter()
        response = super().wrap_model_call(request, timed)
        seconds = time.perf_counter() - start - inner[0]
        update = response.command.update if response.command is not None else {}
        done = bool((cast("dict[str, Any]", update).get(LEDGER_KEY) or [{}])[-1].get("compacted"))
        calls, chars = getattr(counter, "calls", 0) - calls, getattr(counter, "chars", 0) - chars
        self.samples.append((self.turn, Sample(seconds, done, calls, chars)))
        return response


def loop_model(texts: Texts) -> ScriptedChatModel:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return reply(texts.take(random.Random(last.tool_call_id), 50, 300), messages)
        if isinstance(last, HumanMessage) and last.text.startswith(USER):
            turn = last.text.split(":", 1)[0].split()[-1]
            call = {"name": "lookup", "args": {"record_id": f"R-{turn}"}, "id": f"call-{turn}"}
            return reply("", messages, tool_calls=[call])
        return reply(texts.take(random.Random("summary"), 800, 1_200, prose=True), messages)

    return ScriptedChatModel(
        respond=respond, context_window=LOOP_WINDOW, max_output_tokens=max_output(LOOP_WINDOW)
    )


@dataclass(slots=True)
class Loop:
    label: str
    seconds: float
    turn_ms: float  # median invoke time per turn over the tail
    samples: list[Sample]  # the middleware's samples over the tail (empty without it)


def run_loop(label: str, turns: int, texts: Texts) -> Loop:
    @tool("lookup")
    def lookup(record_id: str) -> str:
        """Look a record up by its id."""
        return texts.take(random.Random(record_id), 500, 1_500)

    model = loop_model(texts)
    counter = {"token_counter": CountingCounter()} if "counter" in label else {}
    mw = None if label == "no middleware" else TimedKit.for_model(model, **counter)
    agent = create_agent(
        model, [lookup], system_prompt=script.SYSTEM_PROMPT, middleware=[mw] if mw else [],
        checkpointer=InMemorySaver() if "checkpointer" in label else None,
    )  # fmt: skip
    config: Any = {"configurable": {"thread_id": label}}
    rng, history, times = random.Random(500), [], []
    start = time.perf_counter()
    for turn in range(1, turns + 1):
        question = HumanMessage(f"{USER} {turn}: {texts.take(rng, 40, 300, prose=True)}")
        if isinstance(mw, TimedKit):
            mw.turn = turn
        began = time.perf_counter()
        if "checkpointer" in label:
            agent.invoke({"messages": [question]}, config)
        else:
            history = agent.invoke({"messages": [*history, question]})["messages"]
        times.append(time.perf_counter() - began)
    first = turns - min(TAIL, turns // 2) + 1
    tail = [s for t, s in mw.samples if t >= first] if isinstance(mw, TimedKit) else []
    return Loop(label, time.perf_counter() - start, statistics.median(times[first - 1 :]) * 1e3,
                tail)  # fmt: skip


def report_loops(loops: Sequence[Loop], turns: int) -> None:
    first = turns - min(TAIL, turns // 2) + 1
    rows = []
    for r in loops:
        xs = sorted(s.seconds * 1e3 for s in r.samples) or [math.nan]
        rows.append((
            r.label, f"{r.seconds:.1f}", f"{r.turn_ms:.2f}", f"{statistics.median(xs):.3f}",
            f"{statistics.fmean(xs):.3f}", f"{xs[int(0.9 * (len(xs) - 1))]:.3f}", f"{xs[-1]:.3f}",
            f"{sum(s.fired for s in r.samples)}",
            f"{statistics.fmean(s.calls for s in r.samples):,.0f}" if r.samples else "-",
            f"{statistics.fmean(s.chars for s in r.samples):,.0f}" if r.samples else "-",
        ))  # fmt: skip
    head = ("run", "total s", "invoke ms/turn", "added ms p50", "mean", "p90", "max",
            "compactions", "calls/call", "chars/call")  # fmt: skip
    table(f"create_agent loop, {turns} turns at {LOOP_WINDOW:,}; turns {first}-{turns}", head, rows)


# --- targets and main ----------------------------------------------------------------------


def check(cases: Sequence[Case], loops: Sequence[Loop]) -> list[tuple[bool, str]]:
    out: list[tuple[bool, str]] = []
    for (window, name), value in slopes(cases).items():
        if name != "time":
            out.append((value <= SLOPE_TARGET, f"steady slope of {name}/call at {window:,}: "
                        f"{value:.3f} (target <= {SLOPE_TARGET})"))  # fmt: skip
    for r in loops:
        if r.samples and "counter" not in r.label:
            added = statistics.median(s.seconds for s in r.samples) * 1e3
            out.append((added <= ADDED_MS_TARGET, f"loop {r.label}: middleware adds {added:.3f}"
                        f" ms/call, median (target <= {ADDED_MS_TARGET})"))  # fmt: skip
    for c in cases:
        if c.n == max(SIZES):
            o, a = ms(c.cold["ours"]), ms(c.cold["anchor"])
            note = "" if all(s.fired for s in c.cold["anchor"]) else " (the anchor did not fire)"
            out.append((o <= a, f"cold {c.n:,} msgs at {c.window:,}: ours {o:.1f} ms vs the "
                        f"anchor's firing call {a:.1f} ms{note}"))  # fmt: skip
        for phase in ("cold", "steady"):
            ratio = c.peak[f"ours {phase}"] / c.size
            out.append((ratio <= MEMORY_TARGET, f"peak memory, {phase} call, {c.n:,} msgs at "
                        f"{c.window:,}: {ratio:.2f}x the history (target <= {MEMORY_TARGET}x)"))  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 msgs, 100 turns")
    parser.add_argument("--sizes", type=int, nargs="+", help=f"default {SIZES}")
    parser.add_argument("--turns", type=int, help=f"loop turns (default {TURNS}; quick 100)")
    parser.add_argument("--reps", type=int, default=3, help="cold repetitions (default 3)")
    args = parser.parse_args()
    sizes = args.sizes or (SIZES[:2] if args.quick else SIZES)
    turns = args.turns or (100 if args.quick else TURNS)
    began = time.perf_counter()
    texts = load_texts()
    cases = [run_case(n, w, texts, args.reps) for w in WINDOWS for n in sizes]
    report_cases(cases)
    table("steady-state log-log slope vs history length (ours)", ("window", "metric", "slope"),
          [(f"{w:,}", m, f"{v:.3f}") for (w, m), v in slopes(cases).items()])  # fmt: skip
    labels = ("ours, stateless", "ours, checkpointer", "ours+counter, checkpointer",
              "no middleware")  # fmt: skip
    loops = [run_loop(label, turns, texts) for label in labels]
    report_loops(loops, turns)
    if turns != TURNS:
        print(f"(the loop ran {turns} turns, not {TURNS}: its target is about the last 50)")
    results = check(cases, loops)
    print()
    for ok, text in results:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    failed = sum(not ok for ok, _ in results)
    print(f"\n{failed} of {len(results)} targets missed; {time.perf_counter() - began:.0f} s")
    if args.quick:
        print("(--quick: a smoke run, targets are not enforced)")
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
