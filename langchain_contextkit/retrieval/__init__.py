"""Retrieval: what enters one prompt from outside the conversation.

`RetrievalResult` (the candidate every source returns), the sources (LangChain
`BaseRetriever` adapters), MMR selection, the token allocation between sources
(`ContextConfig`) and `ContextBuilder`, the Runnable that ties them together.
"""

from langchain_contextkit.retrieval.budget import ContextConfig
from langchain_contextkit.retrieval.builder import BudgetedRetriever, ContextBuilder, ContextReport
from langchain_contextkit.retrieval.mmr import mmr_indices, mmr_select
from langchain_contextkit.retrieval.result import RetrievalResult
from langchain_contextkit.retrieval.sources import (
    CallableSource,
    ContextSource,
    DocsSource,
    NoteSource,
    RetrieverSource,
    Scope,
)

__all__ = [
    "BudgetedRetriever",
    "CallableSource",
    "ContextBuilder",
    "ContextConfig",
    "ContextReport",
    "ContextSource",
    "DocsSource",
    "NoteSource",
    "RetrievalResult",
    "RetrieverSource",
    "Scope",
    "mmr_indices",
    "mmr_select",
]
