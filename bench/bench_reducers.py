"""Benchmark the trajectory reducers: planted facts kept, and time per trajectory size.

Usage: `python bench/bench_reducers.py [--quick]`

Three deterministic synthetic trajectories (seeded `random.Random`), one per paradigm,
each reduced with the default extractive summariser (`summarize=None`) and `count_tokens`:

- tool loop (`reduce_agent`, `keep_recent_steps=3`): a system prompt, the task, then units
  of an `AIMessage` with one to three (parallel) tool calls and their `ToolMessage`
  results. Each result plants facts (an invoice id, a date, an amount, a count) among
  filler sentences (the invoice id is in the call's arguments too); about one result in
  eight fails (`status="error"`, a request id and a timeout in seconds);
- plan (`reduce_plan`, `keep_recent=3`): a `PlanTrajectory` whose steps are done, failed
  or skipped (the last few pending, without a result). Each result plants a date
  (2025-03-14), two numbers, a ticket id (TKT-4821) and a conclusion sentence ("We
  concluded the cache of shard 7 is stale."), among filler sentences;
- reflection (`reduce_reflection`): rounds of a long draft and one to three critique
  points; about half the points repeat an earlier one, often as a near-duplicate
  ("Too long." / "too long!" / "TOO LONG").

Filler sentences carry no number, identifier or decision word, so the extractive
summariser scores them zero: what it must keep is exactly what was planted.

Reported:

1. each trajectory reduced to 25%, 10% and 5% of its own size (`count_message_tokens` of
   the messages; `count_tokens` of the render): whether the must-keep part fits (a
   `ContextWindowExceeded` is a legitimate outcome, printed as "must-keep does not fit"),
   the output's size, and the share of planted facts still present. A number, date or id
   counts as present only as a whole token (so "12" is not found inside "112" or
   "2025-03-12"); a conclusion or critique point when its normalised text is contained;
2. reduction time for 100, 1,000 and 10,000 steps (units, rounds) per paradigm at 25% of
   the trajectory's size (where every size's must-keep part fits, so a whole reduction is
   timed, not an early `ContextWindowExceeded`): the median of up to 5 runs, each size
   in its own process, the time per step and the growth per 10x. A run may take at least
   1.1 x 15 x the smaller size's time (up to a cap), so a run stopped at that limit
   proves the growth target missed; its time is then a lower bound, marked ">". A size
   whose time, extrapolated at the growth seen so far (at least linear), exceeds its
   limit is not run.

Targets, checked at the end (issue 5, item 4):

1. at every ratio where the must-keep part fits: the output fits the budget; plan: 100% of
   the step numbers, descriptions and statuses, and 100% of the numbers, dates, ids and
   conclusions of the summarised steps; reflection: 100% of the distinct critique points
   (by normalised text), the latest draft verbatim, the round count right; tool loop:
   the task and the last 3 units verbatim (the share of planted facts is reported, not a
   target);
2. linear time: time(10,000) / time(1,000) <= 15 per paradigm (10x for linear, plus noise
   on a shared 2-core machine), and likewise time(1,000) / time(100); a size stopped at
   its limit or not run fails. `--quick` runs 100 and 1,000 steps only, with shorter
   limits (a whole run: ~30 s; the full run: ~2 min).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

# Run from a source checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_contextkit.compaction.facts import (
    has_decision,
    has_identifier,
    has_number,
    normalised,
)
from langchain_contextkit.compaction.summarizers import render_transcript
from langchain_contextkit.errors import ContextWindowExceeded
from langchain_contextkit.messages.lists import find_message_problems
from langchain_contextkit.reducers.agent import reduce_agent
from langchain_contextkit.reducers.plan import reduce_plan
from langchain_contextkit.reducers.reflection import reduce_reflection
from langchain_contextkit.reducers.trajectories import (
    PlanStep,
    PlanTrajectory,
    ReflectionRound,
    ReflectionTrajectory,
)
from langchain_contextkit.tokens.count import count_message_tokens, count_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence
    from multiprocessing.connection import Connection

RATIOS = (0.25, 0.10, 0.05)
TIMING_RATIO = 0.25  # every size's must-keep part fits there, so a whole reduction is timed
KEEP_RECENT = 3
GROWTH_LIMIT = 15.0  # time per 10x steps: 10x is linear, the rest is slack for noise

# Long step results: a tool's or a step's output is mostly text that carries no fact.
AGENT_FILLER = 10  # filler sentences per tool result
PLAN_FILLER = 40  # filler sentences per step result
DRAFT_FILLER = 14  # filler sentences per draft

FILLER = (
    "The response came back in the usual shape and nothing in it looked out of place.",
    "Most of the entries repeat what the previous page already showed in other words.",
    "The service answered normally and the dashboards looked unremarkable for the hour.",
    "Nothing in the logs pointed at a regression in the request path or the pool.",
    "Some background noise showed up in the traces, as it does at this time of day.",
    "The operators on call had not touched the configuration since the last rollout.",
    "Further reading of the worker queues showed the expected depth without a backlog.",
    "The team looked at the graphs again and saw the same flat lines as before.",
    "A second pass over the output turned up the same records in a different order.",
    "The remaining rows describe routine housekeeping and can be skimmed quickly.",
    "Several fields were empty, which is normal for records of this kind.",
    "The page also lists the contact details of the account owner and the billing team.",
    "The formatting of the report changed a little but the content stayed the same.",
    "There were a few retries on the client side that all succeeded eventually.",
    "The caches were warm and the hit rate looked like it does on a quiet afternoon.",
    "Nobody reported anything unusual in the support channel during that window.",
)
SUBJECTS = ("cache", "index", "queue", "replica", "pool", "scheduler", "gateway", "cron job")
STATES = ("stale", "saturated", "misconfigured", "healthy", "leaking memory", "throttled")
DRAFT_TOPICS = ("revenue", "churn", "hiring", "pricing", "latency", "support", "security")
POINT_VARIANTS = (
    lambda p: p,
    lambda p: p.lower().rstrip(".") + "!",
    lambda p: p.upper().rstrip("."),
    lambda p: "  " + p.replace(" ", "  ") + " ",
)
BASE_POINTS = (
    "Too long.",
    "Cite the sources.",
    "Mention the risks.",
    "The tone is too casual.",
    "Add an executive summary.",
)
_POINT_ADJECTIVES = ("vague", "unsupported", "repetitive", "outdated", "confusing", "too brief")
_POINT_PARTS = ("introduction", "second paragraph", "chart caption", "table", "conclusion", "title")
_SEPARATED = r"[.,:/\-]\d"


def filler(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(count))


def date(rng: random.Random) -> str:
    return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


@dataclass
class Planted:
    """Facts planted in one trajectory, by kind, each with what it belongs to."""

    tokens: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # kind -> (owner, t)
    phrases: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    def token(self, kind: str, owner: int, value: str) -> str:
        self.tokens.setdefault(kind, []).append((owner, value))
        return value

    def phrase(self, kind: str, owner: int, value: str) -> str:
        self.phrases.setdefault(kind, []).append((owner, value))
        return value


# --- trajectories ------------------------------------------------------------------------


def tool_loop(units: int, seed: int = 1) -> tuple[list[BaseMessage], Planted]:
    rng = random.Random(seed)
    planted = Planted()
    messages: list[BaseMessage] = [
        SystemMessage("You reconcile invoices. Use the tools; never guess an amount."),
        HumanMessage(
            "Reconcile every March invoice of account ACC-7781 against the ledger and list"
            " the ones that do not match."
        ),
    ]
    next_call = 0
    for unit in range(1, units + 1):
        calls = []
        results: list[ToolMessage] = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            next_call += 1
            call_id = f"call_{next_call}"
            invoice = f"INV-{10_000 + next_call}"
            calls.append(
                {
                    "name": "get_invoice",
                    "args": {"invoice": invoice},
                    "id": call_id,
                    "type": "tool_call",
                }
            )
            if rng.random() < 0.125:
                request = planted.token("error id", unit, f"REQ-{rng.randint(1000, 9999)}")
                seconds = planted.token("error number", unit, str(rng.randint(31, 299)))
                content = (
                    f"Error: the ledger service timed out after {seconds} s (request {request})."
                )
                results.append(
                    ToolMessage(content, tool_call_id=call_id, name="get_invoice", status="error")
                )
                continue
            planted.token("id", unit, invoice)
            day = planted.token("date", unit, date(rng))
            amount = planted.token(
                "number", unit, f"${rng.randint(100, 99_999):,}.{rng.randint(0, 99):02d}"
            )
            lines = planted.token("number", unit, str(rng.randint(2, 950)))
            content = (
                f"Invoice {invoice} dated {day} totals {amount} over {lines} lines. "
                + filler(rng, AGENT_FILLER)
            )
            results.append(ToolMessage(content, tool_call_id=call_id, name="get_invoice"))
        messages.append(AIMessage("", tool_calls=calls))
        messages.extend(results)
    return messages, planted


STATUSES = ("done", "done", "done", "failed", "skipped")


def plan(steps: int, seed: int = 2) -> tuple[PlanTrajectory, Planted]:
    rng = random.Random(seed)
    planted = Planted()
    pending = max(1, steps // 20)
    out = []
    for number in range(1, steps + 1):
        subject = rng.choice(SUBJECTS)
        description = f"Inspect the {subject} of shard {number}"
        if number > steps - pending:
            out.append(PlanStep(number=number, description=description, status="pending"))
            continue
        day = planted.token("date", number, date(rng))
        latency = planted.token("number", number, str(rng.randint(100, 9_999)))
        share = planted.token("number", number, f"{rng.randint(1, 99)}%")
        ticket = planted.token("id", number, f"TKT-{rng.randint(1000, 9999)}")
        conclusion = planted.phrase(
            "conclusion",
            number,
            f"We concluded the {subject} of shard {number} is {rng.choice(STATES)}.",
        )
        result = (
            f"Checked on {day}: p99 latency {latency} ms with {share} of requests retried,"
            f" filed as {ticket}. {filler(rng, PLAN_FILLER)} {conclusion}"
        )
        status = rng.choice(STATUSES)
        out.append(PlanStep(number=number, description=description, status=status, result=result))
    goal = "Find why the checkout API got slow in March and fix it."
    return PlanTrajectory(goal=goal, steps=tuple(out)), planted


def new_point(index: int) -> str:
    adjective = _POINT_ADJECTIVES[index % len(_POINT_ADJECTIVES)]
    part = _POINT_PARTS[(index // len(_POINT_ADJECTIVES)) % len(_POINT_PARTS)]
    return f"The {part} of section {index} is {adjective}."


def reflection(rounds: int, seed: int = 3) -> tuple[ReflectionTrajectory, Planted]:
    rng = random.Random(seed)
    planted = Planted()
    raised: list[str] = []
    out = []
    fresh = 0
    for number in range(1, rounds + 1):
        topic = rng.choice(DRAFT_TOPICS)
        draft = f"Draft {number}: the quarterly memo on {topic}. {filler(rng, DRAFT_FILLER)}"
        points = []
        for _ in range(rng.randint(1, 3)):
            if raised and rng.random() < 0.5:
                point = rng.choice(POINT_VARIANTS)(rng.choice(raised))
            elif fresh < len(BASE_POINTS):
                point = BASE_POINTS[fresh]
                fresh += 1
                raised.append(point)
            else:
                point = new_point(fresh)
                fresh += 1
                raised.append(point)
            points.append(point)
        out.append(ReflectionRound(draft=draft, critique=tuple(points)))
    for index, point in enumerate(raised):
        planted.phrase("critique point", index, point)
    return ReflectionTrajectory(task="Write the Q1 memo for the board.", rounds=tuple(out)), planted


# --- checks ------------------------------------------------------------------------------


def has_token(text: str, token: str) -> bool:
    """Whether `token` occurs in `text` as a whole token, not inside a longer one."""
    pattern = rf"(?<![\w\-.,:/$€£¥]){re.escape(token)}(?![\w%]|{_SEPARATED})"
    return re.search(pattern, text) is not None


def has_phrase(text: str, phrase: str) -> bool:
    return normalised(phrase) in normalised(text)


@dataclass
class Share:
    kept: int = 0
    total: int = 0

    def add(self, ok: bool) -> None:
        self.kept += ok
        self.total += 1

    def __str__(self) -> str:
        if not self.total:
            return "-"
        return f"{self.kept / self.total:.0%} ({self.kept}/{self.total})"

    @property
    def complete(self) -> bool:
        return self.kept == self.total


@dataclass
class RatioRow:
    paradigm: str
    ratio: float
    full: int
    budget: int
    fits: bool
    used: int = 0
    required: int = 0
    seconds: float = 0.0
    shares: dict[str, Share] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)  # name -> held (targets)


def run(coroutine: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = asyncio.run(coroutine)
    return result, time.perf_counter() - start


def check_agent(messages: list[BaseMessage], planted: Planted, ratio: float) -> RatioRow:
    full = count_message_tokens(messages)
    budget = int(full * ratio)
    row = RatioRow("tool loop", ratio, full, budget, fits=True)
    try:
        out, row.seconds = run(reduce_agent(messages, budget, keep_recent_steps=KEEP_RECENT))
    except ContextWindowExceeded as exc:
        row.fits, row.required = False, exc.required
        return row
    row.used = count_message_tokens(out)
    text = render_transcript(out)
    recent = _last_units(messages, KEEP_RECENT)
    row.checks["fits budget"] = row.used <= budget
    row.checks["valid messages"] = not find_message_problems(out)
    row.checks["task first, verbatim"] = out[:2] == messages[:2]
    row.checks["last 3 units verbatim"] = out[len(out) - len(recent) :] == recent
    for kind, facts in planted.tokens.items():
        share = row.shares.setdefault(kind, Share())
        for _, value in facts:
            share.add(has_token(text, value))
    return row


def _last_units(messages: Sequence[BaseMessage], units: int) -> list[BaseMessage]:
    starts = [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and m.tool_calls]
    return list(messages[starts[-units] :])


def check_plan(trajectory: PlanTrajectory, planted: Planted, ratio: float) -> RatioRow:
    full = count_tokens(trajectory.render())
    budget = int(full * ratio)
    row = RatioRow("plan", ratio, full, budget, fits=True)
    try:
        out, row.seconds = run(reduce_plan(trajectory, budget, keep_recent=KEEP_RECENT))
    except ContextWindowExceeded as exc:
        row.fits, row.required = False, exc.required
        return row
    text = out.render()
    row.used = count_tokens(text)
    row.checks["fits budget"] = row.used <= budget
    skeleton = row.shares.setdefault("step no./status", Share())
    for before, after in zip(trajectory.steps, out.steps, strict=False):
        kept = (before.number, before.description, before.status) == (
            after.number,
            after.description,
            after.status,
        )
        skeleton.add(kept and f"{before.number}. [{before.status}] {before.description}" in text)
    skeleton.total += abs(len(trajectory.steps) - len(out.steps))
    with_result = [s.number for s in trajectory.steps if s.result is not None]
    recent = set(with_result[-KEEP_RECENT:])
    by_number = {s.number: s for s in out.steps}
    row.checks["recent results verbatim"] = all(
        by_number[s.number].result == s.result for s in trajectory.steps if s.number in recent
    )
    summarised = {s.number for s in out.steps if s.summarized}
    row.shares["summarised"] = Share(len(summarised), len(with_result))
    for kind, facts in planted.tokens.items():
        share = row.shares.setdefault(kind, Share())
        for owner, value in facts:
            if owner in summarised:
                share.add(has_token(text, value))
    for kind, facts in planted.phrases.items():
        share = row.shares.setdefault(kind, Share())
        for owner, value in facts:
            if owner in summarised:
                share.add(has_phrase(text, value))
    return row


def check_reflection(trajectory: ReflectionTrajectory, planted: Planted, ratio: float) -> RatioRow:
    full = count_tokens(trajectory.render())
    budget = int(full * ratio)
    row = RatioRow("reflection", ratio, full, budget, fits=True)
    try:
        out, row.seconds = run(reduce_reflection(trajectory, budget))
    except ContextWindowExceeded as exc:
        row.fits, row.required = False, exc.required
        return row
    text = out.render()
    row.used = count_tokens(text)
    row.checks["fits budget"] = row.used <= budget
    row.checks["latest draft verbatim, alone"] = [r.draft for r in out.rounds] == [
        trajectory.rounds[-1].draft
    ]
    row.checks["round count"] = out.round_count == trajectory.round_count
    kept_keys = {normalised(p) for p in out.all_points()}
    points = row.shares.setdefault("critique point", Share())
    distinct = {normalised(value) for _, value in planted.phrases["critique point"]}
    for key in sorted(distinct):
        points.add(key in kept_keys)
    row.shares["points listed"] = Share(len(out.all_points()), len(trajectory.all_points()))
    return row


# --- timing (in a child process, so a run that takes too long can be stopped) --------------


def build(paradigm: str, size: int) -> tuple[Any, int]:
    """The trajectory of `size` steps and its full token size."""
    if paradigm == "tool loop":
        messages, _ = tool_loop(size)
        return messages, count_message_tokens(messages)
    if paradigm == "plan":
        trajectory, _ = plan(size)
        return trajectory, count_tokens(trajectory.render())
    loop, _ = reflection(size)
    return loop, count_tokens(loop.render())


def reduce_once(paradigm: str, trajectory: Any, budget: int) -> Any:
    if paradigm == "tool loop":
        return reduce_agent(trajectory, budget, keep_recent_steps=KEEP_RECENT)
    if paradigm == "plan":
        return reduce_plan(trajectory, budget, keep_recent=KEEP_RECENT)
    return reduce_reflection(trajectory, budget)


def child(paradigm: str, size: int, repeats: int, spend: float, pipe: Connection) -> None:
    """Time up to `repeats` reductions (fewer once `spend` seconds are spent).

    Sends ("built", full tokens) once the trajectory is built, then (seconds, outcome) per
    run, so a parent that stops this process keeps the runs already done.
    """
    trajectory, full = build(paradigm, size)
    budget = int(full * TIMING_RATIO)
    pipe.send(("built", full))
    spent = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            asyncio.run(reduce_once(paradigm, trajectory, budget))
            outcome = "fits"
        except ContextWindowExceeded:
            outcome = "must-keep does not fit"
        seconds = time.perf_counter() - start
        pipe.send((seconds, outcome))
        spent += seconds
        if spent >= spend:
            break
    pipe.close()


@dataclass
class TimeRow:
    paradigm: str
    size: int
    seconds: float  # median of the runs; a lower bound when stopped before the first ended
    runs: int
    full: int = 0
    outcome: str = ""
    stopped: bool = False  # stopped before any run ended
    skipped: str = ""  # why the size was not run


def time_size(paradigm: str, size: int, repeats: int, spend: float, limit: float) -> TimeRow:
    """Run `child` in its own process; stop it when one run takes over `limit` seconds."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=child, args=(paradigm, size, repeats, spend, send))
    process.start()
    send.close()
    full, times, outcome = 0, [], ""
    deadline = None
    timed_out = False
    try:
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not receive.poll(wait):
                timed_out = True
                break
            try:
                message = receive.recv()
            except EOFError:
                break  # the child finished
            if message[0] == "built":
                full = message[1]
            else:
                times.append(message[0])
                outcome = message[1]
            deadline = time.monotonic() + limit  # for the next run
    finally:
        if not timed_out:
            process.join(timeout=30)  # it closed the pipe: it is on its way out
        if process.is_alive():
            process.terminate()
        process.join()
    if not timed_out and process.exitcode != 0:
        msg = f"timing {paradigm} at {size:,} steps failed (exit code {process.exitcode})"
        raise RuntimeError(msg)
    if times:
        return TimeRow(paradigm, size, statistics.median(times), len(times), full, outcome)
    return TimeRow(paradigm, size, limit, 0, full, "stopped at the time limit", stopped=True)


# --- report ------------------------------------------------------------------------------


def print_ratio_table(rows: Sequence[RatioRow], sizes: dict[str, int]) -> None:
    print(
        "1. planted facts kept, extractive summariser; tokens: count_tokens"
        " (count_message_tokens for the tool loop)"
    )
    for paradigm, size in sizes.items():
        print(f"   {paradigm}: {size} steps")
    header = f"{'paradigm':11} {'ratio':>5} {'full':>7} {'budget':>7} {'out':>7} {'ms':>8}  kept"
    print(header)
    print("-" * 110)
    for row in rows:
        head = f"{row.paradigm:11} {row.ratio:5.0%} {row.full:7,} {row.budget:7,}"
        if not row.fits:
            print(f"{head} {'-':>7} {'-':>8}  must-keep does not fit ({row.required:,} tokens)")
            continue
        shares = ", ".join(f"{kind} {share}" for kind, share in row.shares.items())
        print(f"{head} {row.used:7,} {row.seconds * 1e3:8.1f}  {shares}")
        failed = [name for name, held in row.checks.items() if not held]
        checks = "all held" if not failed else "FAILED: " + ", ".join(failed)
        print(f"{'':48}  checks ({', '.join(row.checks)}): {checks}")


def print_time_table(rows: Sequence[TimeRow]) -> None:
    print()
    print(
        f"2. reduction time at {TIMING_RATIO:.0%} of the trajectory's size: median of the runs,"
        " each size in its own process ('>' = stopped at the limit: a lower bound)"
    )
    header = (
        f"{'paradigm':11} {'steps':>7} {'tokens':>11} {'runs':>4} {'median ms':>11}"
        f" {'us/step':>9} {'growth':>8}  outcome"
    )
    print(header)
    print("-" * len(header))
    previous: TimeRow | None = None
    for row in rows:
        head = f"{row.paradigm:11} {row.size:7,}"
        if row.skipped:
            print(f"{head} {'':11} {'':4} {'-':>11} {'-':>9} {'-':>8}  not run: {row.skipped}")
            continue
        mark = ">" if row.stopped else " "
        growth = ""
        if previous is not None and previous.paradigm == row.paradigm:
            growth = f"{mark}{row.seconds / previous.seconds:.1f}x"
        tokens = f"{row.full:11,}" if row.full else f"{'?':>11}"
        print(
            f"{head} {tokens} {row.runs:4} {mark}{row.seconds * 1e3:10.1f}"
            f" {mark}{row.seconds / row.size * 1e6:8.1f} {growth:>8}  {row.outcome}"
        )
        previous = row


def verdicts(ratio_rows: Sequence[RatioRow], time_rows: Sequence[TimeRow]) -> int:
    print()
    failures = 0
    targets = {
        "tool loop": (),
        "plan": ("step no./status", "number", "date", "id", "conclusion"),
        "reflection": ("critique point",),
    }
    for row in ratio_rows:
        label = f"{row.paradigm} at {row.ratio:.0%}"
        if not row.fits:
            print(f"PASS: {label}: must-keep does not fit ({row.required:,} > {row.budget:,})")
            continue
        missed = [
            k for k in targets[row.paradigm] if k in row.shares and not row.shares[k].complete
        ]
        failed = [name for name, held in row.checks.items() if not held]
        ok = not missed and not failed
        failures += not ok
        detail = "; ".join(
            [*(f"{k} {row.shares[k]}" for k in missed), *(f"{n} broken" for n in failed)]
        )
        wanted = [f"100% {k}" for k in targets[row.paradigm]] + list(row.checks)
        verdict = "PASS" if ok else "FAIL"
        print(f"{verdict}: {label}: {', '.join(wanted)}" + (f": {detail}" if detail else ""))
    for paradigm in targets:
        ordered = [r for r in time_rows if r.paradigm == paradigm]
        for low, high in itertools.pairwise(ordered):
            if low.skipped or low.stopped:
                continue
            label = f"{paradigm} time({high.size:,})/time({low.size:,})"
            if high.skipped:
                failures += 1
                print(f"FAIL: {label} not measured: {high.skipped}")
                continue
            factor = high.seconds / low.seconds
            ok = factor <= GROWTH_LIMIT and not high.stopped
            failures += not ok
            bound = ">=" if high.stopped else "="
            note = ""
            if high.stopped:
                proven = "" if factor > GROWTH_LIMIT else ", before the growth was measured"
                note = f"; stopped after {high.seconds:.0f} s{proven}"
            print(
                f"{'PASS' if ok else 'FAIL'}: {label} {bound} {factor:.1f}"
                f" (target <= {GROWTH_LIMIT:.0f}; linear = 10){note}"
            )
    return failures


def load_line() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average: unknown"
    return f"load average: {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        paradigm, size, repeats, spend = sys.argv[2:6]
        child(paradigm, int(size), int(repeats), float(spend))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="100 and 1,000 steps only, shorter time limits"
    )
    args = parser.parse_args()

    size = 100
    sizes = (100, 1_000) if args.quick else (100, 1_000, 10_000)
    # Seconds one run may take; at least 1.1 x GROWTH_LIMIT x the smaller size's time, so
    # a run stopped at its limit proves the growth target missed (below the cap).
    caps = {100: 30.0, 1_000: 20.0 if args.quick else 90.0, 10_000: 150.0}
    floors = {100: 30.0, 1_000: 0.0 if args.quick else 90.0, 10_000: 150.0}
    repeats = {100: 5, 1_000: 3, 10_000: 3}
    spend = 5.0 if args.quick else 30.0

    print(f"Python {sys.version.split()[0]}; {load_line()}")
    scoring = [f for f in FILLER if has_number(f) or has_identifier(f) or has_decision(f)]
    if scoring:  # the premise: only planted text is worth keeping
        print(f"FAIL: filler sentences that carry a fact: {scoring}")
        return 1
    messages, agent_facts = tool_loop(size)
    trajectory, plan_facts = plan(size)
    loop, reflection_facts = reflection(size)
    ratio_rows = [check_agent(messages, agent_facts, ratio) for ratio in RATIOS]
    ratio_rows += [check_plan(trajectory, plan_facts, ratio) for ratio in RATIOS]
    ratio_rows += [check_reflection(loop, reflection_facts, ratio) for ratio in RATIOS]
    print_ratio_table(ratio_rows, {"tool loop": size, "plan": size, "reflection": size})

    time_rows: list[TimeRow] = []
    for paradigm in ("tool loop", "plan", "reflection"):
        rows: list[TimeRow] = []
        for steps in sizes:
            previous = rows[-1] if rows else None
            if previous is None:
                row = time_size(paradigm, steps, repeats[steps], spend, caps[steps])
            elif previous.stopped or previous.skipped:
                row = TimeRow(paradigm, steps, 0.0, 0, skipped="the smaller size was not measured")
            else:
                proof = 1.1 * GROWTH_LIMIT * previous.seconds
                limit = min(caps[steps], max(floors[steps], proof))
                # The growth seen so far (at least linear) predicts this size's time.
                growth = max(10.0, previous.seconds / rows[-2].seconds if len(rows) > 1 else 0)
                predicted = previous.seconds * growth * steps / previous.size / 10
                if predicted > limit:
                    row = TimeRow(
                        paradigm,
                        steps,
                        0.0,
                        0,
                        skipped=f"at {growth:.0f}x per 10x it would take ~{predicted:.0f} s,"
                        f" over the {limit:.0f} s limit",
                    )
                else:
                    row = time_size(paradigm, steps, repeats[steps], spend, limit)
            rows.append(row)
        time_rows += rows
    print_time_table(time_rows)
    print()
    print(load_line())
    return 1 if verdicts(ratio_rows, time_rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
