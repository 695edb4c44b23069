"""Issue 17, an incremental ledger: what `ContextKitMiddleware.for_model(model)` costs per call.

    python bench/bench_ledger.py          # 100 / 1,000 / 10,000 messages, 500-turn loop (~5 min)
    python bench/bench_ledger.py --quick  # 100 / 1,000 messages, 100 turns; never fails

In one process, no LLM: ours untuned, and again with a counting `token_counter=` around
`count_tokens` (counter calls, characters; it loses `count_each`'s batch path, so its time
is shown apart); the anchor, `SummarizationMiddleware(model, trigger=("tokens", 0.6 *
window), keep=("messages", 10))` (`before_model`, a fake summariser); `trim_messages(...,
count_tokens_approximately, strategy="last", start_on="human", include_system=True)`.

1. Histories of about 100, 1,000, 10,000 messages (questions; tool calls, one in five two
   parallel ones; results of 200-2,000 characters of Chinese and English prose, logs and
   Python source that `corpus.py` reads from this machine; answers; all with ids) at 8k
   and 128k. *cold*: the first call of a fresh instance on a history of the same shape whose
   content this process has not seen (counts are memoised by content); *steady*: after
   a warm-up call, 10 steps each append a turn and time the next call, state kept as a
   checkpointer would (ours: its keys beside the whole list; the anchor: its summarised
   list). Ours is `wrap_model_call` minus the fake provider (it reports cl100k usage).
   Peak memory of one call (tracemalloc) is set beside the history's own size: what its
   message objects take in memory (tracemalloc over building them), and, for scale, its
   pickle (about 2.6 times smaller: text without the objects around it).
2. `create_agent` at 128k (`ScriptedChatModel`: a tool call, then an answer; results of
   500-1,500 characters), stateless (the caller re-sends the list) and with
   `InMemorySaver`, each also without middleware: the middleware's own time per model call
   (inside `wrap_model_call` minus inside the handler) over the last 50 turns.
3. Log-log slopes of ours' steady counter calls, characters and time per call vs length.

4. (issue 32) Cold starts: summariser calls and characters of a fresh `create_agent` worker
   (stateless) on a 2,000-message thread at 8k, and of three workers one after another on
   one `InMemoryStore`; a cold `summaries="extractive"` call on 10,000 messages beside the
   anchor's firing call on the same history (and, shown, the same call in a process that has
   counted every text already: what counting the aged-out part costs); the middleware's
   steady time per model call (20 turns after a seeded 2,000- or 10,000-message history) as
   a share of the `create_agent` turn without the middleware, stateless and with
   `InMemorySaver`. Both
   sides of that share are CPU time, not wall time (on a shared machine another process's
   work would land on either side): the turn's is the process's (`time.process_time`, every
   thread: LangGraph writes a step's checkpoint in the background while the next node
   runs), the middleware's is its own thread's (`time.thread_time`), so that the saver's
   concurrent writes are not charged to it. The loops with and without the middleware take
   turns in blocks of five (the first of each block, after the other loop's, not measured),
   so both sides see the same load.

Targets (exit 1 on a FAIL, not with --quick): steady slopes of counter calls and characters
per call <= 0.1 at each window; peak memory of a cold or steady call of ours <= 2x the
history in memory; a fresh worker's cold call <= 2 summariser calls; workers 2 and 3 on a
shared store 0; a cold extractive call <= 5x the anchor's firing call; the steady time per
call <= 5% of the create_agent turn at 2,000 and 10,000 messages, stateless and
checkpointed. Issue 32 made the per-call target relative to the framework (it replaces
"<= 1 ms") and a cold call bounded instead of as fast as the anchor (which reads only its
last 4,000 tokens): the part 2 loop and the model-summary cold rows are shown, not
targets.
"""

from __future__ import annotations

import argparse
import functools
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
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately as approximately, trim_messages
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _agent_script as script
import corpus

from langchain_contextkit import count_each, count_tokens, tiktoken_counter
from langchain_contextkit.agent.middleware import LEDGER_KEY, ContextKitMiddleware
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens.count import message_token_costs

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain.agents.middleware.types import ExtendedModelResponse
    from langchain_core.messages import BaseMessage
    from langchain_core.outputs import ChatResult

SIZES, WINDOWS, TURNS, STEPS = (100, 1_000, 10_000), (8_000, 128_000), 500, 10
LOOP_WINDOW, TAIL = 128_000, 50  # the loop's window; its last 50 turns are measured
USER = "[user]"  # starts every user message: the fake model tells them from summary requests
SYSTEM = SystemMessage(script.SYSTEM_PROMPT)
TOOLS: list[Any] = [script.lookup_record]
SLOPE_TARGET, MEMORY_TARGET = 0.1, 2.0
KINDS = ("ours", "ours+counter", "anchor", "trim")
LOOPS: tuple[str, ...] = ("ours, stateless", "ours, checkpointer", "ours+counter, checkpointer")
LOOPS += ("no middleware, stateless", "no middleware, checkpointer")
TRIM: Any = {"strategy": "last", "start_on": "human", "include_system": True}
PROSE: list[str] = []  # questions, answers, summaries: Chinese and English prose
RESULTS: list[str] = []  # tool results: prose, system logs, Python source


def max_output(window: int) -> int:
    return 1_024 if window <= 8_000 else 4_096


# --- text, conversations, the fake provider ------------------------------------------------


def load_texts() -> None:
    PROSE[:] = corpus.chinese_prose() + corpus.english_prose()
    RESULTS[:] = [*PROSE, *corpus.system_logs(), *corpus.python_source()]


def take(rng: random.Random, lo: int, hi: int, pool: Sequence[str] = RESULTS) -> str:
    size, out = rng.randint(lo, hi), ""
    while len(out) < size:
        doc = rng.choice(pool)
        start = rng.randrange(max(1, len(doc) - size))
        out += doc[start : start + size - len(out)]
    return out


class Chat:
    """A deterministic conversation: `history(n)`, then `open_turn()` and `answer()`."""

    def __init__(self, seed: int | str = 17) -> None:
        self.rng, self.turn, self.serial = random.Random(seed), 0, 0

    def _id(self) -> str:
        self.serial += 1
        return f"msg-{self.serial:06d}"

    def open_turn(self) -> list[BaseMessage]:
        """A question, one or two parallel tool calls, their results."""
        self.turn += 1
        turn, rng = self.turn, self.rng
        human = HumanMessage(f"{USER} {turn}: {take(rng, 40, 300, PROSE)}", id=self._id())
        sections = ("ledger", "notes") if rng.random() < 0.2 else ("summary",)
        args = [{"record_id": f"R-{turn:05d}", "section": s} for s in sections]
        calls = [
            {"name": script.TOOL_NAME, "args": a, "id": f"call-{turn}-{i}", "type": "tool_call"}
            for i, a in enumerate(args)
        ]
        ai = AIMessage("", tool_calls=calls, id=self._id())
        results = [ToolMessage(take(rng, 200, 2_000), tool_call_id=c["id"]) for c in calls]
        for result in results:
            result.id = self._id()
        return [human, ai, *results]

    def answer(self) -> AIMessage:
        return AIMessage(take(self.rng, 50, 400, PROSE), id=self._id())

    def history(self, n: int) -> list[BaseMessage]:
        """About `n` messages of whole turns, then an open one (ending on a tool result)."""
        out: list[BaseMessage] = []
        while len(out) < n - 4:
            out += [*self.open_turn(), self.answer()]
        return out + self.open_turn()


def fresh(blob: bytes, tag: str) -> list[BaseMessage]:
    """New message objects with new ids: nothing memoised on the originals applies."""
    messages: list[BaseMessage] = pickle.loads(blob)  # noqa: S301 - our own bytes
    for m in messages:
        m.id = f"{m.id}-{tag}"
    return messages


class CountingCounter:
    """`count_tokens`, counting its calls and the characters it is given."""

    def __init__(self) -> None:
        self.calls = self.chars = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        return count_tokens(text)


@functools.cache
def cl100k() -> Callable[[str], int]:
    return tiktoken_counter("cl100k_base")


_TRUTH: dict[tuple[str | None, int], int] = {}


def provider_tokens(messages: Sequence[BaseMessage]) -> int:
    """What a provider would report: cl100k, memoised per message id (it is not timed)."""
    total = cl100k()(SYSTEM.text) + 60 * len(TOOLS)
    for m in messages:
        key = (m.id, len(m.text))
        if m.id is None or key not in _TRUTH:
            _TRUTH[key] = 4 + cl100k()(m.text)
        total += _TRUTH[key]
    return total


def reply(text: str, messages: Sequence[BaseMessage], **kwargs: Any) -> AIMessage:
    tokens = provider_tokens(messages)
    usage = {"input_tokens": tokens, "output_tokens": 20, "total_tokens": tokens + 20}
    return AIMessage(text, usage_metadata=cast("Any", usage), **kwargs)


def provider(request: ModelRequest[Any]) -> ModelResponse[Any]:
    return ModelResponse(result=[reply("ok", request.messages)])


def summary_text() -> str:
    return take(random.Random("summary"), 800, 1_200, PROSE)


class Summariser(GenericFakeChatModel):
    """Answers every request with the same summary, and counts the requests."""

    calls: int = 0

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        return super()._generate(*args, **kwargs)


def summary_model(window: int) -> Summariser:
    profile = {"max_input_tokens": window, "max_output_tokens": max_output(window)}
    replies = (AIMessage(summary_text()) for _ in itertools.count())
    return Summariser(messages=replies, profile=cast("Any", profile))


# --- the contenders: each times one call on a message list, returns what it keeps -----------


@dataclass(slots=True)
class Sample:
    seconds: float
    fired: bool = False  # compacted / summarised / trimmed
    calls: int = 0
    chars: int = 0
    llm: int = 0  # summariser calls


class TimedKit(ContextKitMiddleware):
    """The middleware as `for_model` builds it, timing its own share of each model call."""

    clock: Callable[[], float] = staticmethod(time.perf_counter)  # part 4: its thread's CPU

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turn, self.samples = 0, cast("list[tuple[int, Sample]]", [])
        self.update: dict[str, Any] = {}

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        inner = [0.0]

        def timed(req: ModelRequest[Any]) -> ModelResponse[Any]:
            start = self.clock()
            try:
                return handler(req)
            finally:
                inner[0] += self.clock() - start

        counter = self.token_counter
        calls, chars = getattr(counter, "calls", 0), getattr(counter, "chars", 0)
        start = self.clock()
        response = super().wrap_model_call(request, timed)
        seconds = self.clock() - start - inner[0]
        self.update = cast("dict[str, Any]", response.command.update if response.command else {})
        done = bool((self.update.get(LEDGER_KEY) or [{}])[-1].get("compacted"))
        calls, chars = getattr(counter, "calls", 0) - calls, getattr(counter, "chars", 0) - chars
        self.samples.append((self.turn, Sample(seconds, done, calls, chars)))
        return response


def timed_kit(model: Any, *, counted: bool) -> TimedKit:
    """`TimedKit.for_model(model)`, with a counting `token_counter=` when `counted`."""
    extra: dict[str, Any] = {"token_counter": CountingCounter()} if counted else {}
    return cast("TimedKit", TimedKit.for_model(model, **extra))


if TYPE_CHECKING:
    Call = Callable[[list[BaseMessage]], tuple[Sample, list[BaseMessage]]]


def ours(window: int, *, counted: bool) -> Call:
    model, stored = summary_model(window), cast("dict[str, Any]", {})
    mw = timed_kit(model, counted=counted)

    def call(messages: list[BaseMessage]) -> tuple[Sample, list[BaseMessage]]:
        state, before = cast("Any", {**stored, "messages": messages}), model.calls
        request = ModelRequest(model=model, messages=cast("Any", messages), system_message=SYSTEM)
        mw.wrap_model_call(request.override(tools=TOOLS, state=state), provider)
        stored.update({k: v for k, v in mw.update.items() if k != "messages"})
        sample = mw.samples[-1][1]
        sample.llm = model.calls - before
        return sample, messages

    return call


def anchor(window: int) -> Call:
    model = summary_model(window)
    mw = SummarizationMiddleware(
        model, trigger=("tokens", int(0.6 * window)), keep=("messages", 10)
    )

    def call(messages: list[BaseMessage]) -> tuple[Sample, list[BaseMessage]]:
        start, before = time.perf_counter(), model.calls
        update = mw.before_model(cast("Any", {"messages": messages}), cast("Any", None))
        sample = Sample(time.perf_counter() - start, update is not None, llm=model.calls - before)
        if update is None:
            return sample, messages
        # What the checkpointer's add_messages keeps after RemoveMessage(REMOVE_ALL_MESSAGES).
        return sample, [m for m in update["messages"] if m.type != "remove"]

    return call


def trim(window: int) -> Call:
    def call(messages: list[BaseMessage]) -> tuple[Sample, list[BaseMessage]]:
        request, budget = [SYSTEM, *messages], window - max_output(window)
        start = time.perf_counter()
        kept = trim_messages(request, max_tokens=budget, token_counter=approximately, **TRIM)
        return Sample(time.perf_counter() - start, len(kept) < len(request)), messages

    return call


def make(kind: str, window: int) -> Call:
    if kind in ("ours", "ours+counter"):
        return ours(window, counted=kind == "ours+counter")
    return anchor(window) if kind == "anchor" else trim(window)


def memory_size(blob: bytes) -> int:
    """Bytes the history's message objects take once built (what a caller holds)."""
    gc.collect()
    tracemalloc.start()
    history = pickle.loads(blob)  # noqa: S301 - our own bytes
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del history
    return size


def peak_bytes(call: Call, messages: list[BaseMessage]) -> int:
    gc.collect()
    tracemalloc.start()
    call(messages)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


# --- part 1: histories -----------------------------------------------------------------------


@dataclass(slots=True)
class Case:
    n: int
    window: int
    size: int  # what the history's objects take in memory (tracemalloc)
    pickled: int  # len(pickle.dumps(history))
    tokens: int  # the history's cl100k tokens
    samples: dict[str, list[Sample]] = field(default_factory=dict)  # "<kind> <phase>"
    peak: dict[str, int] = field(default_factory=dict)  # "<kind> <phase>"


def run_case(n: int, window: int, reps: int) -> Case:
    chat = Chat()
    base = chat.history(n)
    blob = pickle.dumps(base)
    case = Case(n, window, memory_size(blob), len(blob), provider_tokens(base))
    # Cold: content never seen in this process (the count memo is keyed by content), one
    # history per round, each contender its own copy; rounds interleave the contenders.
    for rep in [*range(reps), "mem"]:
        seed = f"{n}/{window}/{rep}"
        cold = pickle.dumps(Chat(seed).history(n))
        for kind in KINDS:
            call, messages = make(kind, window), fresh(cold, f"{seed}/{kind}")
            gc.collect()
            if rep != "mem":
                case.samples.setdefault(f"{kind} cold", []).append(call(messages)[0])
            elif kind != "ours+counter":
                case.peak[f"{kind} cold"] = peak_bytes(call, messages)
    calls = {kind: make(kind, window) for kind in KINDS}
    kept = {kind: calls[kind](list(base))[1] for kind in KINDS}  # the warm-up call
    for step in range(STEPS + 1):
        new = [chat.answer(), *chat.open_turn()]
        for kind, call in calls.items():
            kept[kind] = [*kept[kind], *new]  # a new list each step, as add_messages makes
            if step < STEPS:
                gc.collect()
                sample, kept[kind] = call(kept[kind])
                case.samples.setdefault(f"{kind} steady", []).append(sample)
            elif kind != "ours+counter":  # one more step, under tracemalloc
                case.peak[f"{kind} steady"] = peak_bytes(call, kept[kind])
    return case


def med(samples: Sequence[Sample], name: str = "seconds") -> float:
    values = [float(getattr(s, name)) for s in samples]
    return statistics.median(values) * (1e3 if name == "seconds" else 1)


def fired(samples: Sequence[Sample]) -> str:
    return f"{sum(s.fired for s in samples)}/{len(samples)}"


def table(title: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) + 2 for i in range(len(head))]
    print(f"\n{title}")
    for row in [head, *rows]:
        print("".join(f"{cell:>{w}}" for cell, w in zip(row, widths, strict=True)))


def case_row(c: Case, phase: str) -> tuple[str, ...]:
    got = {kind: c.samples[f"{kind} {phase}"] for kind in KINDS}
    o, a, t = med(got["ours"]), med(got["anchor"]), med(got["trim"])
    counted = got["ours+counter"]
    return (
        *(f"{c.window:,}", f"{c.n:,}", f"{c.tokens:,}", f"{o:.2f}", f"{med(counted):.2f}"),
        *(f"{a:.2f}", fired(got["anchor"]), f"{t:.2f}", f"{o / a:.1f}x", f"{o / t:.1f}x"),
        *(f"{med(counted, 'calls'):,.0f}", f"{med(counted, 'chars'):,.0f}", fired(got["ours"])),
        "/".join(str(sum(s.llm for s in got[k])) for k in ("ours", "anchor")),
        *(f"{c.peak[f'{k} {phase}'] / 1e6:.2f}" for k in ("ours", "anchor")),
        *(f"{c.size / 1e6:.2f}", f"{c.pickled / 1e6:.2f}"),
        f"{c.peak[f'ours {phase}'] / c.size:.2f}x / {c.peak[f'ours {phase}'] / c.pickled:.2f}x",
    )


def report_cases(cases: Sequence[Case]) -> None:
    head = (
        *("window", "history", "tokens", "ours ms", "+counter ms", "anchor ms", "fired"),
        *("trim ms", "ours/anchor", "ours/trim", "calls", "chars", "compacted", "LLM calls"),
        *("peak MB", "anchor MB", "history MB", "pickled MB", "peak/history, /pickled"),
    )
    for phase, what in (("cold", "first call, unseen content"), ("steady", f"{STEPS} steps")):
        title = f"{phase} ({what}): median ms; ours' counter calls, characters per call (median)"
        title += "; summariser calls in all, ours/anchor"
        table(title, head, [case_row(c, phase) for c in cases])


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    logs = [math.log(x) for x in xs], [math.log(max(y, 1e-9)) for y in ys]
    return statistics.linear_regression(*logs).slope


def slopes(cases: Sequence[Case]) -> dict[tuple[int, str], float]:
    out: dict[tuple[int, str], float] = {}
    for window in WINDOWS:
        mine = sorted((c for c in cases if c.window == window), key=lambda c: c.n)
        for name in ("calls", "chars", "seconds") if len(mine) > 1 else ():
            kind = "ours steady" if name == "seconds" else "ours+counter steady"
            out[window, name] = slope(
                [c.n for c in mine], [med(c.samples[kind], name) for c in mine]
            )
    return out


# --- part 2: the agent loop ------------------------------------------------------------------


def loop_model() -> ScriptedChatModel:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return reply(take(random.Random(last.tool_call_id), 50, 300), messages)
        if isinstance(last, HumanMessage) and last.text.startswith(USER):
            turn = last.text.split(":", 1)[0].split()[-1]
            call = {"name": "lookup", "args": {"record_id": f"R-{turn}"}, "id": f"call-{turn}"}
            return reply("", messages, tool_calls=[call])
        return reply(summary_text(), messages)  # a summary request

    limits = {"context_window": LOOP_WINDOW, "max_output_tokens": max_output(LOOP_WINDOW)}
    return ScriptedChatModel(respond=respond, **limits)


@tool
def lookup(record_id: str) -> str:
    """Look a record up by its id."""
    return take(random.Random(record_id), 500, 1_500)


@dataclass(slots=True)
class Loop:
    label: str
    seconds: float
    turn_ms: float  # median invoke time per turn over the tail
    tail: list[Sample]  # the middleware's samples over the tail (none without it)
    compactions: int  # over the whole run


def run_loop(label: str, turns: int) -> Loop:
    model, stateful = loop_model(), "checkpointer" in label
    mw = None if label.startswith("no middleware") else timed_kit(model, counted="counter" in label)
    saver, middleware = InMemorySaver() if stateful else None, [mw] if mw else []
    agent = create_agent(
        model, [lookup], system_prompt=SYSTEM.text, middleware=middleware, checkpointer=saver
    )
    config: Any = {"configurable": {"thread_id": label}}
    history: list[BaseMessage] = []
    rng, times, start = random.Random(500), [], time.perf_counter()
    for turn in range(1, turns + 1):
        question = HumanMessage(f"{USER} {turn}: {take(rng, 40, 300, PROSE)}")
        if mw is not None:
            mw.turn = turn
        began = time.perf_counter()
        if stateful:
            agent.invoke(cast("Any", {"messages": [question]}), config)
        else:
            history = agent.invoke(cast("Any", {"messages": [*history, question]}))["messages"]
        times.append(time.perf_counter() - began)
        model.requests.clear()  # it records every request: 1M live messages by turn 500
    first, every = turns - min(TAIL, turns // 2) + 1, mw.samples if mw is not None else []
    tail = [s for t, s in every if t >= first]
    turn_ms = statistics.median(times[first - 1 :]) * 1e3
    return Loop(label, time.perf_counter() - start, turn_ms, tail, sum(s.fired for _, s in every))


def loop_row(r: Loop) -> tuple[str, ...]:
    xs = sorted(s.seconds * 1e3 for s in r.tail) or [math.nan]
    spread = (statistics.median(xs), statistics.fmean(xs), xs[int(0.9 * (len(xs) - 1))], xs[-1])
    counts = ["-", "-"]
    if "counter" in r.label:
        counts = [
            f"{statistics.fmean(getattr(s, n) for s in r.tail):,.0f}" for n in ("calls", "chars")
        ]
    return (
        *(r.label, f"{r.seconds:.1f}", f"{r.turn_ms:.2f}", *(f"{x:.3f}" for x in spread)),
        *(f"{sum(s.fired for s in r.tail)}/{r.compactions}", *counts),
    )


def report_loops(loops: Sequence[Loop], turns: int) -> None:
    head = (
        *("run", "total s", "invoke ms/turn", "added ms p50", "mean", "p90", "max"),
        *("compactions tail/all", "calls/call", "chars/call"),
    )
    first = turns - min(TAIL, turns // 2) + 1
    title = f"create_agent loop, {turns} turns at {LOOP_WINDOW:,}; turns {first}-{turns}"
    table(title, head, [loop_row(r) for r in loops])


# --- part 4: cold starts, shared recaps, the steady share of a turn (issue 32) ---------------

COLD_N, COLD_WINDOW, COLD_CALLS_TARGET = 2_000, 8_000, 2
EXTRACTIVE_N, EXTRACTIVE_RATIO_TARGET = 10_000, 5.0
SHARE_SIZES, SHARE_TURNS, SHARE_TARGET = (2_000, 10_000), 20, 0.05
SHARE_BLOCK = 5  # turns a loop runs before the other takes over; the first is not measured


def question(turn: int) -> HumanMessage:
    return HumanMessage(f"{USER} {turn}: {take(random.Random(turn), 40, 300, PROSE)}")


def counting_model(window: int) -> tuple[ScriptedChatModel, list[int]]:
    """`loop_model` at `window`, counting the summary requests it answers."""
    count, inner = [0], loop_model()

    def respond(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if not isinstance(last, ToolMessage) and not (
            isinstance(last, HumanMessage) and last.text.startswith(USER)
        ):
            count[0] += 1
        return cast("Any", inner).respond(messages)

    limits = {"context_window": window, "max_output_tokens": max_output(window)}
    return ScriptedChatModel(respond=respond, **limits), count


@dataclass(slots=True)
class Cold:
    calls: list[int]  # summariser calls of each worker, in order
    chars: list[int]  # characters those calls sent (the ledger's summarizer_chars)
    ms: list[float]  # each worker's invoke, wall time


def run_workers(n: int, window: int, workers: int, *, shared: bool) -> Cold:
    """Fresh `create_agent` workers, one after another, on one stateless `n`-message thread.

    `shared`: one `InMemoryStore` for all (`create_agent(store=...)`); else none.
    """
    history = [*Chat(f"workers/{n}").history(n), question(n)]
    store = InMemoryStore() if shared else None
    out = Cold([], [], [])
    for _ in range(workers):
        model, count = counting_model(window)
        mw = ContextKitMiddleware.for_model(model)
        agent = create_agent(model, [lookup], middleware=[mw], store=store)
        began = time.perf_counter()
        state = agent.invoke(cast("Any", {"messages": list(history)}))
        out.ms.append((time.perf_counter() - began) * 1e3)
        first = next(x for x in state[LEDGER_KEY] if x["call"] == 1)
        out.calls.append(count[0])
        out.chars.append(int(first.get("summarizer_chars", 0)))
    return out


def cold_extractive(
    n: int, window: int, reps: int, *, counts_known: bool = False
) -> tuple[list[float], list[float], bool]:
    """Cold `summaries="extractive"` calls and the anchor's firing calls, interleaved (ms).

    `counts_known`: the process has counted every text of the history already (from a copy),
    all else cold: what the call would cost if it never counted the part that ages out.
    """
    ours_ms, anchor_ms, fired_all = [], [], True
    for rep in range(reps):
        blob = pickle.dumps(Chat(f"extractive/{rep}{'/known' if counts_known else ''}").history(n))
        if counts_known:
            copy = fresh(blob, "counted")
            message_token_costs(copy)
            count_each([m.content for m in copy if isinstance(m.content, str)])
        model = summary_model(window)
        mw = cast("TimedKit", TimedKit.for_model(model, summaries="extractive"))
        messages = fresh(blob, f"x{rep}")
        request = ModelRequest(model=model, messages=cast("Any", messages), system_message=SYSTEM)
        gc.collect()
        mw.wrap_model_call(request.override(tools=TOOLS, state=cast("Any", {})), provider)
        ours_ms.append(mw.samples[-1][1].seconds * 1e3)
        gc.collect()
        sample = anchor(window)(fresh(blob, f"a{rep}"))[0]
        anchor_ms.append(sample.seconds * 1e3)
        fired_all = fired_all and sample.fired
    return ours_ms, anchor_ms, fired_all


@dataclass(slots=True)
class Share:
    n: int
    label: str
    turn_ms: float  # median create_agent turn without the middleware
    added_ms: float  # median middleware time per model call, with it
    calls: int  # model calls measured


def run_share(n: int, turns: int) -> list[Share]:
    """The middleware's steady time per call against the loop's own turn, at `n` messages.

    The loops with and without the middleware take turns in blocks of `SHARE_BLOCK` turns
    (which goes first alternates), so that both sides see the same load on a shared
    machine; each block's first turn is not measured: it runs after the other loop's
    block, whose work has displaced this one's from the processor's caches (turn about,
    one turn each, that displacement made the middleware's calls a third slower).
    """
    base = Chat(f"share/{n}").history(n)
    out = []
    for stateful in (False, True):
        times: dict[bool, list[float]] = {False: [], True: []}
        loops = [_ShareLoop(base, stateful=stateful, with_mw=with_mw) for with_mw in (False, True)]
        for loop in loops:
            loop.turn()  # the first turn carries the whole history (a cold start)
        for block in range(-(-turns // (SHARE_BLOCK - 1))):
            for loop in loops if block % 2 else loops[::-1]:
                for step in range(SHARE_BLOCK):
                    ms = loop.turn(measured=step > 0)
                    if step:
                        times[loop.mw is not None].append(ms)
        mw = cast("TimedKit", loops[1].mw)
        added = [s.seconds * 1e3 for t, s in mw.samples if t >= 1]
        label = "checkpointer" if stateful else "stateless"
        out.append(
            Share(n, label, statistics.median(times[False]), statistics.median(added), len(added))
        )
    return out


class _ShareLoop:
    """One `create_agent` of `run_share`, with or without the middleware, stateless or not."""

    def __init__(self, base: list[BaseMessage], *, stateful: bool, with_mw: bool) -> None:
        self.model = loop_model()
        self.mw = timed_kit(self.model, counted=False) if with_mw else None
        if self.mw is not None:
            self.mw.clock = time.thread_time  # its own thread: not the saver's writes
        self.stateful = stateful
        self.agent = create_agent(
            self.model,
            [lookup],
            system_prompt=SYSTEM.text,
            middleware=[self.mw] if self.mw else [],
            checkpointer=InMemorySaver() if stateful else None,
        )
        self.config: Any = {"configurable": {"thread_id": "share"}}
        self.base, self.history = base, list(base)
        self.turns = 0

    def turn(self, *, measured: bool = False) -> float:
        """Run the next turn; its CPU time (ms, every thread: the saver writes in the background).

        The middleware's calls of a turn not `measured` are numbered 0, which the share
        leaves out.
        """
        turn = self.turns
        self.turns += 1
        if self.mw is not None:
            self.mw.turn = turn if measured else 0
        seed: list[BaseMessage] = [*self.base, question(0)]
        began = time.process_time()
        if self.stateful:
            payload = seed if turn == 0 else [question(turn)]
            self.agent.invoke(cast("Any", {"messages": payload}), self.config)
        else:
            payload = seed if turn == 0 else [*self.history, question(turn)]
            self.history = self.agent.invoke(cast("Any", {"messages": payload}))["messages"]
        ms = (time.process_time() - began) * 1e3
        self.model.requests.clear()
        return ms


def report_cold(
    cold: Cold,
    shared: Cold,
    extractive: tuple[list[float], list[float], bool],
    known: tuple[list[float], list[float], bool],
) -> None:
    rows = [
        (
            f"fresh worker, {COLD_N:,} msgs at {COLD_WINDOW:,}",
            str(cold.calls[0]),
            f"{cold.chars[0]:,}",
            f"{cold.ms[0]:.0f}",
        ),
        *(
            (f"shared store, worker {i + 1}", str(c), f"{ch:,}", f"{ms:.0f}")
            for i, (c, ch, ms) in enumerate(zip(shared.calls, shared.chars, shared.ms, strict=True))
        ),
    ]
    table(
        "cold starts (stateless create_agent invoke)",
        ("run", "summariser calls", "chars sent", "ms"),
        rows,
    )
    rows = [
        (
            f"{EXTRACTIVE_N:,} msgs at {COLD_WINDOW:,}{label}",
            f"{statistics.median(ours):.1f}",
            f"{statistics.median(anchor_ms):.1f}",
            f"{statistics.median(ours) / statistics.median(anchor_ms):.1f}x",
        )
        for label, (ours, anchor_ms, _) in (
            ("", extractive),
            (", every count known (shown)", known),
        )
    ]
    table(
        "cold extractive call vs the anchor's firing call (median ms)",
        ("history", "ours", "anchor", "ratio"),
        rows,
    )


def report_shares(shares: Sequence[Share]) -> None:
    rows = [
        (
            f"{s.n:,}",
            s.label,
            f"{s.turn_ms:.2f}",
            f"{s.added_ms:.3f}",
            f"{s.added_ms / s.turn_ms:.1%}",
            str(s.calls),
        )
        for s in shares
    ]
    head = ("history", "run", "turn CPU ms (no middleware)", "added CPU ms/call", "share", "calls")
    table(
        f"steady middleware time per call vs the create_agent turn ({SHARE_TURNS} turns)",
        head,
        rows,
    )


def check_cold(
    cold: Cold,
    shared: Cold,
    extractive: tuple[list[float], list[float], bool],
    shares: Sequence[Share],
) -> list[tuple[bool, str]]:
    out = [
        (
            cold.calls[0] <= COLD_CALLS_TARGET,
            (
                f"cold call of a fresh worker, {COLD_N:,} msgs at {COLD_WINDOW:,}: "
                f"{cold.calls[0]} summariser calls (<= {COLD_CALLS_TARGET})"
            ),
        ),
        (
            shared.calls[1:] == [0] * (len(shared.calls) - 1),
            f"three workers, one InMemoryStore: summariser calls {shared.calls} (2 and 3: 0)",
        ),
    ]
    ours, anchor_ms, fired_all = extractive
    ratio = statistics.median(ours) / statistics.median(anchor_ms)
    note = "" if fired_all else " (the anchor did not always fire)"
    out.append(
        (
            ratio <= EXTRACTIVE_RATIO_TARGET,
            (
                f"cold extractive, {EXTRACTIVE_N:,} msgs: {ratio:.1f}x the anchor's firing "
                f"call (<= {EXTRACTIVE_RATIO_TARGET:.0f}x){note}"
            ),
        )
    )
    for s in shares:
        share = s.added_ms / s.turn_ms
        out.append(
            (
                share <= SHARE_TARGET,
                (
                    f"steady, {s.n:,} msgs, {s.label}: {share:.1%} of the create_agent "
                    f"turn (<= {SHARE_TARGET:.0%})"
                ),
            )
        )
    return out


# --- targets and main ------------------------------------------------------------------------


def check(cases: Sequence[Case], loops: Sequence[Loop]) -> list[tuple[bool, str]]:
    out: list[tuple[bool, str]] = []
    for (window, name), value in slopes(cases).items():
        if name != "seconds":
            text = f"steady slope of {name}/call at {window:,}: {value:.3f} (<= {SLOPE_TARGET})"
            out.append((value <= SLOPE_TARGET, text))
    del loops  # shown in their table; the per-call target is part 4's share of a turn
    for c in cases:
        where = f"{c.n:,} msgs at {c.window:,}"
        for phase in ("cold", "steady"):
            ratio = c.peak[f"ours {phase}"] / c.size
            text = f"peak memory, {phase}, {where}: {ratio:.2f}x the history in memory"
            text += f" (<= {MEMORY_TARGET}x; {c.peak[f'ours {phase}'] / c.pickled:.2f}x its pickle)"
            out.append((ratio <= MEMORY_TARGET, text))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 msgs, 100 turns")
    parser.add_argument("--sizes", type=int, nargs="+", help=f"default {SIZES}")
    parser.add_argument("--turns", type=int, help=f"loop turns (default {TURNS}; quick 100)")
    parser.add_argument("--reps", type=int, default=3, help="cold repetitions (default 3)")
    parser.add_argument("--only-cold", action="store_true", help="part 4 only (issue 32)")
    args = parser.parse_args()
    sizes = args.sizes or (SIZES[:2] if args.quick else SIZES)
    turns = args.turns or (100 if args.quick else TURNS)
    began = time.perf_counter()
    load_texts()
    results: list[tuple[bool, str]] = []
    if not args.only_cold:
        cases = [run_case(n, window, args.reps) for window in WINDOWS for n in sizes]
        report_cases(cases)
        rows = [(f"{w:,}", m, f"{v:.3f}") for (w, m), v in slopes(cases).items()]
        table("steady state, ours: log-log slope vs length", ("window", "per call", "slope"), rows)
        loops = [run_loop(label, turns) for label in LOOPS]
        report_loops(loops, turns)
        if turns != TURNS:
            print(f"(the loop ran {turns} turns, not {TURNS}; the tail is its last {TAIL} or half)")
        results += check(cases, loops)
    cold = run_workers(COLD_N, COLD_WINDOW, 1, shared=False)
    shared = run_workers(COLD_N, COLD_WINDOW, 3, shared=True)
    extractive = cold_extractive(EXTRACTIVE_N, COLD_WINDOW, max(1, args.reps))
    known = cold_extractive(EXTRACTIVE_N, COLD_WINDOW, max(1, args.reps), counts_known=True)
    report_cold(cold, shared, extractive, known)
    share_sizes = SHARE_SIZES[:1] if args.quick else SHARE_SIZES
    shares = [s for n in share_sizes for s in run_share(n, SHARE_TURNS)]
    report_shares(shares)
    results += check_cold(cold, shared, extractive, shares)
    print()
    for ok, text in results:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    failed = sum(not ok for ok, _ in results)
    print(f"\n{failed} of {len(results)} targets missed; {time.perf_counter() - began:.0f} s")
    if args.quick:
        print("(--quick: a smoke run, the targets are not enforced)")
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
