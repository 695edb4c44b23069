"""A fitted call laid out cache-first and accounted once: `WindowAssembly` and its ledger.

`[system][recap][older turns verbatim][retrieval block][current turn]`: everything before
the block changes only when a compaction does, so each request extends the previous one
byte for byte up to its dynamic tail. The ledger says where each token went, in the
provider's tokens (each part scaled by the calibration, or priced through the previous
call's reported size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from langchain_contextkit.agents.ledger import Anchor, CallLedger
from langchain_contextkit.errors import ContextWindowExceeded
from langchain_contextkit.messages import (
    CleanScan,
    MessageRepair,
    SystemPlacement,
    repair_messages,
    resume_scan,
)
from langchain_contextkit.tokens import (
    REPLY_PRIMING,
    TokenCounter,
    count_message_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage

    from langchain_contextkit.builder.report import ContextReport
    from langchain_contextkit.calibration import Calibration
    from langchain_contextkit.compaction.compactor import (
        CompactionResult,
        HistoryCompactor,
        RunningSummary,
    )
    from langchain_contextkit.window_budget import WindowBudget


__all__ = ["RequestLayout", "WindowAssembly", "message_tokens", "sendable_request"]


@dataclass(frozen=True, slots=True)
class WindowAssembly:
    """The request for one model call, and its ledger.

    Attributes:
        messages: What to send, after the system message (which stays the request's own).
        summary: The running summary after this call.
        ledger: Where the tokens went.
        compaction: What the compactor did.
        block: The retrieval block's report (its kept items, embeddings included), or
            None when no block was built.
    """

    messages: list[BaseMessage]
    summary: RunningSummary | None
    ledger: CallLedger
    compaction: CompactionResult
    block: ContextReport | None = None


class RequestLayout:
    """Lays a fitted call out and writes its ledger (a base of `WindowAssembler`)."""

    counter: TokenCounter
    compactor: HistoryCompactor

    def _overhead(
        self, budget: WindowBudget, block: HumanMessage | None, turn: list[BaseMessage]
    ) -> int:
        """Everything sent beside the history: fixed parts, the block and the current turn."""
        block_tokens = message_tokens([block], self.counter)
        return budget.fixed + block_tokens + message_tokens(turn, self.counter)

    def _finish(
        self,
        budget: WindowBudget,
        compaction: CompactionResult,
        block: HumanMessage | None,
        turn: list[BaseMessage],
        *,
        reduced: bool,
        call: int,
        real: WindowBudget,
        calibration: Calibration | None,
        anchor: Anchor | None,
        report: ContextReport | None = None,
        placement: SystemPlacement = "leading",
    ) -> WindowAssembly:
        # The compactor's parts, as it laid them out: no second split, no second count.
        laid = compaction.view_parts
        stable, kept = list(laid.system), list(laid.kept)
        recap = [] if laid.recap is None else [laid.recap]
        # Cache-first: stable system messages, the summary and older turns (byte-stable
        # between compactions), then the dynamic tail: the block, the current turn last.
        messages = [*stable, *recap, *kept, *([block] if block else []), *turn]
        counter = self.counter
        summary_tokens = message_tokens(recap, counter)
        block_tokens = message_tokens([block], counter)
        indexed = None if laid.kept_tokens is None else (laid.kept_tokens, laid.kept_scan)
        history_tokens = self._history_tokens(stable, kept, indexed)
        head, tail = [*stable, *recap], [*([block] if block else []), *turn]
        repairs: list[MessageRepair] = []
        if not _valid_request(head, kept, indexed, tail):
            # Late system messages the provider would move or refuse become notes now that
            # the layout is done; any other problem (a layout bug) is mended, not raised.
            sent, repairs = repair_messages(messages, system_messages=placement)
            if repairs:  # a note's marker costs a few tokens: counted with the history
                history_tokens += message_tokens(sent, counter) - message_tokens(messages, counter)
                messages = sent
        turn_tokens = message_tokens(turn, counter) + (REPLY_PRIMING if messages else 0)
        ceiling = budget.ceiling
        prompt = budget.fixed + summary_tokens + block_tokens + history_tokens + turn_tokens
        if prompt > ceiling:
            msg = (
                f"the request takes {prompt} tokens, more than the window minus the output "
                f"reserve ({ceiling})"
            )
            raise ContextWindowExceeded(msg, required=prompt, budget=ceiling)
        # The ledger speaks the provider's tokens: each part scaled by the calibration.
        # The fitted line's value at this request's size: right after a tiny call the
        # latest call's own factor is mostly the provider's fixed overhead.
        factor = 1.0 if calibration is None else calibration.factor_at(prompt)
        scale = factor
        if anchor is not None and not compaction.compacted and prompt >= anchor.estimated:
            # The request extends the previous one, whose real size the provider reported:
            # only the new part is an estimate.
            rate = factor if anchor.growth is None else anchor.growth
            known = anchor.reported + (prompt - anchor.estimated) * rate
            scale = known / prompt if prompt else factor
        parts = {
            "system": budget.system_tokens,
            "tools": budget.tool_tokens,
            "summary": summary_tokens,
            "retrieval": block_tokens,
            "history": history_tokens,
            "turn": turn_tokens,
        }
        scaled = {name: round(tokens * scale) for name, tokens in parts.items()}
        ledger = CallLedger(
            call=call,
            window=real.window,
            output_reserve=real.output_reserve,
            system=scaled["system"],
            tools=scaled["tools"],
            summary=scaled["summary"],
            retrieval=scaled["retrieval"],
            history=scaled["history"],
            turn=scaled["turn"],
            free=max(0, real.ceiling - sum(scaled.values())),
            compacted=compaction.compacted,
            reduced=reduced,
            estimated=prompt,
            factor=factor,
            fidelity=compaction.fidelity if compaction.compacted else None,
            repairs=len(repairs),
            summarizer_calls=compaction.summarizer_calls,
            summarizer_chars=compaction.summarizer_chars,
            shared_recap=compaction.shared,
        )
        block_report = report if block is not None else None
        return WindowAssembly(messages, compaction.summary, ledger, compaction, block_report)

    def _history_tokens(
        self,
        stable: list[BaseMessage],
        kept: list[BaseMessage],
        known: tuple[int, CleanScan | None] | None,
    ) -> int:
        """Tokens of the stable system messages and the kept history.

        The kept history ends the history the compactor just indexed, so its cost is
        `known` (a difference of running totals there); counted message by message when
        it is not, or when the compactor counts with another counter.
        """
        if known is None or self.compactor.token_counter is not self.counter:
            return message_tokens([*stable, *kept], self.counter)
        return message_tokens(stable, self.counter) + known[0]


def _valid_request(
    head: list[BaseMessage],
    kept: list[BaseMessage],
    known: tuple[int, CleanScan | None] | None,
    tail: list[BaseMessage],
) -> bool:
    """Whether `[*head, *kept, *tail]` keeps every message rule, checking what is new.

    The kept history was checked when it was indexed: when it was clean from a unit
    start, the check resumes at its end and reads only the block and the current turn.
    False means "not shown here", and the caller runs the full check.
    """
    scan = resume_scan(CleanScan(), head)
    if kept:
        scan = None if scan is None or known is None else known[1]
    if scan is not None:
        scan = resume_scan(scan, tail)
    return scan is not None and not scan.open_calls


def message_tokens(messages: Sequence[BaseMessage | None], counter: TokenCounter) -> int:
    """Tokens of the messages present (None skipped), without reply priming."""
    present = [m for m in messages if m is not None]
    return count_message_tokens(present, counter, reply_priming=False) if present else 0


def sendable_request(request: ModelRequest[Any], assembly: WindowAssembly) -> ModelRequest[Any]:
    """The request to send: the assembled messages, and the output limit it leaves.

    When the output reserve had to shrink (a request that fits only without the full
    reserve), a model configured to ask for more output tokens than that is asked for
    the reserve instead: providers refuse a prompt plus a completion over the window.
    """
    messages = cast("list[AnyMessage]", assembly.messages)
    reserve = assembly.ledger.output_reserve
    asked = request.model_settings.get("max_tokens", getattr(request.model, "max_tokens", None))
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > reserve:
        settings = {**request.model_settings, "max_tokens": reserve}
        return request.override(messages=messages, model_settings=settings)
    return request.override(messages=messages)
