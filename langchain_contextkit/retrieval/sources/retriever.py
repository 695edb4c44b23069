"""`RetrieverSource`: a context source over any LangChain retriever or vector store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import RunnableConfig

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval.sources.base import ContextSource, Scope, _from_document

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import Document

    from langchain_contextkit.retrieval.result import RetrievalResult

__all__ = ["RetrieverSource"]


class RetrieverSource(ContextSource):
    """A source backed by any LangChain retriever (or vector store, via `as_retriever`).

    The retriever is invoked with the query (the scope is not passed: a retriever has
    no notion of it) and with the caller's callbacks, so its run nests in traces. A
    document's score comes from its `score` or `relevance_score` metadata, else from
    its rank, `1 / (rank + 1)`. At most `k` documents are kept; the retriever's own
    settings (such as `search_kwargs={"k": ...}`) decide how many come back at all.

    With `embeddings`, the kept documents are embedded in one batched
    `embed_documents` call per fetch (`aembed_documents` in `afetch`) so MMR can tell
    near-duplicates apart; without, results carry no embedding. The vectors never
    appear in the `Document`s that `invoke` returns.

    ```python
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_contextkit.retrieval.sources.retriever import RetrieverSource

    embeddings = DeterministicFakeEmbedding(size=8)
    store = InMemoryVectorStore.from_texts(
        ["Meals are capped at 80 per day.", "Hotels need a receipt.", "Taxis are fine."],
        embeddings,
    )
    source = RetrieverSource("rag", store.as_retriever(), embeddings=embeddings, k=2)
    results = source.fetch("hotel receipts")
    print(len(results), [r.score for r in results], len(results[0].embedding))
    # 2 [1.0, 0.5] 8
    print(sorted(source.invoke("hotel receipts")[0].metadata))
    # ['contextkit_score', 'contextkit_source']
    ```
    """

    retriever: BaseRetriever
    """The retriever to adapt."""

    embeddings: Embeddings | None = None
    """Embeddings for the results' vectors (used by MMR); `None` leaves them empty."""

    def __init__(
        self,
        name: str,
        retriever: BaseRetriever,
        *,
        embeddings: Embeddings | None = None,
        k: int | None = None,
        **kwargs: Any,  # noqa: ANN401 - other retriever fields (tags, metadata)
    ) -> None:
        """Adapt `retriever` as the source `name`.

        Args:
            name: The budget quota this source draws from.
            retriever: Any LangChain retriever.
            embeddings: Embeddings to compute the results' vectors with, or `None`.
            k: Maximum number of results per fetch; `None` for no cap.
            **kwargs: Other retriever fields (`tags`, `metadata`).

        Raises:
            ConfigError: If `name` is empty, `k` is not an integer >= 1, `retriever`
                is not a `BaseRetriever` or `embeddings` is not an `Embeddings`.
        """
        _check_retriever_args(name, retriever, embeddings)
        super().__init__(name=name, retriever=retriever, embeddings=embeddings, k=k, **kwargs)

    def fetch(
        self,
        query: str,
        scope: Scope | None = None,  # noqa: ARG002 - a retriever has no notion of scope
        *,
        callbacks: Callbacks = None,
    ) -> list[RetrievalResult]:
        """Invoke the retriever and convert at most `k` of its documents (scope unused)."""
        return self._fetch_capped(query, None, limit=self.k, callbacks=callbacks)

    async def afetch(
        self,
        query: str,
        scope: Scope | None = None,  # noqa: ARG002 - a retriever has no notion of scope
        *,
        callbacks: Callbacks = None,
    ) -> list[RetrievalResult]:
        """Async twin of `fetch`, through `ainvoke` and `aembed_documents`."""
        return await self._afetch_capped(query, None, limit=self.k, callbacks=callbacks)

    def _fetch_capped(
        self,
        query: str,
        scope: Scope | None,  # noqa: ARG002 - a retriever has no notion of scope
        *,
        limit: int | None,
        callbacks: Callbacks,
    ) -> list[RetrievalResult]:
        """Invoke, cap, embed in one batch, convert."""
        docs = self.retriever.invoke(query, config=RunnableConfig(callbacks=callbacks))
        docs = docs if limit is None else docs[:limit]
        vectors = None
        if self.embeddings is not None and docs:
            vectors = self.embeddings.embed_documents([doc.page_content for doc in docs])
        return self._results(docs, vectors)

    async def _afetch_capped(
        self,
        query: str,
        scope: Scope | None,  # noqa: ARG002 - a retriever has no notion of scope
        *,
        limit: int | None,
        callbacks: Callbacks,
    ) -> list[RetrievalResult]:
        """Async twin of `_fetch_capped`."""
        docs = await self.retriever.ainvoke(query, config=RunnableConfig(callbacks=callbacks))
        docs = docs if limit is None else docs[:limit]
        vectors = None
        if self.embeddings is not None and docs:
            vectors = await self.embeddings.aembed_documents([doc.page_content for doc in docs])
        return self._results(docs, vectors)

    def _results(
        self, docs: Sequence[Document], vectors: Sequence[Sequence[float]] | None
    ) -> list[RetrievalResult]:
        """Convert documents (and their vectors, if any) to results."""
        if vectors is None:
            return [_from_document(doc, rank, self.name) for rank, doc in enumerate(docs)]
        if len(vectors) != len(docs):
            msg = (
                f"source {self.name!r}: embeddings returned {len(vectors)} vectors "
                f"for {len(docs)} documents"
            )
            raise ValueError(msg)
        return [
            _from_document(doc, rank, self.name, embedding=vector)
            for rank, (doc, vector) in enumerate(zip(docs, vectors, strict=True))
        ]


def _check_retriever_args(name: str, retriever: object, embeddings: object) -> None:
    """Validate `RetrieverSource` arguments (typed `object`: they come from users)."""
    if not isinstance(retriever, BaseRetriever):
        msg = (
            f"source {name!r}: retriever must be a BaseRetriever (for a vector store, "
            f"pass store.as_retriever()), got {type(retriever).__name__}"
        )
        raise ConfigError(msg)
    if embeddings is not None and not isinstance(embeddings, Embeddings):
        msg = (
            f"source {name!r}: embeddings must be an Embeddings instance, "
            f"got {type(embeddings).__name__}"
        )
        raise ConfigError(msg)
