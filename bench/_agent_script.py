"""The scripted support conversation that `bench_agent_loop.py` plays through the stub.

Everything here is a deterministic function of its arguments, so two runs (one per
middleware) see the same user turns, the same tool output and the same model replies:

- `SYSTEM_PROMPT`: operating rules plus a product catalogue, about 1,500 tokens, the size
  of a production agent's prompt, and above the 1,024-token minimum OpenAI caches, so
  the fixed part of every request can be cached at all;
- `user_turn(n)`: turn `n` asks for record `R-nnn`; every fifth turn asks for two sections
  of it, which the scripted model fetches with two parallel tool calls; turns 1-10 also
  plant one fact each (`FACTS`);
- `lookup_record`: the agent's tool, returning about 400 tokens of ledger lines;
- `respond(kind, messages)`: the stub's model. An agent request whose last message is the
  user's gets the tool call(s) for that turn, one whose last message is a tool result gets
  a one-line answer; a summary request gets every planted fact line found in its input
  plus one sentence, a summariser that keeps facts, identical for both middlewares.
"""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING, Any

import _stub_path  # noqa: F401 - puts tests/ on sys.path for provider_stubs
from langchain_core.tools import tool
from provider_stubs.openai_stub import Reply, ToolCall, content_text

if TYPE_CHECKING:
    from provider_stubs.openai_stub import Kind

TOOL_NAME = "lookup_record"
PARALLEL_EVERY = 5
"""Every fifth turn the model calls the tool twice at once (two sections of one record)."""

FACTS: tuple[str, ...] = (
    "FACT-01: the invoice number is INV-88213",
    "FACT-02: the account manager is Ilse Brandt",
    "FACT-03: the warehouse code for returns is WH-5521",
    "FACT-04: the agreed refund deadline is 2025-03-31",
    "FACT-05: the purchase order number is PO-44107",
    "FACT-06: the disputed amount is 1,930.40 EUR",
    "FACT-07: the shipping carrier is NordLink Freight",
    "FACT-08: the contract reference is CT-2291-B",
    "FACT-09: the support ticket number is TCK-70356",
    "FACT-10: the customer prefers contact by email only",
)
"""One fact per early turn (turn n plants FACTS[n - 1]); each must survive every summary.

No quotes, ampersands or angle brackets: a summariser that escapes its input as XML (the
peer does) must still return them verbatim."""

_FACT_LINE = re.compile(r"FACT-\d+: [^\n<\"\\]*")
_TURN = re.compile(r"^Turn (\d+):")


# --- what the user says and the tool returns ---------------------------------------------


def record_id(turn: int) -> str:
    return f"R-{turn:03d}"


def is_parallel(turn: int) -> bool:
    return turn % PARALLEL_EVERY == 0


def user_turn(turn: int) -> str:
    """The user's message for `turn` (1-based), with the planted fact on its own line."""
    if is_parallel(turn):
        text = (
            f"Turn {turn}: compare the ledger and the notes of record {record_id(turn)} "
            "and tell me whether they agree."
        )
    else:
        text = f"Turn {turn}: please look up record {record_id(turn)} and tell me its status."
    if turn <= len(FACTS):
        text += f"\nPlease keep this in mind for later. {FACTS[turn - 1]}."
    return text


def tool_calls_for(turn: int) -> list[tuple[str, str]]:
    """(record id, section) of each call the scripted model makes in `turn`."""
    if is_parallel(turn):
        return [(record_id(turn), "ledger"), (record_id(turn), "notes")]
    return [(record_id(turn), "summary")]


_ACCOUNTS = [f"ACC-{n}" for n in (40213, 40877, 51190, 52006, 61734, 70021)]
_MEMOS = (
    "freight surcharge",
    "pallet deposit",
    "late delivery credit",
    "customs handling fee",
    "partial refund on damaged goods",
    "replacement shipment",
    "currency adjustment",
    "service call, on site",
    "warranty repair, parts only",
    "restocking fee waived",
)
_CARRIERS = ("NordLink", "BlueRail", "Skyport Cargo", "Westwind Parcel")
_STATUSES = ("open", "settled", "under review", "escalated", "closed")


LONG_LINES = 11
"""Ledger lines of a long tool result (about 400 tokens)."""

SHORT_LINES = 2
"""Ledger lines of a short tool result (about 110 tokens): a turn is then about 200 tokens."""


def record_text(record: str, section: str, lines_count: int = LONG_LINES) -> str:
    """`lines_count` ledger lines (about 35 tokens each) of one section; never a fact line."""
    # A string seed is hashed with SHA-512 by `random`, so the text is stable across runs.
    rng = random.Random(f"{record}/{section}")
    lines = [f"Record {record}, section {section}. Status: {rng.choice(_STATUSES)}."]
    for line in range(1, lines_count + 1):
        day = rng.randint(1, 28)
        month = rng.randint(1, 12)
        amount = rng.randint(1_000, 250_000) / 100
        lines.append(
            f"{line:02d}. 2024-{month:02d}-{day:02d} {rng.choice(('debit', 'credit'))} "
            f"{amount:,.2f} EUR on {rng.choice(_ACCOUNTS)}: {rng.choice(_MEMOS)}, pallet "
            f"{rng.randint(1, 12)} of 12, carrier {rng.choice(_CARRIERS)}, "
            f"clerk {rng.choice('ABCDEFGH')}{rng.randint(10, 99)}."
        )
    lines.append(
        f"Reconciled by clerk {rng.choice('ABCDEFGH')}{rng.randint(10, 99)}; "
        f"{rng.randint(0, 4)} open questions remain on this section."
    )
    return "\n".join(lines)


@tool(TOOL_NAME)
def lookup_record(record_id: str, section: str = "summary") -> str:
    """Look up one section (summary, ledger or notes) of a customer record by its id."""
    return record_text(record_id, section)


@tool(TOOL_NAME)
def lookup_record_short(record_id: str, section: str = "summary") -> str:
    """Look up one section (summary, ledger or notes) of a customer record by its id."""
    return record_text(record_id, section, SHORT_LINES)


# --- the system prompt -------------------------------------------------------------------

_RULES = """You are the billing assistant of Meridian Supplies, a wholesaler of office and \
warehouse equipment. You help account holders with invoices, refunds, shipments and \
records.

Rules:
1. Look records up with the lookup_record tool before you answer a question about them; \
never guess a figure.
2. Quote amounts with their currency and dates as YYYY-MM-DD.
3. Keep every fact the customer asks you to remember: invoice, order, ticket and contract \
numbers, deadlines, contacts and preferences. You will be asked about them later.
4. Refunds above 2,000.00 EUR need a supervisor; say so rather than promising one.
5. Answer in one or two sentences unless the customer asks for detail.

Product catalogue (code, item, warranty, returns window, dispatch):"""

_ITEMS = (
    "thermal label printer",
    "barcode scanner, corded",
    "barcode scanner, wireless",
    "pallet jack, 2.5 t",
    "shelving unit, 5 tiers",
    "stretch wrap dispenser",
    "parcel scale, 60 kg",
    "safety cutter, pack of 10",
    "packing table, 1.8 m",
    "forklift battery charger",
    "loading dock bumper",
    "anti-fatigue mat",
    "label rolls, 1,000 per roll",
    "tape gun, heavy duty",
    "hand truck, folding",
)


def _catalogue() -> list[str]:
    rng = random.Random("catalogue")
    return [
        f"- P-{1000 + n}: {rng.choice(_ITEMS)}; warranty {rng.choice((12, 24, 36))} months; "
        f"returns within {rng.choice((14, 30, 60))} days; dispatch from WH-{rng.randint(1, 6)} "
        f"in {rng.randint(1, 5)} business days."
        for n in range(40)
    ]


SYSTEM_PROMPT = "\n".join([_RULES, *_catalogue()])


# --- the scripted model --------------------------------------------------------------------


def planted_facts_in(text: str) -> list[str]:
    """The planted fact lines found in `text`, first occurrence first, without repeats."""
    seen: dict[str, None] = {}
    for match in _FACT_LINE.finditer(text):
        seen.setdefault(match.group(0).rstrip(" ."), None)
    return list(seen)


def respond(kind: Kind, messages: list[dict[str, Any]]) -> Reply:
    """The scripted model: a deterministic reply to one chat-completions request."""
    if kind == "summary":
        everything = "\n".join(content_text(m.get("content")) for m in messages)
        facts = planted_facts_in(everything)
        records = len(set(re.findall(r"\bR-\d{3}\b", everything)))
        # Facts first, one per line, then a sentence: the shape a careful summariser returns.
        closing = f"The assistant looked up {records} customer records and answered each one."
        return Reply(text="\n".join([*facts, closing]))
    if kind != "agent" or not messages:
        return Reply(text="Understood.")
    last = messages[-1]
    if last.get("role") == "tool":
        return Reply(text=f"Done: {content_text(last.get('content')).splitlines()[0]}")
    match = _TURN.match(content_text(last.get("content")))
    if last.get("role") != "user" or match is None:
        return Reply(text="How can I help with your account?")
    turn = int(match.group(1))
    calls = tuple(
        ToolCall(
            name=TOOL_NAME,
            args={"record_id": record, "section": section},
            id=f"call_{turn:03d}_{index}",
        )
        for index, (record, section) in enumerate(tool_calls_for(turn))
    )
    return Reply(tool_calls=calls)
