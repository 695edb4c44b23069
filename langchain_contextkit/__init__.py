"""Context engineering for LangChain and LangGraph.

Decide what enters a model's window, keep it inside one explicit token ledger, and
compact what overflows. Everything public is importable from the package root.

Names are imported on first use (PEP 562), so `import langchain_contextkit` stays quick;
importing a name loads only the modules it needs.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from langchain_contextkit._version import __version__

if TYPE_CHECKING:
    from langchain_contextkit.agents.assembler import WindowAssembler
    from langchain_contextkit.agents.ledger import CallLedger
    from langchain_contextkit.agents.middleware import CompactionMiddleware, ContextKitMiddleware
    from langchain_contextkit.agents.nodes import (
        CompactionGraphState,
        compaction_node,
        context_node,
        reducer_node,
    )
    from langchain_contextkit.budget import ContextConfig
    from langchain_contextkit.builder.report import ContextReport
    from langchain_contextkit.builder.retriever import BudgetedRetriever
    from langchain_contextkit.builder.runnable import ContextBuilder
    from langchain_contextkit.compaction.compactor import (
        CompactionConfig,
        CompactionResult,
        HistoryCompactor,
        RunningSummary,
    )
    from langchain_contextkit.compaction.summarizers import (
        ExtractiveSummarizer,
        summarizer_from_llm,
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
    from langchain_contextkit.messages import (
        MessageProblem,
        check_messages,
        find_message_problems,
        trim_to_budget,
    )
    from langchain_contextkit.mmr import mmr_indices, mmr_select
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
    from langchain_contextkit.reducers import REDUCERS
    from langchain_contextkit.reducers.agent import reduce_agent, reduce_agent_sync
    from langchain_contextkit.reducers.base import ReducerConfig, tokens_of
    from langchain_contextkit.reducers.plan import reduce_plan, reduce_plan_sync
    from langchain_contextkit.reducers.reflection import reduce_reflection, reduce_reflection_sync
    from langchain_contextkit.reducers.trajectories import (
        PlanStep,
        PlanTrajectory,
        ReflectionRound,
        ReflectionTrajectory,
    )
    from langchain_contextkit.retrieval import RetrievalResult
    from langchain_contextkit.sources.base import ContextSource, Scope
    from langchain_contextkit.sources.callable import CallableSource
    from langchain_contextkit.sources.docs import DocsSource
    from langchain_contextkit.sources.notes import NoteSource
    from langchain_contextkit.sources.retriever import RetrieverSource
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
    from langchain_contextkit.tools import DEFAULT_READ_ONLY, NoteTool, TerminalTool
    from langchain_contextkit.window_budget import WindowBudget, WindowBudgetConfig

_EXPORTS: dict[str, str] = {
    "CallLedger": "langchain_contextkit.agents.ledger",
    "DocsSource": "langchain_contextkit.sources.docs",
    "WindowAssembler": "langchain_contextkit.agents.assembler",
    "BudgetedRetriever": "langchain_contextkit.builder.retriever",
    "CallableSource": "langchain_contextkit.sources.callable",
    "CompactionConfig": "langchain_contextkit.compaction.compactor",
    "CompactionGraphState": "langchain_contextkit.agents.nodes",
    "CompactionMiddleware": "langchain_contextkit.agents.middleware",
    "CompactionResult": "langchain_contextkit.compaction.compactor",
    "ConfigError": "langchain_contextkit.errors",
    "ContextBuilder": "langchain_contextkit.builder.runnable",
    "ContextConfig": "langchain_contextkit.budget",
    "ContextKitConfig": "langchain_contextkit.config",
    "ContextKitError": "langchain_contextkit.errors",
    "ContextKitMiddleware": "langchain_contextkit.agents.middleware",
    "ContextReport": "langchain_contextkit.builder.report",
    "ContextSource": "langchain_contextkit.sources.base",
    "ContextWindowExceeded": "langchain_contextkit.errors",
    "DEFAULT_IMAGE_TOKENS": "langchain_contextkit.tokens",
    "DEFAULT_READ_ONLY": "langchain_contextkit.tools",
    "ExtractiveSummarizer": "langchain_contextkit.compaction.summarizers",
    "FileNoteStore": "langchain_contextkit.notes",
    "HistoryCompactor": "langchain_contextkit.compaction.compactor",
    "InvalidMessagesError": "langchain_contextkit.errors",
    "InvalidNoteError": "langchain_contextkit.errors",
    "MessageProblem": "langchain_contextkit.messages",
    "Note": "langchain_contextkit.notes",
    "NoteError": "langchain_contextkit.errors",
    "NoteHit": "langchain_contextkit.notes",
    "NoteInfo": "langchain_contextkit.notes",
    "NoteLimitError": "langchain_contextkit.errors",
    "NoteNotFoundError": "langchain_contextkit.errors",
    "NoteSource": "langchain_contextkit.sources.notes",
    "NoteStore": "langchain_contextkit.notes",
    "NoteSummary": "langchain_contextkit.notes",
    "NoteTool": "langchain_contextkit.tools",
    "NoteType": "langchain_contextkit.notes",
    "PlanStep": "langchain_contextkit.reducers.trajectories",
    "PlanTrajectory": "langchain_contextkit.reducers.trajectories",
    "PromptRegistry": "langchain_contextkit.prompts",
    "REDUCERS": "langchain_contextkit.reducers",
    "ReducerConfig": "langchain_contextkit.reducers.base",
    "ReflectionRound": "langchain_contextkit.reducers.trajectories",
    "ReflectionTrajectory": "langchain_contextkit.reducers.trajectories",
    "RetrievalResult": "langchain_contextkit.retrieval",
    "RetrieverSource": "langchain_contextkit.sources.retriever",
    "RunningSummary": "langchain_contextkit.compaction.compactor",
    "Scope": "langchain_contextkit.sources.base",
    "StoreNoteStore": "langchain_contextkit.notes",
    "TerminalTool": "langchain_contextkit.tools",
    "TiktokenCounter": "langchain_contextkit.tokens",
    "TokenCounter": "langchain_contextkit.tokens",
    "TokenizerUnavailableError": "langchain_contextkit.errors",
    "WindowBudget": "langchain_contextkit.window_budget",
    "WindowBudgetConfig": "langchain_contextkit.window_budget",
    "check_messages": "langchain_contextkit.messages",
    "compaction_node": "langchain_contextkit.agents.nodes",
    "context_node": "langchain_contextkit.agents.nodes",
    "count_each": "langchain_contextkit.tokens",
    "count_message_tokens": "langchain_contextkit.tokens",
    "count_tokens": "langchain_contextkit.tokens",
    "count_tool_tokens": "langchain_contextkit.tokens",
    "find_message_problems": "langchain_contextkit.messages",
    "mmr_indices": "langchain_contextkit.mmr",
    "mmr_select": "langchain_contextkit.mmr",
    "reduce_agent": "langchain_contextkit.reducers.agent",
    "reduce_agent_sync": "langchain_contextkit.reducers.agent",
    "reduce_plan": "langchain_contextkit.reducers.plan",
    "reduce_plan_sync": "langchain_contextkit.reducers.plan",
    "reduce_reflection": "langchain_contextkit.reducers.reflection",
    "reduce_reflection_sync": "langchain_contextkit.reducers.reflection",
    "reducer_node": "langchain_contextkit.agents.nodes",
    "summarizer_from_llm": "langchain_contextkit.compaction.summarizers",
    "tiktoken_counter": "langchain_contextkit.tokens",
    "tokens_of": "langchain_contextkit.reducers.base",
    "trim_to_budget": "langchain_contextkit.messages",
    "truncate_to_tokens": "langchain_contextkit.tokens",
    "with_data_boundary": "langchain_contextkit.prompts",
}
"""Where each public name lives: the module imported when the name is first used."""

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "DEFAULT_READ_ONLY",
    "REDUCERS",
    "BudgetedRetriever",
    "CallLedger",
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
    "DocsSource",
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
    "WindowAssembler",
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
    "mmr_indices",
    "mmr_select",
    "reduce_agent",
    "reduce_agent_sync",
    "reduce_plan",
    "reduce_plan_sync",
    "reduce_reflection",
    "reduce_reflection_sync",
    "reducer_node",
    "summarizer_from_llm",
    "tiktoken_counter",
    "tokens_of",
    "trim_to_budget",
    "truncate_to_tokens",
    "with_data_boundary",
]


def __getattr__(name: str) -> Any:  # noqa: ANN401 - any public object
    """Import a public name on first use and cache it in the module."""
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# A library never configures logging; this keeps "No handlers could be found" away.
logging.getLogger(__name__).addHandler(logging.NullHandler())
