"""The retrieval block of an agent's request: one human message, rebuilt every call.

It sits next to the question it was retrieved for (seed 004's golden positions) and is
a human message: Anthropic rejects, and Gemini hoists, a system message in the middle of
a conversation. It carries `RETRIEVAL_ID`, so a layout drops any block a caller sent back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_contextkit.budget import ContextConfig

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.callbacks import Callbacks

    from langchain_contextkit.builder.gather import Gathered
    from langchain_contextkit.builder.report import ContextReport
    from langchain_contextkit.builder.runnable import ContextBuilder
    from langchain_contextkit.sources.base import ContextSource, Scope


__all__ = ["RETRIEVAL_ID", "CallRetrieval", "block_message", "config_for", "query_of"]

RETRIEVAL_ID = "contextkit-retrieval"
"""Id of the retrieval-block message, so it is recognised (and never stored as history)."""


def config_for(sources: Sequence[ContextSource]) -> ContextConfig:
    """Equal shares for the given sources (the block's budget comes from the ledger)."""
    names = sorted({source.name for source in sources})
    return ContextConfig(source_ratios=dict.fromkeys(names, 1 / len(names)), min_chunk_tokens=1)


def query_of(turn: Sequence[BaseMessage]) -> str:
    """What the block is retrieved for: the text of the turn's user message."""
    return turn[0].text if turn else ""


def block_message(report: ContextReport | None) -> HumanMessage | None:
    """The block as a message, or None when the report has no text."""
    # A human message: providers accept it anywhere before the question (a system
    # message mid-conversation is rejected by Anthropic and hoisted by Gemini).
    if report is None or not report.text.strip():
        return None
    return HumanMessage(report.text, id=RETRIEVAL_ID)


class CallRetrieval:
    """One model call's retrieval: who asks (scope, the run's callbacks) and what came back.

    The sources are asked once per call: a retry after a refusal budgets the same
    candidates into its smaller block instead of fetching them again.
    """

    def __init__(self, scope: Scope | None = None, callbacks: Callbacks = None) -> None:
        """Remember who asks; nothing is fetched yet."""
        self.scope = scope
        self.callbacks = callbacks
        self._fetched: tuple[str, Gathered] | None = None

    def report(self, builder: ContextBuilder, query: str, budget: int) -> ContextReport:
        """The block for `query` within `budget`, fetched on the first call only."""
        gathered = self._known(query)
        if gathered is None:
            gathered = builder.gather(query, scope=self.scope, callbacks=self.callbacks)
            self._fetched = (query, gathered)
        return builder.build_block_report(query, budget=budget, gathered=gathered)

    async def areport(self, builder: ContextBuilder, query: str, budget: int) -> ContextReport:
        """Async `report`."""
        gathered = self._known(query)
        if gathered is None:
            gathered = await builder.agather(query, scope=self.scope, callbacks=self.callbacks)
            self._fetched = (query, gathered)
        return await builder.abuild_block_report(query, budget=budget, gathered=gathered)

    def _known(self, query: str) -> Gathered | None:
        fetched = self._fetched
        return fetched[1] if fetched is not None and fetched[0] == query else None
