"""Context sources: where the builder and the agent path get their candidates.

A source ([`ContextSource`][langchain_contextkit.retrieval.sources.ContextSource], a LangChain
`BaseRetriever`) has a name, the budget quota it draws from, and returns `RetrievalResult`s
for a query and an optional `Scope`:

- `CallableSource`: any function that returns candidates.
- `RetrieverSource`: any LangChain retriever or vector store.
- `DocsSource`: a folder of text and markdown, chunked and ranked with BM25.
- `NoteSource`: the notes of a `NoteStore`.
"""

from langchain_contextkit.retrieval.sources.base import ContextSource, Scope
from langchain_contextkit.retrieval.sources.callable import CallableSource
from langchain_contextkit.retrieval.sources.docs import DocsSource
from langchain_contextkit.retrieval.sources.notes import NoteSource
from langchain_contextkit.retrieval.sources.retriever import RetrieverSource

__all__ = [
    "CallableSource",
    "ContextSource",
    "DocsSource",
    "NoteSource",
    "RetrieverSource",
    "Scope",
]
