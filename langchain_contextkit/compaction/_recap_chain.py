"""The summariser requests of a plan, epoch by epoch, each recap extending the one before."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from langchain_contextkit.compaction._chunked_summary import (
    fitted_requests,
    run_async,
    run_sync,
)
from langchain_contextkit.compaction._cold_fold import fold_recap
from langchain_contextkit.compaction._compactor_core import CompactorCore
from langchain_contextkit.compaction.summarizers import (
    ASummarize,
    Summarize,
    reduce_recap,
    render_transcript,
    structured_recap,
)
from langchain_contextkit.window_budget import model_limits

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.compaction._plan import Plan


class RecapChains(CompactorCore):
    """Runs a summariser over a plan's epochs (sync and async)."""

    def _summarizer_window(self, given: int | None) -> int | None:
        """The transcript summariser's window: set here, its profile's, else the caller's."""
        if self.summarizer_window is not None:
            return self.summarizer_window
        stated = model_limits(self.llm)[0] if self.llm is not None else None
        return stated if stated is not None else given

    def _extractive_for(self, plan: Plan) -> Summarize:
        """The extractive summariser, choosing its lines for this call's recap cap.

        Choosing for `max_summary_tokens` and then cutting to a smaller cap would keep the
        first lines, not the best ones: the latest turns' facts would be cut off. The
        tier each recap was written at is noted on `plan`.
        """
        extractive = self.extractive
        if plan.cap < extractive.max_tokens:
            extractive = dataclasses.replace(extractive, max_tokens=max(1, plan.cap))

        def summarize(text: str, instruction: str) -> str:  # noqa: ARG001 - the callback's shape
            recap, plan.fidelity = extractive.recap(text)
            return recap

        return summarize

    def _chain(
        self,
        plan: Plan,
        summarize: Summarize,
        *,
        extractive: bool = False,
        asked: bool = False,
        remember: bool = True,
        floor: bool = False,
    ) -> str:
        """The recap after every epoch of `plan`, each extending the one before.

        `extractive`: the extractive summariser (its requests are not sized, and nothing
        salient is a valid recap). `asked`: a model was asked for the recap's sections
        (see `_structured`). `remember`: keep each intermediate recap in the memo.
        `floor`: the chain of a model recap's floor (it extends the floor in force).
        """
        previous = self._previous(plan, floor=floor)
        for start, end, digest in plan.epochs():
            if end <= plan.folded:
                text, folded = self._fold(plan, end, previous), True
            else:
                aged = plan.pending[start:end]
                text, folded = (
                    run_sync(self._requests(plan, aged, previous, sized=not extractive), summarize),
                    False,
                )
            previous = self._carried(
                self._epoch_recap(
                    text,
                    digest,
                    end,
                    plan,
                    asked=asked and not folded,
                    extractive=extractive or folded,
                    remember=remember,
                )
            )
        return previous or ""

    async def _achain(
        self,
        plan: Plan,
        asummarize: ASummarize,
        *,
        extractive: bool = False,
        asked: bool = False,
    ) -> str:
        """Async `_chain`."""
        previous = self._previous(plan)
        for start, end, digest in plan.epochs():
            if end <= plan.folded:
                text, folded = self._fold(plan, end, previous), True
            else:
                aged = plan.pending[start:end]
                requests = self._requests(plan, aged, previous, sized=not extractive)
                text, folded = await run_async(requests, asummarize), False
            previous = self._carried(
                self._epoch_recap(
                    text,
                    digest,
                    end,
                    plan,
                    asked=asked and not folded,
                    extractive=extractive or folded,
                )
            )
        return previous or ""

    def _fold(self, plan: Plan, end: int, previous: str | None) -> str:
        """The extractive recap of `previous` and `plan.pending[:end]`, read once (a cold start)."""
        if plan.fold is not None and plan.fold[:2] == (end, previous):
            plan.fidelity = plan.fold[3]
            return plan.fold[2]
        extractive = self.extractive
        if plan.cap < extractive.max_tokens:
            extractive = dataclasses.replace(extractive, max_tokens=max(1, plan.cap))
        recap, plan.fidelity = fold_recap(extractive, plan.pending[:end], previous)
        plan.fold = (end, previous, recap, plan.fidelity)
        return recap

    def _previous(self, plan: Plan, *, floor: bool = False) -> str | None:
        """The recap a chain extends: none when the one in force kept nothing.

        `floor`: the floor's chain extends the floor in force, not the model's recap.
        """
        if floor and plan.previous_floor is not None:
            return self._carried(plan.previous_floor)
        return self._carried(plan.previous)

    def _carried(self, recap: str | None) -> str | None:
        """`recap` as the next epoch extends it: None when it kept nothing.

        An empty recap read back would keep its count of messages as a fact.
        """
        return None if recap is None or self.prompts.is_empty_recap(recap) else recap

    def _epoch_recap(
        self,
        text: str,
        digest: str | None,
        end: int,
        plan: Plan,
        *,
        asked: bool,
        extractive: bool = False,
        remember: bool = True,
    ) -> str:
        """An intermediate epoch's recap, held to the cap and remembered; the last is returned."""
        if end == plan.cut:
            return text  # `_finish` checks, holds and remembers the final recap
        if not text.strip():
            if not extractive:
                msg = "the summariser returned no text"
                raise ValueError(msg)
            # Nothing salient in this span: a small recap that says so, not a failure.
            text = self._empty_recap(plan, end)
            if not text:
                msg = "the summariser returned no text"
                raise ValueError(msg)
        fitted = structured_recap(
            text,
            max_tokens=plan.cap,
            fidelity=self.fidelity,
            prompts=self.prompts,
            counter=self.token_counter,
        )
        if fitted is not None:
            text = fitted[0]
        elif asked:
            msg = "the summariser's reply is a placeholder or its sections are broken"
            raise ValueError(msg)
        recap = self._reduced(text, plan.cap)
        if digest is not None and remember:
            self._recaps.put(digest, recap)
            plan.fresh.append((digest, recap, None))
        return recap

    def _empty_recap(self, plan: Plan, end: int) -> str:
        """The recap of `plan`'s messages up to `end` when none was worth keeping.

        "" when even that does not fit the cap (a cap of a few tokens).
        """
        text = self.prompts.empty_recap(plan.covered + end)
        return text if self.token_counter(text) <= plan.cap else ""

    def _reduced(self, text: str, cap: int) -> str:
        """`text` within `cap`, reduced by score (`summarizers.reduce_recap`), never cut."""
        return reduce_recap(text.strip(), cap, prompts=self.prompts, counter=self.token_counter)

    def _requests(
        self,
        plan: Plan,
        aged: Sequence[BaseMessage],
        previous: str | None,
        *,
        sized: bool,
    ) -> Generator[list[tuple[str, str]], list[str], str]:
        """The summariser requests for one epoch: one when it fits, else map-reduce."""
        return fitted_requests(
            [render_transcript([message]) for message in aged],
            previous,
            window=plan.summarizer_window if sized else None,
            cap=plan.cap,
            prompts=self.prompts,
            counter=self.token_counter,
            fidelity=self.fidelity,
            cap_scale=plan.cap_scale,
        )


def as_async(summarize: Summarize) -> ASummarize:
    """A sync summariser without I/O as its async twin."""

    async def asummarize(text: str, instruction: str) -> str:
        return summarize(text, instruction)

    return asummarize
