"""The demo's conversation: an on-call shift on the sample project, and a scripted agent.

The user's turns are the same for every model. Offline, `scripted_reply` plays the
agent: for each turn it follows a plan of tool calls (explore with the terminal, write,
update and read back notes), each step allowed to use what the earlier steps of the turn
returned (a note id found by a search), then answers. It reads its progress from the
request itself (the tool calls and results of the current turn, which the middleware
always keeps), so it works whatever the middleware compacted before the turn.

Facts are planted early (a ticket, a date, two decisions, a blocker); the demo checks
whether the model can still see them at its last call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

__all__ = ["FACTS", "SYSTEM_PROMPT", "TURNS", "Fact", "Step", "Turn", "scripted_reply"]

SYSTEM_PROMPT = (
    "You are the on-call assistant for Kestrel, a shipment-tracking service. Its "
    "documentation is the terminal's workspace (read-only). Explore it step by step with "
    "the terminal tool: ls, then the right folder, then grep, then only the lines you need "
    "(head -n, grep -n -A). Keep notes with the note tool: the incident's state "
    "(task_state), decisions (conclusion), blockers (blocker) and follow-ups (action). "
    "When something changes, search for the note and update it instead of writing a new "
    "one. Answer briefly, naming the files you used."
)

_NOTE_ID = re.compile(r"note_\d{8}_\d{6}_[0-9a-f]+")

Args = Mapping[str, Any]
ArgsFrom = Callable[[list[str]], Args | None]
"""Arguments computed from the turn's earlier tool results; None skips the step."""


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call of the scripted agent."""

    tool: str
    args: Args | ArgsFrom


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn, and how the scripted agent handles it."""

    user: str
    steps: tuple[Step, ...]
    answer: str


@dataclass(frozen=True, slots=True)
class Fact:
    """Something the user or the docs said early that the model must still see at the end."""

    label: str
    needle: str

    @property
    def turn(self) -> int:
        """The first user turn (1-based) that says it; it counts only once that turn ran."""
        return next(i for i, turn in enumerate(TURNS, start=1) if self.needle in turn.user)


def _sh(command: str) -> Step:
    return Step("terminal", {"command": command})


def _note(**args: Any) -> Step:  # noqa: ANN401 - the note tool's arguments
    return Step("note", args)


def _with_found_id(**args: Any) -> Step:  # noqa: ANN401 - the note tool's arguments
    """A note call on the id the previous step (a search) found; skipped when none."""

    def build(results: list[str]) -> Args | None:
        found = _NOTE_ID.search(results[-1]) if results else None
        return {**args, "note_id": found.group(0)} if found else None

    return Step("note", build)


FACTS: tuple[Fact, ...] = (
    Fact("incident ticket", "INC-4821"),
    Fact("change freeze", "2025-11-20"),
    Fact("decision: replica cap", "16 replicas"),
    Fact("blocker ticket", "DBA-317"),
    Fact("decision: dedupe window", "96 hours"),
)

TURNS: tuple[Turn, ...] = (
    Turn(
        "Hi. I'm on call for Kestrel this week and just got paged; the incident ticket is "
        "INC-4821. First, look around the project: what is in it?",
        (_sh("ls"), _sh("ls docs docs/decisions postmortems")),
        "The project is Kestrel's documentation: README.md, docs/ (architecture, runbook, "
        "on-call guide, three ADRs) and one postmortem from 2025-08-14. I will track "
        "INC-4821 as we go.",
    ),
    Turn(
        "What does Kestrel do, in short?",
        (_sh("grep -n -A 8 'In one paragraph' README.md"),),
        "README.md: carriers post events to kestrel-gateway, which writes them to the Kafka "
        "topic tracking.raw; kestrel-normalizer maps and dedupes them into PostgreSQL "
        "(pg-kestrel-01, replica pg-kestrel-02); kestrel-api serves the timelines. "
        "Unparseable events go to tracking.dlq.",
    ),
    Turn(
        "Keep a note of the incident: ticket INC-4821, alert KestrelConsumerLag fired at "
        "06:52 UTC, lag 74,000 and rising. Also, the change freeze starts 2025-11-20 at "
        "18:00 UTC, so anything risky must land before then.",
        (
            _note(
                action="create",
                title="INC-4821: consumer lag on tracking.raw",
                note_type="task_state",
                tags=["INC-4821", "lag"],
                content=(
                    "- Ticket INC-4821, alert KestrelConsumerLag at 06:52 UTC, lag 74,000 "
                    "and rising.\n- Change freeze from 2025-11-20 18:00 UTC: risky changes "
                    "before then."
                ),
            ),
        ),
        "Noted (task_state): INC-4821, KestrelConsumerLag at 06:52 UTC with lag 74,000, "
        "and the freeze from 2025-11-20 18:00 UTC.",
    ),
    Turn(
        "What does the runbook say about KestrelConsumerLag?",
        (
            _sh("grep -rln KestrelConsumerLag docs"),
            _sh("grep -n -A 22 '^## KestrelConsumerLag' docs/runbook.md"),
        ),
        "docs/runbook.md: it fires above 50,000 messages for 10 minutes. Check the lag per "
        "partition, the batch latency and the DLQ; restart a stuck consumer, scale up if "
        "the normalizers are slow (never above 16 while the primary shows lock waits), "
        "and do not scale if the database is slow.",
    ),
    Turn(
        "Lag is on all 12 partitions, not one. What is the architecture behind the normalizers?",
        (_sh("cd docs"), _sh("head -n 30 architecture.md")),
        "docs/architecture.md: gateway -> tracking.raw (12 partitions) -> "
        "kestrel-normalizer (batches of 500, autoscaled 6 to 16) -> pg-kestrel-01, "
        "replicated to pg-kestrel-02. Lag on all partitions means the normalizers or the "
        "database are too slow.",
    ),
    Turn(
        "How far can we scale the normalizers?",
        (_sh("grep -n -i 'replicas' architecture.md"),),
        "architecture.md: the autoscaler runs 6 to 16 replicas; the primary takes 16 "
        "writers comfortably and slows down above that (lock waits on the shipments row).",
    ),
    Turn(
        "Has this happened before?",
        (_sh("ls ../postmortems"), _sh("cat ../postmortems/2025-08-14-consumer-lag.md")),
        "Yes: INC-4410 on 2025-08-14. Scaling to 24 replicas made the primary slower (batch "
        "latency 3.1 s); going back to 16 fixed it. Reading from a lagging replica made "
        "timelines staler, unnoticed for lack of an alert.",
    ),
    Turn(
        "Decision: we scale the normalizers to 16 replicas and no further; the DB on-call "
        "confirmed pg-kestrel-01 cannot take more than 16 writers. Record it.",
        (
            _note(
                action="create",
                title="Decision: normalizers at 16 replicas, no further",
                note_type="conclusion",
                tags=["INC-4821", "scaling"],
                content=(
                    "Scale kestrel-normalizer to 16 replicas and no further: pg-kestrel-01 "
                    "cannot take more than 16 writers (DB on-call; INC-4410 went to 24 and "
                    "got slower)."
                ),
            ),
        ),
        "Recorded the decision (conclusion): 16 replicas, no further.",
    ),
    Turn(
        "Scaled to 16. Batch latency is 95 ms. Anything in the DLQ runbook I should check?",
        (_sh("grep -n -A 12 '^## KestrelDLQGrowing' runbook.md"),),
        "runbook.md: check `kestrelctl dlq top --by carrier`; fix the mapping, deploy the "
        "normalizer, then `kestrelctl dlq replay --carrier NAME --since 2h`. Replays are "
        "safe only within the dedupe window.",
    ),
    Turn(
        "The DLQ has 12,400 messages, all from carrier Bluefin, error 'unknown status code "
        "PX7'. And the replica pg-kestrel-02 is 40 minutes behind, so failover is off the "
        "table until DBA-317 is done. That's a blocker; note it.",
        (
            _note(
                action="create",
                title="No failover: pg-kestrel-02 is 40 minutes behind (DBA-317)",
                note_type="blocker",
                tags=["INC-4821", "database"],
                content=(
                    "Replica pg-kestrel-02 is 40 minutes behind; no failover until DBA-317 "
                    "is done (the runbook needs under 30 seconds). Owner: database on-call."
                ),
            ),
        ),
        "Blocker noted: no failover until DBA-317 brings pg-kestrel-02 back in line. The "
        "DLQ problem is Bluefin's status code PX7.",
    ),
    Turn(
        "What does the runbook say about failover?",
        (_sh("grep -n -A 6 '^## Failover' runbook.md"),),
        "runbook.md: only with the database on-call, and only when the replica is under 30 "
        "seconds behind; otherwise events in the gap must be replayed from tracking.raw "
        "(possible for 14 days).",
    ),
    Turn(
        "How do DLQ replays avoid duplicates?",
        (_sh("ls decisions"), _sh("cat decisions/0011-idempotency-keys.md")),
        "ADR-0011: the normalizer drops events whose key sha256(carrier_id:event_id) was "
        "seen in the last 72 hours. Replays older than that create duplicates unless the "
        "window is widened first.",
    ),
    Turn(
        "Bluefin's bad events started four days ago, so a replay goes past the 72-hour "
        "window. Decision: raise the dedupe window to 96 hours before replaying. Record it, "
        "with the storage cost.",
        (
            _sh("grep -n 'extra day' decisions/0011-idempotency-keys.md"),
            _note(
                action="create",
                title="Decision: dedupe window 72 -> 96 hours before the Bluefin replay",
                note_type="conclusion",
                tags=["INC-4821", "dedupe", "bluefin"],
                content=(
                    "Raise the dedupe window from 72 to 96 hours before replaying Bluefin's "
                    "4 days of DLQ events. Cost: one extra day is about 250 million keys "
                    "and 18 GB (ADR-0011)."
                ),
            ),
        ),
        "Recorded: dedupe window 72 -> 96 hours before the replay; one extra day costs "
        "about 250 million keys and 18 GB (ADR-0011).",
    ),
    Turn(
        "Update the incident note: scaled to 16 replicas at 07:31, latency 95 ms, lag "
        "falling (52,000).",
        (
            _note(action="search", query="INC-4821 consumer lag", note_type="task_state"),
            _with_found_id(
                action="update",
                content=(
                    "- Ticket INC-4821, alert KestrelConsumerLag at 06:52 UTC, lag 74,000.\n"
                    "- 07:31 scaled to 16 replicas; batch latency 95 ms; lag falling "
                    "(52,000).\n- Change freeze from 2025-11-20 18:00 UTC."
                ),
            ),
        ),
        "Updated the incident note in place: 16 replicas at 07:31, 95 ms, lag 52,000.",
    ),
    Turn(
        "Where do the Bluefin mapping fixes go, according to the docs?",
        (_sh("grep -rn -i 'mapping' .."),),
        "docs/runbook.md (KestrelDLQGrowing): add the mapping fix to the normalizer, deploy "
        "it, then replay the DLQ for the carrier.",
    ),
    Turn(
        "Is the API affected? Customers are asking about stale timelines.",
        (_sh("grep -n -A 12 '^## KestrelApiLatency' runbook.md"),),
        "runbook.md: check the Redis hit rate, then replica lag if the API reads from "
        "pg-kestrel-02. If the replica is behind: `kestrelctl api read-from primary`.",
    ),
    Turn(
        "The API reads from the replica right now! Which decision record covers that?",
        (_sh("grep -rln 'read-from' .."), _sh("cat decisions/0014-replica-lag-alert.md")),
        "ADR-0014 (proposed): alert on replica lag and read from the replica only under "
        "10 seconds behind (DBA-290). With pg-kestrel-02 40 minutes behind, point the API "
        "back at the primary now.",
    ),
    Turn(
        "Done: the API reads from the primary again. What blockers are open? Check the notes.",
        (
            _note(action="search", query="blocker failover replica", note_type="blocker"),
            _with_found_id(action="read"),
        ),
        "One open blocker: no failover while pg-kestrel-02 is 40 minutes behind, until "
        "DBA-317 is done.",
    ),
    Turn(
        "What does the escalation policy say; should I page the secondary?",
        (_sh("head -n 20 oncall.md"),),
        "oncall.md: page the secondary after 30 minutes without a fix, or at once for data "
        "loss; database problems go to the DBA queue. We are past 30 minutes, so yes.",
    ),
    Turn(
        "The lag is down to 9,000. What is the SLO, and how much budget did we burn?",
        (_sh("grep -n -A 4 '^## SLO' oncall.md"),),
        "oncall.md: 99.5% of events visible within 5 minutes over 28 days, about 3.4 hours "
        "of budget. Roughly 1.5 hours stale so far: close to half, so tell the Tracking lead.",
    ),
    Turn(
        "Bluefin confirmed PX7 means 'picked up at partner depot', and the mapping fix is "
        "merged. Update the dedupe decision: replay from 4 days back once the window is 96 "
        "hours.",
        (
            _note(action="search", query="dedupe window Bluefin replay", note_type="conclusion"),
            _with_found_id(
                action="update",
                content=(
                    "Raise the dedupe window from 72 to 96 hours, then replay Bluefin's DLQ "
                    "from 4 days back (mapping fix for PX7 'picked up at partner depot' is "
                    "merged). Cost: one extra day is about 250 million keys and 18 GB."
                ),
            ),
        ),
        "Updated the decision note: window to 96 hours, then replay 4 days of Bluefin events.",
    ),
    Turn(
        "Before the replay: does anything in the docs say the nightly prune interferes?",
        (_sh("grep -rn '02:30' .."),),
        "The prune runs at 02:30 UTC (runbook, KestrelDiskHigh) and ADR-0014 asks whether "
        "the replica keeps up during it. Replay now, well before 02:30.",
    ),
    Turn(
        "Before the replay, read the architecture, the runbook, the on-call guide, the "
        "decision records and the postmortem in full: does anything there contradict what "
        "we decided today?",
        (
            _sh("cat architecture.md"),
            _sh("cat oncall.md"),
            _sh("cat decisions/0007-kafka-over-sqs.md"),
            _sh("cat decisions/0011-idempotency-keys.md"),
            _sh("cat decisions/0014-replica-lag-alert.md"),
            _sh("cat ../postmortems/2025-08-14-consumer-lag.md"),
            _sh("cat runbook.md"),
        ),
        "No contradiction: ADR-0011 allows widening the dedupe window (one extra day is "
        "about 18 GB), the postmortem's lesson is the 16-replica cap, and ADR-0007 explains "
        "why 12 partitions cap parallelism. ADR-0014 is still only proposed.",
    ),
    Turn(
        "Replay started: kestrelctl dlq replay --carrier bluefin --since 96h. What should I watch?",
        (_sh("grep -n -i -e 'lag' -e 'latency' runbook.md"),),
        "Watch the consumer lag (alert above 50,000) and the batch latency (over 1 second "
        "means the database is the bottleneck); do not scale past 16.",
    ),
    Turn(
        "The DBA says DBA-317 is done: the replica is 4 seconds behind. Update the blocker "
        "note: resolved.",
        (
            _note(action="search", query="DBA-317 replica failover", note_type="blocker"),
            _with_found_id(
                action="update",
                title="Resolved: pg-kestrel-02 caught up (DBA-317)",
                note_type="conclusion",
                content=(
                    "DBA-317 done: pg-kestrel-02 is 4 seconds behind, under the runbook's "
                    "30 seconds, so failover is possible again."
                ),
            ),
        ),
        "Updated the note: DBA-317 resolved, the replica is 4 seconds behind; no open blockers.",
    ),
    Turn(
        "Which actions from the August postmortem are still open?",
        (_sh("grep -n -A 4 '^## Actions' ../postmortems/2025-08-14-consumer-lag.md"),),
        "Two: the replica-lag alert (ADR-0014, DBA-290) and the dedupe-window decision, "
        "which we took today (96 hours).",
    ),
    Turn(
        "Record a follow-up: ADR-0014's replica-lag alert (DBA-290) should land before the freeze.",
        (
            _note(
                action="create",
                title="Follow-up: KestrelReplicaLag alert (DBA-290) before the freeze",
                note_type="action",
                tags=["ADR-0014", "database"],
                content=(
                    "Land ADR-0014's KestrelReplicaLag alert (30 s for 5 min) before the "
                    "freeze. Owner: database team, DBA-290."
                ),
            ),
        ),
        "Follow-up recorded (action): DBA-290 before the freeze.",
    ),
    Turn(
        "Lag is under 2,000 and the replay finished with 0 duplicates. Summarise our notes.",
        (_note(action="summary"),),
        "Five notes: the incident state, two decisions, the resolved blocker and one follow-up.",
    ),
    Turn(
        "Read back the decision about the replicas; I want its exact wording for the ticket.",
        (
            _note(action="search", query="decision normalizers replicas", note_type="conclusion"),
            _with_found_id(action="read"),
        ),
        "The note reads: scale kestrel-normalizer to 16 replicas and no further, because "
        "pg-kestrel-01 cannot take more than 16 writers.",
    ),
    Turn(
        "Hand-over time. Write the hand-over for the next on-call from what you know: the "
        "ticket, the freeze date, the decisions, blockers and follow-ups.",
        (),
        "Hand-over: INC-4821 (KestrelConsumerLag) is mitigated: lag under 2,000. Decisions: "
        "normalizers at 16 replicas, no further; dedupe window 96 hours for the Bluefin "
        "replay (done, 0 duplicates). Blocker DBA-317 resolved. Follow-up: DBA-290 "
        "(replica-lag alert) before the change freeze on 2025-11-20 18:00 UTC.",
    ),
)

_BY_TEXT = {turn.user: index for index, turn in enumerate(TURNS)}
_CALL_ID = re.compile(r"call_(\d+)_(\d+)$")


def scripted_reply(messages: list[BaseMessage]) -> AIMessage:
    """The scripted agent's next message for a request (a `ScriptedChatModel.respond`)."""
    start = next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
        None,
    )
    if start is None or messages[start].text not in _BY_TEXT:
        return AIMessage("I have no script for this message.")
    number = _BY_TEXT[messages[start].text]
    turn = TURNS[number]
    done, results = _progress(messages[start + 1 :], number)
    for step_index in range(done + 1, len(turn.steps)):
        step = turn.steps[step_index]
        args = step.args(results) if callable(step.args) else step.args
        if args is None:
            break  # the search found nothing: answer with what we have
        call = {"name": step.tool, "args": dict(args), "id": f"call_{number}_{step_index}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage(turn.answer)


def _progress(turn_messages: list[BaseMessage], number: int) -> tuple[int, list[str]]:
    """The last step done in this turn (-1 for none) and its tool results, in order."""
    done = -1
    results = []
    for message in turn_messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                match = _CALL_ID.match(call.get("id") or "")
                if match and int(match.group(1)) == number:
                    done = max(done, int(match.group(2)))
        elif isinstance(message, ToolMessage):
            results.append(str(message.text))
    return done, results
