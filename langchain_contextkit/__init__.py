"""Context engineering for LangChain and LangGraph.

Decide what enters a model's window, keep it inside one explicit token ledger, and
compact what overflows. Everything public is importable from the package root: each
layer folder re-exports its names, `_PUBLIC` lists them once by layer, and a name is
imported on first use (PEP 562), so `import langchain_contextkit` stays quick.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from langchain_contextkit._version import __version__

if TYPE_CHECKING:  # a layer's own __all__, else the names below; at run time, __getattr__
    from langchain_contextkit.agent import *  # noqa: F403
    from langchain_contextkit.compaction import *  # noqa: F403
    from langchain_contextkit.config import *  # noqa: F403
    from langchain_contextkit.dashboard import *  # noqa: F403
    from langchain_contextkit.errors import (
        ConfigError as ConfigError,
        ContextKitError as ContextKitError,
        ContextQualityError as ContextQualityError,
        ContextQualityWarning as ContextQualityWarning,
        ContextWindowExceeded as ContextWindowExceeded,
        InvalidMessagesError as InvalidMessagesError,
        InvalidNoteError as InvalidNoteError,
        NoteError as NoteError,
        NoteLimitError as NoteLimitError,
        NoteNotFoundError as NoteNotFoundError,
        TokenizerUnavailableError as TokenizerUnavailableError,
    )
    from langchain_contextkit.messages import *  # noqa: F403
    from langchain_contextkit.notes import *  # noqa: F403
    from langchain_contextkit.prompts import (
        PromptRegistry as PromptRegistry,
        with_data_boundary as with_data_boundary,
    )
    from langchain_contextkit.quality import *  # noqa: F403
    from langchain_contextkit.reducers import *  # noqa: F403
    from langchain_contextkit.retrieval import *  # noqa: F403
    from langchain_contextkit.tokens import *  # noqa: F403
    from langchain_contextkit.tools import *  # noqa: F403

_PUBLIC: dict[str, tuple[str, ...]] = {
    "agent": (
        "CallLedger",
        "CompactionGraphState",
        "CompactionMiddleware",
        "ContextGraphState",
        "ContextKitMiddleware",
        "LedgerCallbackHandler",
        "LedgerWriter",
        "NoteOffloadStore",
        "OffloadConfig",
        "OffloadStore",
        "ToolResultOffloader",
        "WindowAssembler",
        "WindowBudget",
        "WindowBudgetConfig",
        "WorkspaceOffloadStore",
        "compaction_node",
        "context_node",
        "reducer_node",
    ),
    "compaction": (
        "CompactionConfig",
        "CompactionResult",
        "ExtractiveSummarizer",
        "HistoryCompactor",
        "RunningSummary",
        "summarizer_from_llm",
    ),
    "config": ("ContextKitConfig",),
    "dashboard": (
        "LedgerDashboard",
        "LedgerFigures",
        "compare_ledgers",
        "plot_ledger",
        "summarize_ledgers",
    ),
    "errors": (
        "ConfigError",
        "ContextKitError",
        "ContextQualityError",
        "ContextQualityWarning",
        "ContextWindowExceeded",
        "InvalidMessagesError",
        "InvalidNoteError",
        "NoteError",
        "NoteLimitError",
        "NoteNotFoundError",
        "TokenizerUnavailableError",
    ),
    "messages": (
        "MessageProblem",
        "MessageRepair",
        "check_messages",
        "find_message_problems",
        "repair_messages",
        "trim_to_budget",
    ),
    "notes": (
        "DEFAULT_MAX_CONTENT_CHARS",
        "DEFAULT_MAX_NOTES",
        "DEFAULT_NAMESPACE",
        "DEFAULT_RECENT",
        "DEFAULT_SEARCH_LIMIT",
        "NOTE_TYPES",
        "FileNoteStore",
        "Note",
        "NoteHit",
        "NoteInfo",
        "NoteStore",
        "NoteSummary",
        "NoteType",
        "StoreNoteStore",
        "check_note_id",
        "new_note_id",
    ),
    "prompts": (
        "PromptRegistry",
        "with_data_boundary",
    ),
    "quality": (
        "AblationCase",
        "AblationReport",
        "CaseDelta",
        "CaseResult",
        "ComponentScore",
        "Drift",
        "EvalCase",
        "EvalResult",
        "Fact",
        "FigureDelta",
        "GateCheck",
        "GateResult",
        "JudgeScore",
        "QualityGate",
        "aablate",
        "ablate",
        "aevaluate",
        "assert_context_quality",
        "evaluate",
    ),
    "reducers": (
        "REDUCERS",
        "PlanStep",
        "PlanTrajectory",
        "ReducerConfig",
        "ReflectionRound",
        "ReflectionTrajectory",
        "reduce_agent",
        "reduce_agent_sync",
        "reduce_plan",
        "reduce_plan_sync",
        "reduce_reflection",
        "reduce_reflection_sync",
        "tokens_of",
    ),
    "retrieval": (
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
    ),
    "tokens": (
        "DEFAULT_IMAGE_TOKENS",
        "TiktokenCounter",
        "TokenCounter",
        "count_each",
        "count_message_tokens",
        "count_tokens",
        "count_tool_tokens",
        "tiktoken_counter",
        "truncate_to_tokens",
    ),
    "tools": (
        "DEFAULT_READ_ONLY",
        "NoteTool",
        "NoteToolError",
        "NoteToolInput",
        "TerminalTool",
    ),
}
"""Every public name, by the layer or core module (under the root) that exports it."""

_EXPORTS = {name: f"{__name__}.{module}" for module, names in _PUBLIC.items() for name in names}

__all__ = ["__version__", *_EXPORTS]  # noqa: PLE0604 - derived from _PUBLIC


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
    """The public names only, not the imports and loaded submodules."""
    return list(__all__)


# A library never configures logging; this keeps "No handlers could be found" away.
logging.getLogger(__name__).addHandler(logging.NullHandler())
