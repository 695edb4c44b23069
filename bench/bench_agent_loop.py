"""A long `create_agent` conversation against a local OpenAI stub: ours next to langchain's.

    python bench/bench_agent_loop.py            # 100 turns: both middlewares + reference
    python bench/bench_agent_loop.py --quick    # 70 turns, no reference run (smoke run)
    python bench/bench_agent_loop.py --only peer --window 16384 --peer-trim 0

One scripted support conversation (`_agent_script.py`) is played through
`langchain.agents.create_agent` with an `InMemorySaver` checkpointer and one thread, one
`invoke` per user turn. Every turn is answered with a tool call (every fifth with two
parallel calls) whose result is ~500 tokens, so the history outgrows the window; turns
1-10 each plant a fact ("FACT-07: the shipping carrier is NordLink Freight"). The model is
`langchain_openai.ChatOpenAI` pointed at `langchain_contextkit.testing_openai.OpenAIStub`
on 127.0.0.1, a fresh stub (and prompt cache) per run, which answers from the script,
rejects invalid tool-message order and over-window prompts with HTTP 400 like the real
service, and reports cl100k prompt tokens and OpenAI-style cached tokens (longest prefix
shared with an earlier request, from 1,024 tokens, in 128-token steps). The summariser is the same
`ChatOpenAI`; the stub answers any request without tools that asks for a summary with the
fact lines of its input plus one sentence: a summariser that keeps facts, for both sides.

Three runs in one process, same script, same window:

- `SummarizationMiddleware(model=llm, trigger=("tokens", 0.75 * window),
  keep=("messages", 20), token_counter=<cl100k message counter>)`: 20 messages is its
  default tail and 5 turns of this script; `trim_tokens_to_summarize` keeps its default
  4,000 (`--peer-trim`; 0 for None). That default is the stricter comparison for ours on
  uncached tokens (the peer reads less), and it is why the peer loses the planted facts;
  with `--peer-trim 0` it keeps them and reads more;
- `CompactionMiddleware(HistoryCompactor(llm=llm, keep_recent=15, trigger_tokens=0.75 *
  window, max_summary_tokens=1_000, target_tokens=0, token_counter=<cl100k>),
  window=window)`: 15 units are the same 5 turns (ours counts a user message, a tool call
  with its results, and an answer as one unit each), and `target_tokens=0` makes a
  compaction keep exactly those 15 units, the same tail the peer keeps. The default target
  (half the trigger) keeps ~10k tokens of tail, which the first call after each compaction
  must send uncached again: `--ours-target` sets it (measured: 1.16x the peer's uncached
  tokens at the default, 0.89x at 0, against a floor of 0.79x);
- reference: no middleware and an unbounded window. Every message reaches a model
  uncached at least once whatever the middleware, and each call loses up to 127 tokens to
  the 128-token steps, so its uncached tokens are about the floor for any middleware.

The model's profile says the stub's window and the 512-token `max_tokens`. The system
prompt (~1,500 tokens, over the 1,024-token cache minimum) and tool schema (~65) come on
top of the trigger, which still leaves room for one more tool result in the window.

Window 32,768 by default: the cache-hit ratio is capped by the share of each call that is
new (a user turn, or ~500 tokens of tool output, plus the 128-token rounding). At 16,384,
prompts of 6-12k tokens cap it near 0.95 before any compaction (the peer's calls between
its compactions reach 0.948), so the 0.95 target would test the script, not the
middleware. 100 turns make each middleware compact three or four times at 32k.

Reported per run: HTTP 400s (agent / summariser calls), turns whose `invoke` failed (the
exception is caught, counted and the next turn goes on), model calls, the largest prompt,
the cache-hit ratio of the agent's calls (cached / prompt tokens), uncached input tokens
in total (prompt minus cached over agent and summariser calls), the summariser's input
tokens, the planted facts present in the last accepted agent request, and whether the
checkpointed `messages` still hold every turn (the user's message and each tool result).

A fourth run repeats the peer with `trim_tokens_to_summarize=None`: its summariser then
sees the planted facts and keeps them, as ours does. The uncached-token target is judged
against that run (the peer retaining as much as ours); the ratio against the default peer
is printed beside it.

Targets (issue 4), for ours: zero HTTP 400s; cache-hit ratio of the agent's calls >= 0.95;
uncached input tokens <= 0.6x SummarizationMiddleware's (trim off); all 10 planted facts visible at
the last turn; history in state complete. Exits 1 on any FAIL. The reference run's line
says how far the uncached target is from the floor.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import HumanMessage, ToolMessage, convert_to_messages
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Run from a source checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _agent_script as script

from langchain_contextkit.testing_openai import OpenAIStub
from langchain_contextkit.tokens import count_message_tokens, tiktoken_counter

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import BaseMessage, MessageLikeRepresentation

    from langchain_contextkit.testing_openai import RequestRecord
    from langchain_contextkit.tokens import TokenCounter

    # Builds one run's middleware around that run's model and the cl100k counter.
    Factory = Callable[[ChatOpenAI, TokenCounter], AgentMiddleware[Any, Any, Any] | None]

MODEL = "gpt-4o-mini"  # only a name for the stub; it shapes nothing
WINDOW = 32_768
TURNS = 100
QUICK_TURNS = 70
TRIGGER_FRACTION = 0.75  # of the window, on the messages: see the module docstring
MAX_OUTPUT = 512
KEEP_TURNS = 5
UNITS_PER_TURN = 3  # ours counts units: user message, tool call with its results, answer
PEER_KEEP_MESSAGES = 20  # the peer's default, and KEEP_TURNS turns of this script
PEER_TRIM_DEFAULT = 4_000  # the peer's default trim_tokens_to_summarize
MAX_SUMMARY = 1_000
UNBOUNDED = 10**9  # the reference run's window: nothing is ever rejected or compacted

CACHE_RATIO_TARGET = 0.95
UNCACHED_RATIO_TARGET = 0.6
MIN_COMPACTIONS = 2  # fewer, and the comparison says little: warned about, not a target


@dataclass(frozen=True, slots=True)
class Settings:
    """What both middlewares share in one invocation of the benchmark."""

    window: int
    turns: int
    peer_trim: int | None
    ours_target: int | None = 0

    @property
    def trigger(self) -> int:
        return int(self.window * TRIGGER_FRACTION)


@dataclass(slots=True)
class RunResult:
    label: str
    records: list[RequestRecord]
    failed_turns: list[tuple[int, str]]
    turns_missing: int
    turns: int
    seconds: float

    def accepted(self, *, agent: bool) -> list[RequestRecord]:
        return [r for r in self.records if r.status == 200 and (r.kind == "agent") == agent]

    def rejected(self, *, agent: bool) -> int:
        return sum(r.status == 400 and (r.kind == "agent") == agent for r in self.records)

    @property
    def http_400s(self) -> int:
        return self.rejected(agent=True) + self.rejected(agent=False)

    @property
    def largest_prompt(self) -> int:
        return max((r.prompt_tokens for r in self.records), default=0)

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

    @property
    def summariser_input(self) -> int:
        # Every request that is not the agent's is the middleware's own, whatever its wording.
        return sum(r.prompt_tokens for r in self.accepted(agent=False))

    @property
    def facts_visible(self) -> int:
        calls = self.accepted(agent=True)
        if not calls:
            return 0
        return sum(fact in calls[-1].text for fact in script.FACTS)


# --- the two middlewares -------------------------------------------------------------------


def make_peer(settings: Settings, *, trim: int | None = None, default_trim: bool = True) -> Factory:
    trim_tokens = settings.peer_trim if default_trim else trim

    def build(llm: ChatOpenAI, counter: TokenCounter) -> AgentMiddleware[Any, Any, Any]:
        def count(messages: Iterable[MessageLikeRepresentation]) -> int:
            return count_message_tokens(convert_to_messages(messages), counter)

        return SummarizationMiddleware(
            model=llm,
            trigger=("tokens", settings.trigger),
            keep=("messages", PEER_KEEP_MESSAGES),
            token_counter=count,
            trim_tokens_to_summarize=trim_tokens,
        )

    return build


def make_ours(settings: Settings) -> Factory:
    def build(llm: ChatOpenAI, counter: TokenCounter) -> AgentMiddleware[Any, Any, Any]:
        # Imported here so the peer's run works while these modules are being written.
        from langchain_contextkit.compaction import HistoryCompactor  # noqa: PLC0415
        from langchain_contextkit.middleware import CompactionMiddleware  # noqa: PLC0415

        compactor = HistoryCompactor(
            llm=llm,
            keep_recent=KEEP_TURNS * UNITS_PER_TURN,
            trigger_tokens=settings.trigger,
            max_summary_tokens=MAX_SUMMARY,
            target_tokens=settings.ours_target,
            token_counter=counter,
        )
        return CompactionMiddleware(compactor, window=settings.window)

    return build


def no_middleware(_llm: ChatOpenAI, _counter: TokenCounter) -> None:
    return None


def ours_unavailable() -> str | None:
    """Why ours cannot run (its modules are missing), or None."""
    try:
        import langchain_contextkit.compaction  # noqa: PLC0415
        import langchain_contextkit.middleware  # noqa: F401, PLC0415
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# --- one run --------------------------------------------------------------------------------


def chat_model(base_url: str, window: int) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=base_url,
        api_key="x",
        model=MODEL,
        max_tokens=MAX_OUTPUT,
        max_retries=0,  # a 400 is final; anything else should surface, not be retried away
        disable_streaming=True,  # the stub serves non-streaming requests only
        use_responses_api=False,
        # The stub's window and this run's max_tokens, not gpt-4o-mini's own limits.
        profile={"max_input_tokens": window, "max_output_tokens": MAX_OUTPUT},
    )


def missing_turns(messages: Sequence[BaseMessage], turns: int) -> int:
    """Turns whose user message or any tool result is gone from `messages`."""
    humans = {m.text for m in messages if isinstance(m, HumanMessage)}
    results = {m.text for m in messages if isinstance(m, ToolMessage)}
    return sum(
        script.user_turn(turn) not in humans
        or any(script.record_text(*call) not in results for call in script.tool_calls_for(turn))
        for turn in range(1, turns + 1)
    )


def run(label: str, build: Factory, turns: int, window: int) -> RunResult:
    counter = tiktoken_counter("cl100k_base")
    with OpenAIStub(script.respond, window=window) as stub:
        llm = chat_model(stub.base_url, window)
        middleware = build(llm, counter)
        agent = create_agent(
            llm,
            [script.lookup_record],
            system_prompt=script.SYSTEM_PROMPT,
            middleware=[middleware] if middleware is not None else [],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": f"bench-{label}"}}
        failed: list[tuple[int, str]] = []
        start = time.perf_counter()
        for turn in range(1, turns + 1):
            try:
                agent.invoke({"messages": [HumanMessage(script.user_turn(turn))]}, config)
            except openai.APIStatusError as exc:  # noqa: PERF203 - one verdict per turn
                # What a user of this middleware would see; counted, and the chat goes on.
                failed.append((turn, f"{type(exc).__name__}: {exc.message}"))
        seconds = time.perf_counter() - start
        messages = agent.get_state(config).values["messages"]
        return RunResult(
            label=label,
            records=list(stub.records),
            failed_turns=failed,
            turns_missing=missing_turns(messages, turns),
            turns=turns,
            seconds=seconds,
        )


# --- report ---------------------------------------------------------------------------------


def table(results: Sequence[RunResult], window: int) -> None:
    rows: list[tuple[str, Callable[[RunResult], str]]] = [
        (
            "HTTP 400s (agent / summariser)",
            lambda r: f"{r.http_400s} ({r.rejected(agent=True)} / {r.rejected(agent=False)})",
        ),
        ("turns whose invoke failed", lambda r: f"{len(r.failed_turns)} of {r.turns}"),
        (
            "model calls (agent / summariser)",
            lambda r: f"{len(r.accepted(agent=True))} / {len(r.accepted(agent=False))}",
        ),
        (f"largest prompt (window {window:,})", lambda r: f"{r.largest_prompt:,}"),
        ("cache-hit ratio, agent calls", lambda r: f"{r.cache_ratio:.3f}"),
        ("uncached input tokens, total", lambda r: f"{r.uncached:,}"),
        (
            "  of which agent / summariser",
            lambda r: f"{r.uncached_of(agent=True):,} / {r.uncached_of(agent=False):,}",
        ),
        ("summariser input tokens", lambda r: f"{r.summariser_input:,}"),
        (
            "planted facts visible, last turn",
            lambda r: f"{r.facts_visible} of {len(script.FACTS)}",
        ),
        (
            "history in state complete",
            lambda r: "yes" if not r.turns_missing else f"no ({r.turns_missing} turns lost)",
        ),
        ("wall time", lambda r: f"{r.seconds:.1f} s"),
    ]
    width = 36
    print(f"{'':{width}}" + "".join(f"{r.label:>26}" for r in results))
    print("-" * (width + 26 * len(results)))
    for name, cell in rows:
        print(f"{name:{width}}" + "".join(f"{cell(r):>26}" for r in results))
    for result in results:
        for turn, error in result.failed_turns[:3]:
            print(f"  {result.label}, turn {turn}: {error[:150]}")
        if len(result.failed_turns) > 3:
            print(f"  {result.label}: ... {len(result.failed_turns) - 3} more failed turns")


def check(ours: RunResult, peer: RunResult | None) -> list[str]:
    """PASS/FAIL lines for the targets; returns the failures."""
    lines: list[tuple[bool, str]] = []
    lines.append((ours.http_400s == 0, f"HTTP 400s: {ours.http_400s} (target 0)"))
    text = f"cache-hit ratio of the agent's calls: {ours.cache_ratio:.3f}"
    lines.append(
        (ours.cache_ratio >= CACHE_RATIO_TARGET, f"{text} (target >= {CACHE_RATIO_TARGET})")
    )
    if peer is not None:
        ratio = ours.uncached / peer.uncached if peer.uncached else float("inf")
        text = (
            f"uncached input tokens: {ours.uncached:,} = {ratio:.2f}x "
            f"{peer.label}'s {peer.uncached:,}"
        )
        lines.append(
            (ratio <= UNCACHED_RATIO_TARGET, f"{text} (target <= {UNCACHED_RATIO_TARGET}x)")
        )
    facts = len(script.FACTS)
    text = f"planted facts visible at the last turn: {ours.facts_visible} of {facts}"
    lines.append((ours.facts_visible == facts, f"{text} (target all)"))
    text = f"history in state complete: {ours.turns_missing} of {ours.turns} turns lost"
    lines.append((ours.turns_missing == 0, f"{text} (target 0)"))
    for ok, text in lines:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return [text for ok, text in lines if not ok]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_TURNS} turns, no reference run"
    )
    parser.add_argument("--turns", type=int, help=f"user turns (default {TURNS})")
    parser.add_argument("--window", type=int, default=WINDOW, help=f"default {WINDOW:,}")
    parser.add_argument("--only", choices=("peer", "ours"), help="run one middleware")
    parser.add_argument(
        "--peer-trim",
        type=int,
        default=PEER_TRIM_DEFAULT,
        help="SummarizationMiddleware's trim_tokens_to_summarize (0 for None: no trimming)",
    )
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the run without compaction"
    )
    parser.add_argument(
        "--ours-target",
        type=int,
        default=0,
        help="ours' target_tokens (default 0: the 5 recent turns; -1: half the trigger)",
    )
    args = parser.parse_args()
    settings = Settings(
        window=args.window,
        turns=args.turns or (QUICK_TURNS if args.quick else TURNS),
        peer_trim=args.peer_trim or None,
        ours_target=args.ours_target if args.ours_target >= 0 else None,
    )
    print(
        f"{settings.turns} turns, window {settings.window:,} (max_tokens {MAX_OUTPUT}), "
        f"trigger {settings.trigger:,}, recent tail {KEEP_TURNS} turns "
        f"({PEER_KEEP_MESSAGES} messages for the peer, "
        f"{KEEP_TURNS * UNITS_PER_TURN} units for ours), peer trim {settings.peer_trim}"
    )
    results: list[RunResult] = []
    peer = ours = reference = None
    if args.only != "ours":
        peer = run("SummarizationMiddleware", make_peer(settings), settings.turns, settings.window)
        results.append(peer)
        if settings.peer_trim is not None and not args.quick:
            # The same peer with trimming off: its summariser then sees (and keeps) the
            # planted facts too, so ours is judged against a peer that retains as much.
            keeping = run(
                "Summarization, no trim",
                make_peer(settings, trim=None, default_trim=False),
                settings.turns,
                settings.window,
            )
            results.append(keeping)
    missing = ours_unavailable() if args.only != "peer" else None
    if args.only != "peer" and missing is None:
        ours = run("CompactionMiddleware", make_ours(settings), settings.turns, settings.window)
        results.append(ours)
    if not (args.no_reference or args.quick):
        reference = run("no compaction (reference)", no_middleware, settings.turns, UNBOUNDED)
        results.append(reference)
    print()
    table(results, settings.window)
    notes: list[str] = []
    if reference is not None:
        # See the module docstring: about the least any middleware can leave uncached.
        floor = reference.uncached
        line = f"reference (no compaction): {floor:,} uncached input tokens"
        if peer is not None and peer.uncached:
            line += (
                f" = {floor / peer.uncached:.2f}x SummarizationMiddleware's; the target asks "
                f"<= {UNCACHED_RATIO_TARGET}x"
            )
        notes.append(line)
    for result in (peer, ours):
        if result is None:
            continue
        compactions = len(result.accepted(agent=False))
        if compactions < MIN_COMPACTIONS:
            notes.append(
                f"WARNING: {result.label} summarised {compactions} times; with fewer than "
                f"{MIN_COMPACTIONS} the comparison says little (more --turns?)"
            )
    print()
    if notes:
        print("\n".join(notes))
        print()
    if args.only == "peer":
        return 0
    if ours is None:
        print(f"FAIL: ours cannot run yet ({missing})")
        return 1
    judged = next((r for r in results if r.label == "Summarization, no trim"), peer)
    if judged is not peer and peer is not None and peer.uncached:
        print(
            f"ours vs SummarizationMiddleware at its default trim "
            f"({settings.peer_trim:,} tokens, loses the planted facts): "
            f"{ours.uncached / peer.uncached:.2f}x its uncached input tokens"
        )
    failures = check(ours, judged)
    print()
    if failures:
        print(f"FAIL: {len(failures)} of the targets missed")
        return 1
    print("PASS: every target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
