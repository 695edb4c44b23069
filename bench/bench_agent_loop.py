"""The front door, measured: untuned `ContextKitMiddleware.for_model(model)` next to langchain's.

    python bench/bench_agent_loop.py                 # 8k and 128k short turns, 8k long ones
    python bench/bench_agent_loop.py --window 8000   # one window, short turns
    python bench/bench_agent_loop.py --window 32768 --turns 100 --long-results

One scripted support conversation (`_agent_script.py`) is played through
`langchain.agents.create_agent` + `langchain_openai.ChatOpenAI` against
`provider_stubs.openai_stub.OpenAIStub` on 127.0.0.1: a fresh stub (and prompt
cache) per run, which rejects invalid tool-message order and over-window prompts with HTTP
400 like the real service, and reports cl100k prompt tokens and OpenAI-style cached tokens
(longest prefix shared with an earlier request, from 1,024 tokens, in 128-token steps).
Every turn is answered with a tool call (every fifth with two parallel calls); a short
tool result is ~110 tokens, so a turn is ~230 tokens and 60 turns ~14k tokens of
conversation; the system prompt is ~1,500 tokens. Turns 1-10 each plant a fact. The
summariser is the same model; the stub answers a summary request with the fact lines of
its input plus one sentence, for both sides.

Runs per window, side by side in one process, same script:

- anchor: `SummarizationMiddleware(model, trigger=("tokens", 0.6 * window), keep=("messages",
  10))` with an `InMemorySaver` checkpointer; everything else at langchain's defaults;
- ours: `ContextKitMiddleware.for_model(model)`, nothing else, with the checkpointer;
- ours, stateless: the same middleware without a checkpointer, the caller passing the whole
  message list back every turn (as API servers do);
- reference: no middleware and an unbounded window, the floor of uncached tokens (every
  token reaches the model uncached at least once, and each call loses up to 127 tokens to
  the 128-token steps).

Reported: HTTP 400s, model calls (agent / summariser), compactions, the largest prompt, the
cache-hit ratio of the agent's calls (cached / prompt tokens), uncached input tokens
(agent and summariser calls), planted facts present in the last agent request, turns whose
user message is in the last agent request, and whether the stored history is complete.

Summariser rows (window 8,000, the same 60 turns, `for_model(model)` with a checkpointer):
the stub's summary reply is bent the ways issue 28 lists: verbose (ten times the cap the
instruction states, the fact lines spread through chatter), half the fact lines dropped,
prose without headings, everything on one line, empty, an HTTP 500 (the summariser
raises), and a tool call instead of a summary; next to them `for_model(model,
summaries="extractive")`, which never asks the model. Reported: HTTP 400s, turns whose
invoke failed (any exception), summariser calls and planted facts at the last call.
Targets: 0 HTTP 400s, 0 failed turns, and facts at the last call >= the extractive row's.

Targets (the untuned default, both ways): window 8,000: 0 HTTP 400s, cache-hit >= 0.95,
uncached <= 0.6x the anchor's, every planted fact visible at the last call; window
128,000: no compaction, and the last request holds every turn. Exits 1 on any FAIL.

Anthropic rows (`_anthropic_rows.py`, `--anthropic`): the same script through
`ChatAnthropic` against `AnthropicStub` with `AnthropicPromptCachingMiddleware`, at 8k and
128k: the floor, `SummarizationMiddleware`, ours with and without a retrieval source,
checkpointed and stateless; read share next to the ideal share computed from the requests
the stub saw, cost in plain-token units next to the cost of ideal breakpoints, refused
calls, the recap calls' cache reads and the planted facts.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Run from a source checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _agent_script as script
import _stub_path  # noqa: F401 - puts tests/ on sys.path for provider_stubs
from _anthropic_rows import bench_anthropic
from provider_stubs.openai_stub import OpenAIStub, Reply, ToolCall, content_text

from langchain_contextkit.agent.middleware import ContextKitMiddleware

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import BaseTool
    from langchain_openai import ChatOpenAI
    from provider_stubs.openai_stub import Kind, RequestRecord, Responder

    Factory = Callable[[ChatOpenAI], AgentMiddleware[Any, Any, Any] | None]

MODEL = "gpt-4o-mini"  # only a name for the stub; it shapes nothing
WINDOWS = (8_000, 128_000)
TURNS = 60
MAX_OUTPUT = 512
ANCHOR_TRIGGER = 0.6  # of the window
ANCHOR_KEEP_MESSAGES = 10
UNBOUNDED = 10**9

CACHE_RATIO_TARGET = 0.95
UNCACHED_RATIO_TARGET = 0.6
SMALL_WINDOW = 8_000  # where the cache and uncached targets apply
LARGE_WINDOW = 128_000  # where "no compaction, every turn visible" applies


@dataclass(slots=True)
class RunResult:
    label: str
    window: int
    records: list[RequestRecord]
    failed_turns: list[tuple[int, str]]
    turns_missing: int
    turns: int
    seconds: float
    compactions: int
    lines_count: int
    notes: list[str] = field(default_factory=list)

    def accepted(self, *, agent: bool) -> list[RequestRecord]:
        return [r for r in self.records if r.status == 200 and (r.kind == "agent") == agent]

    @property
    def http_400s(self) -> int:
        return sum(r.status == 400 for r in self.records)

    @property
    def largest_prompt(self) -> int:
        return max((r.prompt_tokens for r in self.records if r.kind == "agent"), default=0)

    @property
    def cache_ratio(self) -> float:
        calls = self.accepted(agent=True)
        prompt = sum(r.prompt_tokens for r in calls)
        return sum(r.cached_tokens for r in calls) / prompt if prompt else 0.0

    @property
    def uncached(self) -> int:
        return sum(r.prompt_tokens - r.cached_tokens for r in self.records if r.status == 200)

    def uncached_of(self, *, agent: bool) -> int:
        return sum(r.prompt_tokens - r.cached_tokens for r in self.accepted(agent=agent))

    def _last_text(self) -> str:
        calls = self.accepted(agent=True)
        return calls[-1].text if calls else ""

    @property
    def facts_visible(self) -> int:
        last = self._last_text()
        return sum(fact in last for fact in script.FACTS)

    @property
    def turns_visible(self) -> int:
        last = self._last_text()
        return sum(f"Turn {turn}:" in last for turn in range(1, self.turns + 1))


# --- the middlewares ------------------------------------------------------------------------


def anchor(llm: ChatOpenAI) -> AgentMiddleware[Any, Any, Any]:
    window = llm.profile["max_input_tokens"] if llm.profile else 0
    return SummarizationMiddleware(
        model=llm,
        trigger=("tokens", ANCHOR_TRIGGER * window),
        keep=("messages", ANCHOR_KEEP_MESSAGES),
    )


def ours(llm: ChatOpenAI) -> AgentMiddleware[Any, Any, Any]:
    return ContextKitMiddleware.for_model(llm)


def no_middleware(_llm: ChatOpenAI) -> None:
    return None


# --- one run --------------------------------------------------------------------------------


def missing_turns(messages: Sequence[BaseMessage], turns: int, lines_count: int) -> int:
    """Turns whose user message or any tool result is gone from `messages`."""
    humans = {m.text for m in messages if isinstance(m, HumanMessage)}
    results = {m.text for m in messages if isinstance(m, ToolMessage)}
    return sum(
        script.user_turn(turn) not in humans
        or any(
            script.record_text(*call, lines_count) not in results
            for call in script.tool_calls_for(turn)
        )
        for turn in range(1, turns + 1)
    )


def run(
    label: str,
    build: Factory,
    *,
    turns: int,
    window: int,
    stateless: bool,
    long_results: bool,
    respond: Responder = script.respond,
    failures: tuple[type[Exception], ...] = (openai.APIStatusError,),
) -> RunResult:
    tool: BaseTool = script.lookup_record if long_results else script.lookup_record_short
    lines_count = script.LONG_LINES if long_results else script.SHORT_LINES
    stub_window = window if build is not no_middleware else UNBOUNDED
    with OpenAIStub(respond, window=stub_window) as stub:
        llm = stub.chat_model(max_tokens=MAX_OUTPUT, model=MODEL)
        middleware = build(llm)
        agent = create_agent(
            llm,
            [tool],
            system_prompt=script.SYSTEM_PROMPT,
            middleware=[middleware] if middleware is not None else [],
            checkpointer=None if stateless else InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": f"bench-{label}"}}
        failed: list[tuple[int, str]] = []
        messages: list[BaseMessage] = []
        compactions = 0
        start = time.perf_counter()
        for turn in range(1, turns + 1):
            question = HumanMessage(script.user_turn(turn))
            try:
                if stateless:
                    state = agent.invoke({"messages": [*messages, question]})
                    messages = state["messages"]
                else:
                    state = agent.invoke({"messages": [question]}, config)
            except failures as exc:
                failed.append((turn, f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"))
                continue
            compactions += sum(
                bool(entry.get("compacted")) for entry in state.get("contextkit_ledger", [])[-2:]
            )
        seconds = time.perf_counter() - start
        if not stateless:
            messages = agent.get_state(config).values["messages"]
        records = list(stub.records)
    summariser_calls = sum(r.kind != "agent" for r in records)
    return RunResult(
        label=label,
        window=window,
        records=records,
        failed_turns=failed,
        turns_missing=missing_turns(messages, turns, lines_count),
        turns=turns,
        seconds=seconds,
        # Ours records each compaction in its ledger; the anchor's are its summary calls.
        compactions=compactions
        if isinstance(middleware, ContextKitMiddleware)
        else summariser_calls,
        lines_count=lines_count,
    )


# --- report ---------------------------------------------------------------------------------


def table(results: Sequence[RunResult]) -> None:
    rows: list[tuple[str, Callable[[RunResult], str]]] = [
        ("HTTP 400s", lambda r: str(r.http_400s)),
        ("turns whose invoke failed", lambda r: f"{len(r.failed_turns)} of {r.turns}"),
        (
            "model calls (agent / summariser)",
            lambda r: f"{len(r.accepted(agent=True))} / {len(r.accepted(agent=False))}",
        ),
        ("compactions", lambda r: str(r.compactions)),
        ("largest prompt", lambda r: f"{r.largest_prompt:,}"),
        ("cache-hit ratio, agent calls", lambda r: f"{r.cache_ratio:.4f}"),
        ("uncached input tokens, total", lambda r: f"{r.uncached:,}"),
        (
            "  of which agent / summariser",
            lambda r: f"{r.uncached_of(agent=True):,} / {r.uncached_of(agent=False):,}",
        ),
        ("planted facts visible, last call", lambda r: f"{r.facts_visible} of {len(script.FACTS)}"),
        ("turns visible, last call", lambda r: f"{r.turns_visible} of {r.turns}"),
        (
            "history in state complete",
            lambda r: "yes" if not r.turns_missing else f"no ({r.turns_missing} lost)",
        ),
        ("wall time", lambda r: f"{r.seconds:.1f} s"),
    ]
    width = 34
    cell = 24
    print(f"{'':{width}}" + "".join(f"{r.label:>{cell}}" for r in results))
    print("-" * (width + cell * len(results)))
    for name, value in rows:
        print(f"{name:{width}}" + "".join(f"{value(r):>{cell}}" for r in results))
    for result in results:
        for turn, error in result.failed_turns[:3]:
            print(f"  {result.label}, turn {turn}: {error[:150]}")


def check(window: int, runs: Sequence[RunResult], anchor_run: RunResult | None) -> list[str]:
    """PASS/FAIL lines for the targets of one window; returns the failures."""
    lines: list[tuple[bool, str]] = []
    for r in runs:
        lines.append((r.http_400s == 0, f"{r.label}: HTTP 400s {r.http_400s} (target 0)"))
        if window <= SMALL_WINDOW:
            lines.append(
                (
                    r.cache_ratio >= CACHE_RATIO_TARGET,
                    f"{r.label}: cache-hit {r.cache_ratio:.4f} (target >= {CACHE_RATIO_TARGET})",
                )
            )
            if anchor_run is not None and anchor_run.uncached:
                ratio = r.uncached / anchor_run.uncached
                lines.append(
                    (
                        ratio <= UNCACHED_RATIO_TARGET,
                        (
                            f"{r.label}: uncached {r.uncached:,} = {ratio:.2f}x the anchor's "
                            f"{anchor_run.uncached:,} (target <= {UNCACHED_RATIO_TARGET}x)"
                        ),
                    )
                )
            facts = len(script.FACTS)
            lines.append(
                (
                    r.facts_visible == facts,
                    f"{r.label}: planted facts at the last call {r.facts_visible} of {facts}",
                )
            )
        if window >= LARGE_WINDOW:
            lines.append((r.compactions == 0, f"{r.label}: compactions {r.compactions} (target 0)"))
            lines.append(
                (
                    r.turns_visible == r.turns,
                    f"{r.label}: turns in the last request {r.turns_visible} of {r.turns}",
                )
            )
        lines.append(
            (r.turns_missing == 0, f"{r.label}: stored history lost {r.turns_missing} turns")
        )
    for ok, text in lines:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return [text for ok, text in lines if not ok]


def bench_window(window: int, turns: int, *, long_results: bool, reference: bool) -> list[str]:
    def go(label: str, build: Factory, *, stateless: bool = False) -> RunResult:
        return run(
            label,
            build,
            turns=turns,
            window=window,
            stateless=stateless,
            long_results=long_results,
        )

    anchor_run = go("SummarizationMW", anchor)
    default = go("for_model, checkpointer", ours)
    stateless = go("for_model, stateless", ours, stateless=True)
    results = [anchor_run, default, stateless]
    if reference:
        results.append(go("no compaction (floor)", no_middleware))
    size = "400-token" if long_results else "110-token"
    print(f"\nwindow {window:,}, {turns} turns, {size} tool results, max_tokens {MAX_OUTPUT}")
    table(results)
    print()
    if reference:
        floor = results[-1].uncached
        for r in (anchor_run, default, stateless):
            print(f"{r.label}: uncached input = {r.uncached / floor:.2f}x the floor's {floor:,}")
        print(
            f"(the floor is {floor / anchor_run.uncached:.2f}x the anchor's: no middleware can "
            "send fewer uncached tokens than every token once)"
        )
        print()
    return check(window, [default, stateless], anchor_run)


# --- summarisers that misbehave (issue 28) ---------------------------------------------------

SUMMARISER_WINDOW = 8_000
_CAP = re.compile(r"at most (\d+) tokens|不超过 (\d+) 个 token", re.IGNORECASE)
_CHATTER = (
    "The assistant looked the record up and read its ledger back to the customer.",
    "The customer thanked the assistant and moved on to the next record.",
    "Nothing in the ledger lines needed a supervisor.",
)


def _cap(messages: list[dict[str, Any]]) -> int:
    found = _CAP.search(content_text(messages[-1].get("content")) if messages else "")
    return int(next(g for g in found.groups() if g)) if found else 500


def _verbose(lines: list[str], messages: list[dict[str, Any]]) -> Reply:
    """Every line, spread through distinct chatter: about ten times the stated cap."""
    words = 10 * _cap(messages) * 3 // 4  # ~0.75 words a token
    notes = (f"{_CHATTER[k % 3]} (note {k})" for k in itertools.count())
    out: list[str] = []
    per_line = max(1, words // 14 // max(1, len(lines)))
    for line in lines:
        out += [next(notes) for _ in range(per_line)]
        out.append(line)
    return Reply(text="\n".join(out))


def _prose(lines: list[str], _messages: list[dict[str, Any]]) -> Reply:
    facts = [f"Earlier the customer said: {line}." for line in lines]
    return Reply(text=" ".join(["So far the customer has asked about records.", *facts]))


def _raise(_lines: list[str], _messages: list[dict[str, Any]]) -> Reply:
    msg = "the summariser is down"
    raise RuntimeError(msg)  # the stub answers HTTP 500


def _tool_call(_lines: list[str], _messages: list[dict[str, Any]]) -> Reply:
    call = ToolCall(script.TOOL_NAME, {"record_id": "R-001"}, "call_recap")
    return Reply(tool_calls=(call,))


SUMMARISER_BEHAVIOURS: dict[str, Callable[[list[str], list[dict[str, Any]]], Reply]] = {
    "verbose 10x": _verbose,
    "drop half": lambda lines, _m: Reply(text="\n".join(lines[::2])),
    "prose": _prose,
    "one line": lambda lines, _m: Reply(text="; ".join(lines)),
    "empty": lambda _lines, _m: Reply(text=""),
    "raise": _raise,
    "tool call": _tool_call,
}
"""How the stub bends its faithful summary reply (its lines) for each summariser row."""


def misbehaving(behaviour: str) -> Responder:
    """`script.respond`, its summary replies bent by `behaviour`."""
    bend = SUMMARISER_BEHAVIOURS[behaviour]

    def respond(kind: Kind, messages: list[dict[str, Any]]) -> Reply:
        reply = script.respond(kind, messages)
        if kind != "summary":
            return reply
        return bend([ln for ln in reply.text.splitlines() if ln.strip()], messages)

    return respond


def extractive(llm: ChatOpenAI) -> AgentMiddleware[Any, Any, Any]:
    return ContextKitMiddleware.for_model(llm, summaries="extractive")


def bench_summarisers(turns: int) -> list[str]:
    """The default under every summariser behaviour, next to the extractive row."""
    window = SUMMARISER_WINDOW

    def go(label: str, build: Factory, respond: Responder = script.respond) -> RunResult:
        return run(
            label,
            build,
            turns=turns,
            window=window,
            stateless=False,
            long_results=False,
            respond=respond,
            failures=(Exception,),
        )

    baseline = go("extractive", extractive)
    rows = [baseline, go("faithful", ours)]
    rows += [go(name, ours, misbehaving(name)) for name in SUMMARISER_BEHAVIOURS]
    print(f"\nwindow {window:,}, {turns} turns, for_model(model) under each summariser behaviour")
    cell = 13
    print(f"{'':34}" + "".join(f"{r.label:>{cell}}" for r in rows))
    print("-" * (34 + cell * len(rows)))
    lines: list[tuple[str, Callable[[RunResult], str]]] = [
        ("HTTP 400s", lambda r: str(r.http_400s)),
        ("turns whose invoke failed", lambda r: str(len(r.failed_turns))),
        ("summariser calls", lambda r: str(sum(x.kind != "agent" for x in r.records))),
        ("planted facts visible, last call", lambda r: f"{r.facts_visible}/{len(script.FACTS)}"),
    ]
    for name, value in lines:
        print(f"{name:34}" + "".join(f"{value(r):>{cell}}" for r in rows))
    for r in rows:
        for turn, error in r.failed_turns[:2]:
            print(f"  {r.label}, turn {turn}: {error[:150]}")
    print()
    checks: list[tuple[bool, str]] = []
    for r in rows[1:]:
        checks.append((r.http_400s == 0, f"{r.label}: HTTP 400s {r.http_400s} (target 0)"))
        checks.append((not r.failed_turns, f"{r.label}: failed turns {len(r.failed_turns)}"))
        facts = f"{r.label}: facts at the last call {r.facts_visible}"
        checks.append(
            (
                r.facts_visible >= baseline.facts_visible,
                f"{facts} (extractive {baseline.facts_visible})",
            )
        )
    for ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return [text for ok, text in checks if not ok]


RUNS = ((8_000, False), (128_000, False), (8_000, True))
"""(window, long tool results) of a default invocation."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, action="append", help="default: see RUNS")
    parser.add_argument("--turns", type=int, default=TURNS, help=f"user turns (default {TURNS})")
    parser.add_argument(
        "--long-results", action="store_true", help="400-token tool results instead of 110"
    )
    parser.add_argument("--no-reference", action="store_true", help="skip the floor run")
    parser.add_argument(
        "--summarisers",
        choices=("with", "without", "only"),
        default="with",
        help="the misbehaving-summariser rows at 8k (default: after the other runs)",
    )
    parser.add_argument(
        "--anthropic",
        choices=("with", "without", "only"),
        default="with",
        help="the Anthropic rows at each window (default: after the OpenAI rows)",
    )
    args = parser.parse_args()
    runs = [(w, args.long_results) for w in args.window] if args.window else list(RUNS)
    failures: list[str] = []
    openai_rows = args.anthropic != "only"
    for window, long_results in runs if openai_rows and args.summarisers != "only" else ():
        failures += bench_window(
            window, args.turns, long_results=long_results, reference=not args.no_reference
        )
    if openai_rows and args.summarisers != "without":
        failures += bench_summarisers(args.turns)
    if args.anthropic != "without":
        for window in args.window or WINDOWS:
            failures += bench_anthropic(window, args.turns)
    print()
    if failures:
        print(f"FAIL: {len(failures)} of the targets missed")
        return 1
    print("PASS: every target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
