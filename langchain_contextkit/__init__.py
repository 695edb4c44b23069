"""Context engineering for LangChain and LangGraph.

Decide what enters a model's window, keep it inside one explicit token ledger, and
compact what overflows. Everything public is importable from the package root.
"""

import logging

from langchain_contextkit._version import __version__
from langchain_contextkit.budget import ContextConfig, WindowBudget, WindowBudgetConfig
from langchain_contextkit.builder import BudgetedRetriever, ContextBuilder, ContextReport
from langchain_contextkit.compaction import (
    CompactionConfig,
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
)
from langchain_contextkit.config import ContextKitConfig
from langchain_contextkit.errors import (
    ConfigError,
    ContextKitError,
    ContextWindowExceeded,
    InvalidMessagesError,
    InvalidNoteError,
    NoteError,
    NoteLimitError,
    NoteNotFoundError,
    TokenizerUnavailableError,
)
from langchain_contextkit.graph import (
    CompactionGraphState,
    compaction_node,
    context_node,
    reducer_node,
)
from langchain_contextkit.messages import (
    MessageProblem,
    check_messages,
    find_message_problems,
    trim_to_budget,
)
from langchain_contextkit.middleware import CompactionMiddleware, ContextKitMiddleware
from langchain_contextkit.mmr import RetrievalResult, mmr_select
from langchain_contextkit.notes import (
    FileNoteStore,
    Note,
    NoteHit,
    NoteInfo,
    NoteStore,
    NoteSummary,
    NoteType,
    StoreNoteStore,
)
from langchain_contextkit.prompts import PromptRegistry, with_data_boundary
from langchain_contextkit.reducers import (
    REDUCERS,
    ReducerConfig,
    reduce_agent,
    reduce_plan,
    reduce_reflection,
    tokens_of,
)
from langchain_contextkit.sources import CallableSource, ContextSource, RetrieverSource, Scope
from langchain_contextkit.summarizers import ExtractiveSummarizer, summarizer_from_llm
from langchain_contextkit.tokens import (
    DEFAULT_IMAGE_TOKENS,
    TiktokenCounter,
    TokenCounter,
    count_each,
    count_message_tokens,
    count_tokens,
    count_tool_tokens,
    tiktoken_counter,
    truncate_to_tokens,
)
from langchain_contextkit.tools import DEFAULT_READ_ONLY, NoteSource, NoteTool, TerminalTool
from langchain_contextkit.trajectories import (
    PlanStep,
    PlanTrajectory,
    ReflectionRound,
    ReflectionTrajectory,
)

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "DEFAULT_READ_ONLY",
    "REDUCERS",
    "BudgetedRetriever",
    "CallableSource",
    "CompactionConfig",
    "CompactionGraphState",
    "CompactionMiddleware",
    "CompactionResult",
    "ConfigError",
    "ContextBuilder",
    "ContextConfig",
    "ContextKitConfig",
    "ContextKitError",
    "ContextKitMiddleware",
    "ContextReport",
    "ContextSource",
    "ContextWindowExceeded",
    "ExtractiveSummarizer",
    "FileNoteStore",
    "HistoryCompactor",
    "InvalidMessagesError",
    "InvalidNoteError",
    "MessageProblem",
    "Note",
    "NoteError",
    "NoteHit",
    "NoteInfo",
    "NoteLimitError",
    "NoteNotFoundError",
    "NoteSource",
    "NoteStore",
    "NoteSummary",
    "NoteTool",
    "NoteType",
    "PlanStep",
    "PlanTrajectory",
    "PromptRegistry",
    "ReducerConfig",
    "ReflectionRound",
    "ReflectionTrajectory",
    "RetrievalResult",
    "RetrieverSource",
    "RunningSummary",
    "Scope",
    "StoreNoteStore",
    "TerminalTool",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableError",
    "WindowBudget",
    "WindowBudgetConfig",
    "__version__",
    "check_messages",
    "compaction_node",
    "context_node",
    "count_each",
    "count_message_tokens",
    "count_tokens",
    "count_tool_tokens",
    "find_message_problems",
    "mmr_select",
    "reduce_agent",
    "reduce_plan",
    "reduce_reflection",
    "reducer_node",
    "summarizer_from_llm",
    "tiktoken_counter",
    "tokens_of",
    "trim_to_budget",
    "truncate_to_tokens",
    "with_data_boundary",
]

# A library logs, the application decides where logs go (the logging HOWTO's advice).
logging.getLogger(__name__).addHandler(logging.NullHandler())
