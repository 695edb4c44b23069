"""Shared machinery of the never-fail suite (`test_never_fail_*.py`, issue 28 item 6).

Every case plays a scripted conversation through `create_agent` with the untuned
`ContextKitMiddleware.for_model(model)` (``summaries="model"``) or its extractive twin,
and then checks, on the public surface only, what the issue's targets say must hold:

- no exception leaves the agent (the one documented exception is checked on its own);
- every request the model received, the agent's and the recap's, is a list a provider
  accepts (`find_message_problems(request) == []`) and is no larger than the window minus
  the output reserve its call's ledger line states, measured the way the provider counts
  (`count_message_tokens` + `count_tool_tokens` with the middleware's counter, then the
  scripted provider's own overhead);
- the stored history keeps every message whole;
- the planted facts the last request shows with the default are no fewer than with
  ``summaries="extractive"``.

`Provider` is the scripted service. Its model answers an agent request from the request
alone (a stateless function of the messages, so a restart, a stream and twenty threads
see the same answers): a user turn that says ``fetch: a, b`` gets one parallel `fetch`
call per key, a tool result gets "Done.", anything else a one-line answer. A recap request
is told apart by its last message, the instruction `PromptRegistry` writes (see
`is_recap_request`), and answered by one of `SUMMARISERS`, the behaviours item 6 lists.
Each reply carries `usage_metadata` as the provider counted it, so the middleware's
calibration learns from it as it would from a real service.
"""

from __future__ import annotations

import itertools
import re
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import ContextKitMiddleware, PromptRegistry
from langchain_contextkit.agent.ledger import LEDGER_EVENT
from langchain_contextkit.messages.lists import find_message_problems
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens.count import count_message_tokens, count_tokens, count_tool_tokens

SUMMARIES = ("extractive", "model")
"""Both front doors; extractive first, so the default's comparison finds it cached."""

SYSTEM_PROMPT = (
    "You are a records assistant. Fetch what the user asks for with the fetch tool and "
    "keep every fact the user states; you will be asked about them later."
)

# --- planted facts ----------------------------------------------------------------------


def code(n: int) -> str:
    """The six-digit code planted for item `n` (distinct per item, deterministic)."""
    return str(100_000 + (n * 7_919) % 900_000)


def fact_line(n: int) -> str:
    """The planted line of item `n`, as the user states it."""
    return f"Fact: the code for item-{n} is {code(n)}."


_FACT = re.compile(r"item-(\d+) is (\d{6})")


def facts_in(messages: Sequence[BaseMessage]) -> set[int]:
    """The items whose planted code `messages` show, intact (item and code together)."""
    text = "\n".join(m.text for m in messages)
    return {int(n) for n, c in _FACT.findall(text) if c == code(int(n))}


_FILLER = (
    "The shelf audit went as planned and the loading bay was swept before noon.",
    "Nothing unusual came up in the morning round; the forklift was charged overnight.",
    "The courier arrived a little late, which is normal on a Monday.",
    "We moved two pallets from aisle four to aisle seven to make room.",
)


def turn(n: int, *, fact: bool = True, fetch: Sequence[str] = (), filler: int = 2) -> str:
    """User turn `n`: a head, `filler` low-information sentences, its fact, its fetches."""
    lines = [f"Turn {n}: an update from the warehouse floor."]
    lines += [_FILLER[(n + i) % len(_FILLER)] for i in range(filler)]
    if fact:
        lines.append(fact_line(n))
    if fetch:
        lines.append("fetch: " + ", ".join(fetch))
    return "\n".join(lines)


# --- telling a recap request from an agent request ----------------------------------------


def _constant_prefix(render: Callable[[int], str]) -> str:
    """The start of an instruction that does not depend on the cap written into it."""
    one, two = render(111), render(222)
    pairs = zip(one, two, strict=False)
    prefix = "".join(a for a, _ in itertools.takewhile(lambda p: p[0] == p[1], pairs))
    return prefix[:24]


def _recap_markers() -> tuple[str, ...]:
    markers: list[str] = []
    for language in ("en", "zh"):
        prompts = PromptRegistry(language=language)
        markers += [
            _constant_prefix(lambda cap, p=prompts: p.summary_instruction(max_tokens=cap)),
            _constant_prefix(lambda cap, p=prompts: p.extend_instruction(max_tokens=cap)),
            _constant_prefix(
                lambda cap, p=prompts: p.view_summary_instruction(max_tokens=cap, keep_last=2)
            ),
        ]
    return tuple(m for m in markers if m)


RECAP_MARKERS = _recap_markers()
# Wording the library may come to use for a recap request; no user turn here says it.
_RECAP_WORDS = re.compile(r"\bsummar|\brecap\b|摘要|总结", re.IGNORECASE)
_CAP = re.compile(r"at most (\d+) tokens|不超过 (\d+) 个 token", re.IGNORECASE)


def is_recap_request(messages: Sequence[BaseMessage]) -> bool:
    """Whether the request asks for a recap: its last message is the library's instruction."""
    if not messages or not isinstance(messages[-1], HumanMessage):
        return False
    text = messages[-1].text.lstrip()
    return text.startswith(RECAP_MARKERS) or bool(_RECAP_WORDS.search(text[:400]))


def recap_cap(messages: Sequence[BaseMessage]) -> int:
    """The cap the recap instruction states (200 when it states none)."""
    match = _CAP.search(messages[-1].text)
    return int(next(g for g in match.groups() if g)) if match else 200


# --- the summariser behaviours of item 6 --------------------------------------------------

Reply = str | AIMessage


def _facts_asked(messages: Sequence[BaseMessage]) -> list[int]:
    """The planted items the recap request shows (the earlier recap included), in order."""
    return sorted(facts_in(messages[:-1]) | facts_in([HumanMessage(messages[-1].text)]))


def faithful(messages: list[BaseMessage]) -> Reply:
    """Keeps every planted fact, in the sections the instruction asks for."""
    items = [f"- User: {fact_line(n)}" for n in _facts_asked(messages)]
    return "\n".join(["Facts:", *items, "- Assistant: Records were fetched on request."])


def verbose(messages: list[BaseMessage]) -> Reply:
    """Every fact, buried in distinct chatter: ten times the cap, the newest facts last."""
    target = 10 * recap_cap(messages)
    facts = _facts_asked(messages)
    notes = (f"{_FILLER[k % len(_FILLER)]} (observation {k})" for k in itertools.count())
    lines = ["Facts:"]
    per_fact = max(1, target // max(1, len(facts)) // 25)
    for n in facts:
        lines += [f"- Assistant: {next(notes)}" for _ in range(per_fact)]
        lines.append(f"- User: {fact_line(n)}")
    missing = target - count_tokens("\n".join(lines))
    if missing > 0:  # the rest up front, as a model that starts with a long preamble
        pad = f"- Assistant: {next(notes)}"
        lines[1:1] = [pad] + [
            f"- Assistant: {next(notes)}" for _ in range(missing // count_tokens(pad))
        ]
    return "\n".join(lines)


def drop_half(messages: list[BaseMessage]) -> Reply:
    """Keeps every other fact only."""
    items = [f"- User: {fact_line(n)}" for n in _facts_asked(messages)[::2]]
    return "\n".join(["Facts:", *items])


def prose(messages: list[BaseMessage]) -> Reply:
    """Every fact, in sentences, without headings or items."""
    sentences = [
        f"Earlier the user said that the code for item-{n} is {code(n)}, and asked to keep it."
        for n in _facts_asked(messages)
    ]
    paragraphs = [" ".join(sentences[i : i + 3]) for i in range(0, len(sentences), 3)]
    return "So far the user has been sending warehouse updates.\n\n" + "\n\n".join(paragraphs)


def one_line(messages: list[BaseMessage]) -> Reply:
    """Every fact as one line, separated by semicolons."""
    return "Facts: " + "; ".join(fact_line(n) for n in _facts_asked(messages))


def empty(_messages: list[BaseMessage]) -> Reply:
    """Nothing at all."""
    return ""


class SummariserDownError(RuntimeError):
    """What the raising summariser raises."""


def raising(_messages: list[BaseMessage]) -> Reply:
    """Fails the call (a timeout, a 500)."""
    msg = "the summariser is down"
    raise SummariserDownError(msg)


def tool_calling(_messages: list[BaseMessage]) -> Reply:
    """Ignores the instruction and calls a tool."""
    return AIMessage("", tool_calls=[{"name": "fetch", "args": {"key": "a"}, "id": "recap-call"}])


SUMMARISERS: Mapping[str, Callable[[list[BaseMessage]], Reply]] = {
    "faithful": faithful,
    "verbose": verbose,
    "drop_half": drop_half,
    "prose": prose,
    "one_line": one_line,
    "empty": empty,
    "raise": raising,
    "tool_call": tool_calling,
}

# --- the agent's side ---------------------------------------------------------------------

_FETCH = re.compile(r"^fetch: (.+)$", re.MULTILINE)
_BROKEN = re.compile(r"^broken: (.+)$", re.MULTILINE)


def agent_reply(messages: list[BaseMessage]) -> Reply:
    """The agent's answer, from the request alone (see the module)."""
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        return "Done."
    if isinstance(last, HumanMessage):
        broken = _BROKEN.search(last.text)
        if broken:  # arguments that are not JSON: LangChain parses them as invalid_tool_calls
            bad = {
                "type": "invalid_tool_call",
                "name": "fetch",
                "args": '{"key": "' + broken.group(1),
                "id": f"bad-{zlib.crc32(last.text.encode())}",
                "error": "Function fetch arguments are not valid JSON.",
            }
            return AIMessage("", invalid_tool_calls=[bad])
        found = _FETCH.search(last.text)
        if found:
            keys = [k.strip() for k in found.group(1).split(",") if k.strip()]
            turn_id = zlib.crc32(last.text.encode())
            calls = [
                {"name": "fetch", "args": {"key": key}, "id": f"call-{turn_id}-{i}"}
                for i, key in enumerate(keys)
            ]
            return AIMessage("", tool_calls=calls)
        return "Noted."
    return "How can I help?"


def fetch_tool(results: Mapping[str, str]) -> BaseTool:
    """The agent's one tool: the text stored under a key."""

    @tool
    def fetch(key: str) -> str:
        """Fetch the record stored under a key."""
        return results.get(key, f"no record {key}")

    return fetch


Overhead = Callable[[int, int], int]
"""Provider tokens of a request from (its estimate, its number of messages)."""


def exact(tokens: int, _messages: int) -> int:
    """A provider that counts what the middleware's counter counts."""
    return tokens


@dataclass
class Provider:
    """A scripted chat service: its window, how it counts, how it recaps."""

    window: int
    max_output: int = 1_000
    summariser: Callable[[list[BaseMessage]], Reply] = faithful
    overhead: Overhead = exact
    agent: Callable[[list[BaseMessage]], Reply] = agent_reply
    model: ScriptedChatModel = field(init=False)

    def __post_init__(self) -> None:
        self.model = ScriptedChatModel(
            respond=self._respond, context_window=self.window, max_output_tokens=self.max_output
        )

    def tokens(self, messages: Sequence[BaseMessage], tools: Sequence[Any]) -> int:
        """The request as this provider counts it."""
        estimate = count_message_tokens(messages, count_tokens)
        estimate += count_tool_tokens(tools, count_tokens) if tools else 0
        return self.overhead(estimate, len(messages))

    def _respond(self, messages: list[BaseMessage]) -> AIMessage:
        # The model records a request's tools just before it asks for the answer (under
        # concurrent threads another request's may be last: theirs are the same tools).
        tools = self.model.request_tools[-1] if self.model.request_tools else []
        reply = self.summariser(messages) if is_recap_request(messages) else self.agent(messages)
        message = AIMessage(reply) if isinstance(reply, str) else reply.model_copy()
        reported = self.tokens(messages, tools)
        message.usage_metadata = {
            "input_tokens": reported,
            "output_tokens": 5,
            "total_tokens": reported + 5,
        }
        return message

    def agent_requests(self) -> list[list[BaseMessage]]:
        return [r for r in self.model.requests if not is_recap_request(r)]

    def recap_requests(self) -> list[list[BaseMessage]]:
        return [r for r in self.model.requests if is_recap_request(r)]


class LedgerLines(BaseCallbackHandler):
    """Every call's ledger line, as the middleware dispatches it (`LEDGER_EVENT`)."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def on_custom_event(self, name: str, data: Any, **_kwargs: Any) -> None:
        if name == LEDGER_EVENT and isinstance(data, dict):
            with self._lock:
                self.lines.append(dict(data))


@dataclass
class Run:
    """One scenario played: the provider, the agent, what came back, what was logged."""

    provider: Provider
    agent: Any
    config: dict[str, Any]
    ledgers: LedgerLines
    states: list[dict[str, Any]] = field(default_factory=list)
    sent_users: list[str] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)

    @property
    def last_state(self) -> dict[str, Any]:
        return self.states[-1]

    def stored_messages(self) -> list[BaseMessage]:
        """The history the agent keeps: the checkpoint's, else the last invoke's output."""
        if self.agent.checkpointer is not None:
            return list(self.agent.get_state(self.config).values["messages"])
        return list(self.last_state["messages"])

    def last_request(self) -> list[BaseMessage]:
        requests = self.provider.agent_requests()
        assert requests, "the model received no agent request"
        return requests[-1]


def build(
    provider: Provider,
    summaries: str,
    *,
    results: Mapping[str, str] | None = None,
    system_prompt: str | None = SYSTEM_PROMPT,
    checkpointer: bool | InMemorySaver = True,
    before: Sequence[Any] = (),
    middleware: ContextKitMiddleware | None = None,
    thread: str = "t",
    **agent_kwargs: Any,
) -> Run:
    """The agent over `provider` with the untuned middleware (and `before` outside it)."""
    results = dict(results or {})
    ours = middleware or ContextKitMiddleware.for_model(provider.model, summaries=summaries)  # type: ignore[arg-type]
    agent = create_agent(
        provider.model,
        [fetch_tool(results)],
        system_prompt=system_prompt,
        middleware=[*before, ours],
        checkpointer=(
            checkpointer
            if isinstance(checkpointer, InMemorySaver)
            else InMemorySaver()
            if checkpointer
            else None
        ),
        **agent_kwargs,
    )
    ledgers = LedgerLines()
    config: dict[str, Any] = {"configurable": {"thread_id": thread}, "callbacks": [ledgers]}
    return Run(provider, agent, config, ledgers, results=results)


def play(
    run: Run, users: Sequence[str | BaseMessage], *, history: Sequence[BaseMessage] = ()
) -> Run:
    """Send the user turns one by one (with `history` before the first one)."""
    stateless = run.agent.checkpointer is None
    carried: list[BaseMessage] = list(history)
    for index, user in enumerate(users):
        message = user if isinstance(user, BaseMessage) else HumanMessage(user)
        run.sent_users.append(message.text)
        if stateless:
            state = run.agent.invoke({"messages": [*carried, message]}, run.config)
            carried = list(state["messages"])
        else:
            new = [*history, message] if index == 0 else [message]
            state = run.agent.invoke({"messages": new}, run.config)
        run.states.append(state)
    return run


async def aplay(run: Run, users: Sequence[str]) -> Run:
    """Async `play` for a checkpointed agent."""
    for user in users:
        run.sent_users.append(user)
        run.states.append(await run.agent.ainvoke({"messages": [HumanMessage(user)]}, run.config))
    return run


# --- the checks -----------------------------------------------------------------------------


def assert_requests_fit_and_valid(
    run: Run, *, model_window: int | None = None, paired: bool = True
) -> None:
    """Every request valid and within the window minus its call's output reserve.

    Agent requests are paired in order with the ledger lines the calls dispatched (one
    line per agent call); recap requests, which have no line of their own, are held to the
    smallest reserve any call stated. `paired=False` (concurrent threads, whose calls
    interleave) holds every request to that smallest reserve.
    """
    provider = run.provider
    window = model_window or provider.window
    lines = run.ledgers.lines
    reserves = [int(line["output_reserve"]) for line in lines]
    assert reserves, "no call dispatched its ledger line"
    smallest = min(reserves)
    agent_requests = provider.agent_requests()
    pair = paired and len(agent_requests) == len(reserves)
    tools = provider.model.request_tools
    for index, request in enumerate(provider.model.requests):
        problems = find_message_problems(request)
        assert problems == [], f"request {index} is invalid: {problems}"
    agent_index = 0
    for index, request in enumerate(provider.model.requests):
        if is_recap_request(request):
            reserve = smallest
        else:
            reserve = reserves[agent_index] if pair else smallest
            agent_index += 1
        size = provider.tokens(request, tools[index])
        ceiling = window - reserve
        assert size <= ceiling, (
            f"request {index} ({'recap' if is_recap_request(request) else 'agent'}) takes "
            f"{size} provider tokens, over the {ceiling} the window leaves after the "
            f"{reserve}-token output reserve"
        )


def assert_history_whole(run: Run, *, extra: Sequence[BaseMessage] = ()) -> None:
    """Every user turn, every tool result and every message of `extra` is stored whole."""
    stored = run.stored_messages()
    humans = [m.text for m in stored if isinstance(m, HumanMessage)]
    for text in run.sent_users:
        assert text in humans, f"the stored history lost or changed the user turn {text[:60]!r}"
    results = {m.tool_call_id: m.text for m in stored if isinstance(m, ToolMessage)}
    for message in stored:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["id"] not in results:
                    continue  # never answered (a caller's broken history): nothing to keep
                if call["name"] == "fetch" and call["args"].get("key") in run.results:
                    expected = run.results[call["args"]["key"]]
                    assert results[call["id"]] == expected, "a tool result is not stored whole"
    stored_keys = [(type(m), m.text) for m in stored]
    for message in extra:
        assert (type(message), message.text) in stored_keys, f"{message!r} left the history"


def ledger_records_a_cut(line: Mapping[str, Any]) -> bool:
    """Whether a call's ledger line says it cut, shrank, reduced or offloaded something."""
    words = ("shrunk", "shrink", "cut", "truncat", "trimmed", "offload", "preview")
    for key, value in line.items():
        if key in ("reduced", "compacted") and key == "reduced" and value:
            return True
        if any(word in key for word in words) and not key.endswith("failed") and value:
            return True
    return False


# --- bulky and multilingual text ------------------------------------------------------------


def bulky(tokens: int, tag: str) -> str:
    """About `tokens` tokens (by `count_tokens`) of numbered sensor lines, each distinct."""
    lines: list[str] = []
    total = 0
    i = 0
    while True:
        line = (
            f"{tag} line {i:04d}: sensor {i % 97} read {i % 13}.{i % 89:02d} volts at "
            f"{i % 24:02d}:00, status nominal, rack {chr(65 + i % 26)}."
        )
        cost = count_tokens(line + "\n")
        if lines and total + cost > tokens:
            return "\n".join(lines)
        lines.append(line)
        total += cost
        i += 1


SENTENCES: Mapping[str, tuple[str, ...]] = {
    "zh": (
        "仓库今天上午完成了盘点，所有货架都已经重新贴好标签。",
        "下午的送货车晚到了半个小时，司机说路上有施工。",
        "请把第三排的托盘移到东侧出口附近，方便明天装车。",
        "系统日志显示昨晚的备份顺利完成，没有发现任何错误。",
    ),
    "ar": (
        "أكمل المستودع الجرد صباح اليوم وتم وضع ملصقات جديدة على جميع الرفوف.",
        "وصلت شاحنة التوصيل متأخرة نصف ساعة بسبب أعمال الطرق.",
        "يرجى نقل المنصات من الصف الثالث إلى المخرج الشرقي لتسهيل التحميل غدا.",
        "أظهر سجل النظام أن النسخ الاحتياطي الليلة الماضية اكتمل دون أخطاء.",
    ),
    "ru": (
        "Утром на складе закончили инвентаризацию и заново подписали все стеллажи.",
        "Машина с доставкой опоздала на полчаса из-за ремонта дороги.",
        "Перенесите поддоны из третьего ряда к восточному выходу, завтра погрузка.",
        "Журнал показывает, что ночное резервное копирование прошло без ошибок.",
    ),
}


def text_in(language: str, chars: int, *, seed: int = 0) -> str:
    """About `chars` characters of `language`, numbered sentences (none repeats verbatim)."""
    sentences = SENTENCES[language]
    lines: list[str] = []
    k = seed
    while sum(len(line) + 1 for line in lines) < chars:
        lines.append(f"{k}. {sentences[k % len(sentences)]}")
        k += 1
    return "\n".join(lines)


def line_for(run: Run, request_index: int) -> dict[str, Any]:
    """The ledger line of the `request_index`-th agent request (calls pair one to one)."""
    lines = run.ledgers.lines
    assert len(lines) == len(run.provider.agent_requests()), "one ledger line per agent call"
    return lines[request_index]


def answering(requests: Sequence[Sequence[BaseMessage]], call_id: str) -> int:
    """Index of the first request whose last message answers tool call `call_id`."""
    for index, request in enumerate(requests):
        last = request[-1] if request else None
        if isinstance(last, ToolMessage) and last.tool_call_id == call_id:
            return index
    msg = f"no request ends with the result of {call_id}"
    raise AssertionError(msg)


def tool_calls_of(run: Run) -> list[dict[str, Any]]:
    """Every `fetch` call in the stored history, in order."""
    return [
        call
        for m in run.stored_messages()
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call["name"] == "fetch"
    ]
