"""Context engineering for LangChain and LangGraph.

Decide what enters a model's window, keep it inside one explicit token ledger, and
compact what overflows. Everything public is importable from the package root.
"""

import logging

from langchain_contextkit._version import __version__
from langchain_contextkit.budget import ContextConfig, WindowBudget, WindowBudgetConfig
from langchain_contextkit.builder import BudgetedRetriever, ContextBuilder, ContextReport
from langchain_contextkit.errors import (
    ConfigError,
    ContextKitError,
    ContextWindowExceeded,
    TokenizerUnavailableError,
)
from langchain_contextkit.mmr import RetrievalResult, mmr_select
from langchain_contextkit.prompts import PromptRegistry, with_data_boundary
from langchain_contextkit.sources import CallableSource, ContextSource, RetrieverSource, Scope
from langchain_contextkit.tokens import (
    DEFAULT_IMAGE_TOKENS,
    TiktokenCounter,
    TokenCounter,
    count_each,
    count_message_tokens,
    count_tokens,
    count_tool_tokens,
    tiktoken_counter,
)
from langchain_contextkit.tools import DEFAULT_READ_ONLY, TerminalTool

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "DEFAULT_READ_ONLY",
    "BudgetedRetriever",
    "CallableSource",
    "ConfigError",
    "ContextBuilder",
    "ContextConfig",
    "ContextKitError",
    "ContextReport",
    "ContextSource",
    "ContextWindowExceeded",
    "PromptRegistry",
    "RetrievalResult",
    "RetrieverSource",
    "Scope",
    "TerminalTool",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableError",
    "WindowBudget",
    "WindowBudgetConfig",
    "__version__",
    "count_each",
    "count_message_tokens",
    "count_tokens",
    "count_tool_tokens",
    "mmr_select",
    "tiktoken_counter",
    "with_data_boundary",
]

# A library logs, the application decides where logs go (the logging HOWTO's advice).
logging.getLogger(__name__).addHandler(logging.NullHandler())
