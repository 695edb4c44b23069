"""The context builder: a Runnable that gathers, ranks and budgets sources into a prompt.

- [`ContextBuilder`][langchain_contextkit.retrieval.builder.ContextBuilder]: the Runnable
  (`build`, `build_block`, `invoke`, `ainvoke`, ...).
- [`ContextReport`][langchain_contextkit.retrieval.builder.ContextReport]: what each build kept,
  dropped and why.
- [`BudgetedRetriever`][langchain_contextkit.retrieval.builder.BudgetedRetriever]: a LangChain
  retriever that returns what the builder would keep.
"""

from langchain_contextkit.retrieval.builder.report import ContextReport
from langchain_contextkit.retrieval.builder.retriever import BudgetedRetriever
from langchain_contextkit.retrieval.builder.runnable import ContextBuilder

__all__ = ["BudgetedRetriever", "ContextBuilder", "ContextReport"]
