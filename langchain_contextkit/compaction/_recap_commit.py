"""A summariser's text made the recap: structured, held to its cap and the window, committed.

A recap that is a placeholder, breaks the message rules or leaves nothing meaningful is
refused here (the next summariser's turn); a view over the window is shrunk, else refused.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_contextkit.compaction._recap_chain import RecapChains
from langchain_contextkit.compaction._recap_fit import held_recap
from langchain_contextkit.compaction.recap import (
    CompactionResult,
    RunningSummary,
    SummarizerKind,
)
from langchain_contextkit.compaction.summarizers import structured_recap
from langchain_contextkit.errors import ContextWindowExceeded
from langchain_contextkit.messages import find_message_problems

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.compaction._plan import Plan
    from langchain_contextkit.prompts import Fidelity


logger = logging.getLogger(__name__)


class RecapCommits(RecapChains):
    """Turns a summariser's text into the committed recap and the view."""

    def _finish(
        self,
        plan: Plan,
        text: object,
        kind: SummarizerKind,
        error: str | None,
        ceiling: int | None,
    ) -> CompactionResult | None:
        """Commit a summary; None when the summariser gave nothing usable."""
        if kind == "extractive" and (not isinstance(text, str) or not text.strip()):
            # Nothing salient in the aged span: a small recap that says so, not a failure.
            text = self._empty_recap(plan, plan.cut)
        if not isinstance(text, str) or not text.strip():
            return None
        text, fidelity = self._structured(plan, text, kind)
        if text is None:
            return None  # a placeholder or broken sections from a model: the fallback's turn
        recap = self._reduced(text, plan.cap)
        if not any(ch.isalnum() for ch in recap):
            return None  # nothing but an ellipsis or punctuation: a placeholder, not a summary
        covered = plan.covered + plan.cut
        tail = plan.pending[plan.cut :]
        known = None if plan.arrays is None else (plan.arrays, covered)
        parts = self._parts(plan.system, recap, covered, tail, known)
        after = self._parts_tokens(parts, plan.overhead)
        if ceiling is not None and after > ceiling:
            # The window wins over the recap's own cap: a shorter recap, not a failed call.
            shorter = self._shrunk(recap, after - ceiling)
            if shorter is not None:
                recap = shorter
                parts = self._parts(plan.system, recap, covered, tail, known)
                after = self._parts_tokens(parts, plan.overhead)
        view = parts.messages
        if ceiling is not None and after > ceiling:
            msg = (
                f"after compaction the request still takes {after} tokens, more than the "
                f"ceiling of {ceiling}: the most recent turn alone does not fit"
            )
            raise ContextWindowExceeded(msg, required=after, budget=ceiling)
        last_id = plan.pending[plan.cut - 1].id
        # A model's recap carries its floor forward; an extractive recap is its own.
        floor = None if kind == "extractive" else (plan.floor or None)
        summary = RunningSummary(
            recap, covered, last_id if isinstance(last_id, str) else None, plan.digest, floor
        )
        if _new_problems(plan.pending, view, require_human_first=self.require_human_first):
            return None  # logged; the next summariser's turn, else the history unchanged
        self._remember(plan.digest, recap, floor)
        if plan.digest is not None:
            plan.fresh.append((plan.digest, recap, floor))
        return CompactionResult(
            view,
            summary,
            compacted=True,
            summarizer=kind,
            tokens_before=plan.tokens_before,
            tokens_after=after,
            aged_out=plan.cut,
            error=error,
            fidelity=fidelity,
            parts=parts,
        )

    def _remember(self, digest: str | None, recap: str, floor: str | None) -> None:
        """Keep a committed recap (and a model recap's floor) by the digest it covers."""
        if digest is None:
            return
        self._recaps.put(digest, recap)
        if floor is not None:
            self._floors.put(digest, floor)

    def _structured(
        self, plan: Plan, text: str, kind: SummarizerKind
    ) -> tuple[str | None, Fidelity | None]:
        """A summariser's text as the recap, and the tier used (`structured_recap`).

        Sections come back canonical and prose as written. A model asked for the sections
        (our own instruction) that replies with a placeholder or broken sections is
        refused (None). A callback, or a model following a custom `summary_prompt`, may
        write its own format: its text stands as written unless it is structured. Either
        is then held to the cap by score with the extractive recap's user items and
        decisions it lacks added back (`_recap_fit.held_recap`).
        """
        if kind == "extractive":
            return text, plan.fidelity
        fitted = structured_recap(
            text,
            max_tokens=_UNCAPPED,
            fidelity=self.fidelity,
            prompts=self.prompts,
            counter=self.token_counter,
        )
        if fitted is None:
            asked = kind == "prefix" or (kind == "llm" and self.prompts.summary_prompt is None)
            if asked:
                logger.warning("the %s summariser's reply is a placeholder or broken", kind)
                return None, None
            fitted = text.strip(), None
        return held_recap(
            fitted[0],
            fitted[1],
            floor=self._floor(plan),
            max_tokens=plan.cap,
            prompts=self.prompts,
            counter=self.token_counter,
            fidelity=self.fidelity,
        )

    def _floor(self, plan: Plan) -> str:
        """The extractive recap of `plan` (made once): what a model's recap must not lose."""
        if plan.floor is None:
            tier = plan.fidelity  # `_extractive_for` notes its tier; this is no recap yet
            plan.floor = self._chain(
                plan, self._extractive_for(plan), extractive=True, remember=False, floor=True
            )
            plan.fidelity = tier
        return plan.floor

    def _shrunk(self, recap: str, excess: int) -> str | None:
        """`recap` cut by `excess` tokens and more; None when nothing meaningful is left."""
        target = self.token_counter(recap) - excess - 1
        if target < 1:
            return None
        shorter = self._reduced(recap, target)
        if not any(ch.isalnum() for ch in shorter):
            return None
        logger.warning("recap cut to %d tokens to fit the window", self.token_counter(shorter))
        return shorter

    def _within(self, result: CompactionResult, ceiling: int | None) -> CompactionResult:
        """Pass `result` on, shrink its recap to fit the ceiling, or raise.

        Reached when no new summary was made. Over the window, sending would fail at the
        provider and dropping turns without a summary would lose them silently: the
        previous recap is cut to fit if that suffices, else the caller decides.
        """
        if ceiling is None or result.tokens_after <= ceiling:
            return result
        summary = result.summary
        parts = result.view_parts
        if summary is not None and parts.recap is not None:
            shorter = self._shrunk(summary.text, result.tokens_after - ceiling)
            if shorter is not None:
                as_human = isinstance(parts.recap, HumanMessage)
                recap = self._recap(shorter, summary.covered, as_human=as_human)
                overhead = result.tokens_after - self._parts_tokens(parts, 0)
                parts = dataclasses.replace(parts, recap=recap)
                after = self._parts_tokens(parts, overhead)
                if after <= ceiling:
                    return dataclasses.replace(
                        result,
                        messages=parts.messages,
                        summary=dataclasses.replace(summary, text=shorter),
                        compacted=True,
                        tokens_after=after,
                        parts=parts,
                    )
        reason = result.error or "no turn could age out"
        msg = (
            f"the request takes {result.tokens_after} tokens, more than the ceiling of "
            f"{ceiling}, and compaction could not shrink it ({reason})"
        )
        raise ContextWindowExceeded(msg, required=result.tokens_after, budget=ceiling)

    def _unchanged(self, plan: Plan, error: str | None) -> CompactionResult:
        known = None if plan.arrays is None else (plan.arrays, plan.covered)
        parts = self._parts(plan.system, plan.previous, plan.covered, plan.pending, known)
        logger.warning("no summary could be made; the history is kept unchanged (%s)", error)
        return CompactionResult(
            parts.messages,
            plan.current,
            compacted=False,
            summarizer=None,
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_before,
            error=error,
            parts=parts,
        )

    @staticmethod
    def _note_failure(kind: SummarizerKind, exc: Exception | None) -> str:
        if exc is None:
            message = f"the {kind} summariser returned no text"
        else:
            message = f"the {kind} summariser failed: {type(exc).__name__}: {exc}"
        logger.warning("%s", message)
        return message


_UNCAPPED = 10**9
"""A cap no reply reaches: `structured_recap` reads a reply; `held_recap` then holds it."""


def _new_problems(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage], *, require_human_first: bool
) -> bool:
    """Whether the view has a problem the input had not (logged; such a view is not sent).

    Compaction may keep problems the input had, but must never add one.
    """
    known = Counter(
        p.code for p in find_message_problems(before, require_human_first=require_human_first)
    )
    found = Counter(
        p.code for p in find_message_problems(after, require_human_first=require_human_first)
    )
    new = found - known  # per problem kind, more than the input had
    if new:
        logger.warning("compaction produced an invalid message list (%s): not used", dict(new))
    return bool(new)
