"""`BudgetedRetriever`: a LangChain retriever that returns what the builder would keep.

Gathered, MMR'd and budgeted like a block, returned as `Document`s in layout order.
"""

from __future__ import annotations

from collections.abc import Sequence  # noqa: TC003 - pydantic resolves the fields at runtime
from typing import TYPE_CHECKING

from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from langchain_contextkit.retrieval.budget import ContextConfig
from langchain_contextkit.retrieval.builder.runnable import ContextBuilder
from langchain_contextkit.retrieval.sources.base import ContextSource  # noqa: TC001 - a field's type
from langchain_contextkit.tokens.count import TokenCounter, count_tokens

if TYPE_CHECKING:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document

    from langchain_contextkit.retrieval.sources.base import Scope


__all__ = ["BudgetedRetriever"]


class BudgetedRetriever(BaseRetriever):
    """A retriever that returns what the builder would keep: gathered, MMR'd, budgeted.

    Drops the budgeting into any chain that expects a retriever: the kept candidates come
    back as `Document`s, in layout order, within `budget` tokens.

    Example:
        ```python
        from langchain_contextkit import CallableSource, ContextConfig
        from langchain_contextkit.retrieval.builder.retriever import BudgetedRetriever

        source = CallableSource("rag", lambda q: ["short fact", "another fact"])
        retriever = BudgetedRetriever(sources=[source], config=ContextConfig(), budget=500)
        print([d.page_content for d in retriever.invoke("facts")])
        # ['short fact', 'another fact']
        ```
    """

    sources: Sequence[ContextSource]
    """The sources to gather from."""

    config: ContextConfig = Field(default_factory=ContextConfig)
    """Ratios, MMR knobs and borrowing."""

    budget: int | None = None
    """Tokens the kept documents may take; the config's dynamic region when None."""

    token_counter: TokenCounter = count_tokens
    """Counts the tokens of a string."""

    strict: bool = False
    """Raise when a source fails instead of retrieving without it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _builder(self) -> ContextBuilder:
        return ContextBuilder(
            self.config, sources=self.sources, token_counter=self.token_counter, strict=self.strict
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, scope: Scope | None = None
    ) -> list[Document]:
        report = self._builder().build_block_report(
            query, scope=scope, budget=self.budget, callbacks=run_manager.get_child()
        )
        return [r.to_document() for r in report.items]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        scope: Scope | None = None,
    ) -> list[Document]:
        report = await self._builder().abuild_block_report(
            query, scope=scope, budget=self.budget, callbacks=run_manager.get_child()
        )
        return [r.to_document() for r in report.items]
