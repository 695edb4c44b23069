"""The Anthropic rows of `bench_agent_loop.py`: Claude's explicit prompt caching, measured.

The same scripted conversation (`_agent_script.py`) through `langchain_anthropic.ChatAnthropic`
against `AnthropicStub` (Anthropic's checks; entries written only at breakpoints, 1,024-token
minimum, 20-block lookback), every run with langchain-anthropic's
`AnthropicPromptCachingMiddleware` (system prompt, last tool, the request's tail):

- floor: no other middleware, an unbounded window (every token once, cached as it can be);
- SummarizationMW: `SummarizationMiddleware(trigger 0.6 x window, keep 10 messages)`;
- ours: untuned `ContextKitMiddleware.for_model(model)`, with and without a retrieval source
  (a `CallableSource` returning three passages per question), checkpointed and stateless.

Figures, from the requests the stub saw:

- read share: cache reads / input tokens of the agent's calls;
- ideal share: what a perfect placement of breakpoints could read. For each call, the
  largest prefix (in whole blocks, marks aside) byte-identical with the call just before
  it, counted when it reaches 1,024 tokens; over the agent's calls' input;
- cost: input in plain-token units (cache write 1.25x, read 0.1x, plain 1x), every call
  (agent and recap); the ideal cost places the breakpoints by hindsight on the same
  requests: each call reads its ideal prefix and writes what the next call will read;
- refused calls (HTTP 400), the recap calls' share read from the cache (the lowest), and
  the planted facts in the last agent request.

Targets (ours + caching middleware): 0 HTTP 400s; with a retrieval source, read share >=
0.95x the ideal share and cost <= 1.1x the ideal cost; each recap call reads >= 80% of
its input from the cache.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import _agent_script as script
import _stub_path  # noqa: F401 - puts tests/ on sys.path for provider_stubs
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from provider_stubs.anthropic_stub import AnthropicRecord, AnthropicStub, Reply

from langchain_contextkit import CallableSource, ContextKitMiddleware, RetrievalResult

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain.agents.middleware import AgentMiddleware
    from langchain_anthropic import ChatAnthropic
    from provider_stubs.openai_stub import Kind

    Factory = Callable[[ChatAnthropic], list[AgentMiddleware[Any, Any, Any]]]

MODEL = "claude-sonnet-4-5"  # a name for the stub
MAX_OUTPUT = 512
UNBOUNDED = 10**9
MIN_CACHE_TOKENS = 1_024
WRITE_PRICE, READ_PRICE = 1.25, 0.1
READ_TARGET, COST_TARGET, RECAP_READ_TARGET = 0.95, 1.1, 0.8


def respond(kind: Kind, messages: list[dict[str, Any]]) -> Reply:
    """`script.respond`, reading Anthropic's message shape (tool results in user turns)."""
    if kind != "agent" or not messages:
        return script.respond(kind, messages)
    content = messages[-1].get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results:
        return script.respond(kind, [{"role": "tool", "content": results[-1].get("content")}])
    texts = [str(b.get("text", "")) for b in blocks if isinstance(b, dict) and "text" in b]
    return script.respond(kind, [{"role": "user", "content": texts[-1] if texts else ""}])


def passages(question: str) -> list[RetrievalResult]:
    """Three passages per question, each about 80 tokens, different for every turn."""
    head = question.splitlines()[0][:60]
    return [
        RetrievalResult(
            f"Handbook passage {k} for '{head}': "
            + " ".join(script.SYSTEM_PROMPT.split()[k::9][:60]),
            0.9 - k / 10,
            "handbook",
        )
        for k in range(3)
    ]


# --- the stacks ------------------------------------------------------------------------------


def floor(_llm: ChatAnthropic) -> list[AgentMiddleware[Any, Any, Any]]:
    return [AnthropicPromptCachingMiddleware()]


def summarization(llm: ChatAnthropic) -> list[AgentMiddleware[Any, Any, Any]]:
    window = llm.profile["max_input_tokens"] if llm.profile else 0
    return [
        AnthropicPromptCachingMiddleware(),
        SummarizationMiddleware(model=llm, trigger=("tokens", 0.6 * window), keep=("messages", 10)),
    ]


def ours(llm: ChatAnthropic) -> list[AgentMiddleware[Any, Any, Any]]:
    return [AnthropicPromptCachingMiddleware(), ContextKitMiddleware.for_model(llm)]


def ours_with_source(llm: ChatAnthropic) -> list[AgentMiddleware[Any, Any, Any]]:
    kit = ContextKitMiddleware.for_model(llm, sources=[CallableSource("handbook", passages)])
    return [AnthropicPromptCachingMiddleware(), kit]


# --- the figures ---------------------------------------------------------------------------


def shared_prefix(a: AnthropicRecord, b: AnthropicRecord) -> int:
    """Tokens of the longest whole-block prefix `a` and `b` share byte for byte."""
    low, high = 0, min(len(a.prefix), len(b.prefix))
    while low < high:  # digests are cumulative: equal up to some block, different after
        mid = (low + high + 1) // 2
        if a.prefix[mid - 1][0] == b.prefix[mid - 1][0]:
            low = mid
        else:
            high = mid - 1
    return a.prefix[low - 1][1] if low else 0


@dataclass(slots=True)
class AnthropicRun:
    label: str
    window: int
    records: list[AnthropicRecord]
    failed_turns: int
    seconds: float

    @property
    def accepted(self) -> list[AnthropicRecord]:
        return [r for r in self.records if r.status == 200]

    @property
    def refused(self) -> int:
        return sum(r.status == 400 for r in self.records)

    def _ideal_reads(self) -> list[int]:
        calls = self.accepted
        reads = [0]
        for before, now in itertools.pairwise(calls):
            shared = shared_prefix(before, now)
            reads.append(shared if shared >= MIN_CACHE_TOKENS else 0)
        return reads

    @property
    def read_share(self) -> float:
        agent = [r for r in self.accepted if r.kind == "agent"]
        prompt = sum(r.prompt_tokens for r in agent)
        return sum(r.cache_read for r in agent) / prompt if prompt else 0.0

    @property
    def ideal_share(self) -> float:
        pairs = [(r, read) for r, read in zip(self.accepted, self._ideal_reads(), strict=True)]
        agent = [(r, read) for r, read in pairs if r.kind == "agent"]
        prompt = sum(r.prompt_tokens for r, _ in agent)
        return sum(read for _, read in agent) / prompt if prompt else 0.0

    @property
    def cost(self) -> float:
        return sum(
            r.input_tokens + WRITE_PRICE * r.cache_write + READ_PRICE * r.cache_read
            for r in self.accepted
        )

    @property
    def ideal_cost(self) -> float:
        reads = self._ideal_reads()
        total = 0.0
        for index, record in enumerate(self.accepted):
            read = reads[index]
            nxt = reads[index + 1] if index + 1 < len(reads) else 0
            write = max(0, nxt - read)  # what the next call reads, beyond this call's read
            plain = record.prompt_tokens - read - write
            total += plain + WRITE_PRICE * write + READ_PRICE * read
        return total

    @property
    def recaps(self) -> list[AnthropicRecord]:
        return [r for r in self.accepted if r.kind != "agent"]

    @property
    def recap_read(self) -> float | None:
        shares = [r.cache_read / r.prompt_tokens for r in self.recaps if r.prompt_tokens]
        return min(shares) if shares else None

    @property
    def facts(self) -> int:
        agent = [r for r in self.accepted if r.kind == "agent"]
        last = agent[-1].text if agent else ""
        return sum(fact in last for fact in script.FACTS)


def run(label: str, build: Factory, *, window: int, turns: int, stateless: bool) -> AnthropicRun:
    stub_window = UNBOUNDED if build is floor else window
    with AnthropicStub(respond, window=stub_window) as stub:
        llm = stub.chat_model(max_tokens=MAX_OUTPUT, model=MODEL)
        agent = create_agent(
            llm,
            [script.lookup_record_short],
            system_prompt=script.SYSTEM_PROMPT,
            middleware=build(llm),
            checkpointer=None if stateless else InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": f"bench-{label}"}}
        messages: list[Any] = []
        failed = 0
        start = time.perf_counter()
        for turn in range(1, turns + 1):
            question = HumanMessage(script.user_turn(turn))
            try:
                if stateless:
                    messages = agent.invoke({"messages": [*messages, question]})["messages"]
                else:
                    agent.invoke({"messages": [question]}, config)
            except Exception:  # noqa: BLE001 - a refused call fails the turn; counted
                failed += 1
        seconds = time.perf_counter() - start
        return AnthropicRun(label, window, list(stub.records), failed, seconds)


def table(runs: Sequence[AnthropicRun]) -> None:
    rows: list[tuple[str, Callable[[AnthropicRun], str]]] = [
        ("HTTP 400s (recap calls included)", lambda r: str(r.refused)),
        ("turns whose invoke failed", lambda r: str(r.failed_turns)),
        ("calls (agent / recap)", lambda r: f"{len(r.accepted) - len(r.recaps)} / {len(r.recaps)}"),
        ("read share, agent calls", lambda r: f"{r.read_share:.3f}"),
        ("ideal share (hindsight)", lambda r: f"{r.ideal_share:.3f}"),
        (
            "  read / ideal",
            lambda r: f"{r.read_share / r.ideal_share:.3f}" if r.ideal_share else "-",
        ),
        ("input cost, plain-token units", lambda r: f"{r.cost:,.0f}"),
        ("  cost / ideal cost", lambda r: f"{r.cost / r.ideal_cost:.3f}" if r.ideal_cost else "-"),
        (
            "recap calls read, lowest",
            lambda r: "-" if r.recap_read is None else f"{r.recap_read:.3f}",
        ),
        ("planted facts, last call", lambda r: f"{r.facts} of {len(script.FACTS)}"),
        ("wall time", lambda r: f"{r.seconds:.1f} s"),
    ]
    width, cell = 34, 21
    print(f"{'':{width}}" + "".join(f"{r.label:>{cell}}" for r in runs))
    print("-" * (width + cell * len(runs)))
    for name, value in rows:
        print(f"{name:{width}}" + "".join(f"{value(r):>{cell}}" for r in runs))


def check(runs: Sequence[AnthropicRun]) -> list[str]:
    lines: list[tuple[bool, str]] = []
    for r in runs:
        name = f"{r.label} @ {r.window:,}"
        lines.append((r.refused == 0, f"{name}: HTTP 400s {r.refused} (target 0)"))
        lines.append((r.failed_turns == 0, f"{name}: failed turns {r.failed_turns}"))
        if r.recap_read is not None:
            lines.append(
                (
                    r.recap_read >= RECAP_READ_TARGET,
                    f"{name}: recap calls read >= {r.recap_read:.3f} (target {RECAP_READ_TARGET})",
                )
            )
        if "+src" in r.label and r.ideal_share:
            ratio = r.read_share / r.ideal_share
            lines.append(
                (ratio >= READ_TARGET, f"{name}: reads {ratio:.3f}x ideal (target {READ_TARGET})")
            )
            cost = r.cost / r.ideal_cost
            lines.append(
                (cost <= COST_TARGET, f"{name}: cost {cost:.3f}x ideal (target {COST_TARGET})")
            )
    for ok, text in lines:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return [text for ok, text in lines if not ok]


def bench_anthropic(window: int, turns: int) -> list[str]:
    """The Anthropic rows at one window; returns the missed targets."""
    stacks: list[tuple[str, Factory, bool]] = [
        ("floor", floor, False),
        ("SummarizationMW", summarization, False),
        ("ours, ckpt", ours, False),
        ("ours, stateless", ours, True),
        ("ours+src, ckpt", ours_with_source, False),
        ("ours+src, stateless", ours_with_source, True),
    ]
    runs = [
        run(label, build, window=window, turns=turns, stateless=stateless)
        for label, build, stateless in stacks
    ]
    print(
        f"\nAnthropic (ChatAnthropic + AnthropicPromptCachingMiddleware), window {window:,}, "
        f"{turns} turns, 110-token tool results"
    )
    table(runs)
    print()
    return check(runs[2:])
