"""Context sources: where the builder and the agent path get their candidates.

A source ([`ContextSource`][langchain_contextkit.sources.ContextSource], a LangChain
`BaseRetriever`) has a name, the budget quota it draws from, and returns `RetrievalResult`s
for a query and an optional `Scope`:

- `CallableSource`: any function that returns candidates.
- `RetrieverSource`: any LangChain retriever or vector store.
- `DocsSource`: a folder of text and markdown, chunked and ranked with BM25.
- `NoteSource`: the notes of a `NoteStore`.
"""

from langchain_contextkit.sources.base import ContextSource, Scope
from langchain_contextkit.sources.callable import CallableSource
from langchain_contextkit.sources.docs import DocsSource
from langchain_contextkit.sources.notes import NoteSource
from langchain_contextkit.sources.retriever import RetrieverSource

__all__ = [
    "CallableSource",
    "ContextSource",
    "DocsSource",
    "NoteSource",
    "RetrieverSource",
    "Scope",
]
