"""Context engineering for LangChain and LangGraph.

Decide what enters a model's window, keep it inside one explicit token ledger, and
compact what overflows. Everything public is importable from the package root.

Each layer folder (`agents`, `builder`, `compaction`, `sources`, ...) re-exports its public
names in its `__init__.py`; the root re-exports every layer's `__all__` and the core
modules' public names, and `dir()` shows exactly `__all__`.

Names are imported on first use (PEP 562), so `import langchain_contextkit` stays quick;
importing a name loads only its layer. `_PUBLIC` below is the one list of public names:
`__all__` and the lazy lookup are derived from it. Type checkers cannot read a table, so
the `TYPE_CHECKING` block repeats it as imports, and `tests/unit_tests/test_public_api.py`
checks that the two agree and that each layer's entry is that layer's `__all__`.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from langchain_contextkit._version import __version__

if TYPE_CHECKING:
    from langchain_contextkit.agents import (
        CallLedger as CallLedger,
        CompactionGraphState as CompactionGraphState,
        CompactionMiddleware as CompactionMiddleware,
        ContextGraphState as ContextGraphState,
        ContextKitMiddleware as ContextKitMiddleware,
        LedgerCallbackHandler as LedgerCallbackHandler,
        LedgerWriter as LedgerWriter,
        NoteOffloadStore as NoteOffloadStore,
        OffloadConfig as OffloadConfig,
        OffloadStore as OffloadStore,
        ToolResultOffloader as ToolResultOffloader,
        WindowAssembler as WindowAssembler,
        WorkspaceOffloadStore as WorkspaceOffloadStore,
        compaction_node as compaction_node,
        context_node as context_node,
        reducer_node as reducer_node,
    )
    from langchain_contextkit.budget import (
        ContextConfig as ContextConfig,
    )
    from langchain_contextkit.builder import (
        BudgetedRetriever as BudgetedRetriever,
        ContextBuilder as ContextBuilder,
        ContextReport as ContextReport,
    )
    from langchain_contextkit.compaction import (
        CompactionConfig as CompactionConfig,
        CompactionResult as CompactionResult,
        ExtractiveSummarizer as ExtractiveSummarizer,
        HistoryCompactor as HistoryCompactor,
        RunningSummary as RunningSummary,
        summarizer_from_llm as summarizer_from_llm,
    )
    from langchain_contextkit.config import (
        ContextKitConfig as ContextKitConfig,
    )
    from langchain_contextkit.dashboard import (
        LedgerDashboard as LedgerDashboard,
        LedgerFigures as LedgerFigures,
        compare_ledgers as compare_ledgers,
        plot_ledger as plot_ledger,
        summarize_ledgers as summarize_ledgers,
    )
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
    from langchain_contextkit.messages import (
        MessageProblem as MessageProblem,
        MessageRepair as MessageRepair,
        check_messages as check_messages,
        find_message_problems as find_message_problems,
        repair_messages as repair_messages,
        trim_to_budget as trim_to_budget,
    )
    from langchain_contextkit.mmr import (
        mmr_indices as mmr_indices,
        mmr_select as mmr_select,
    )
    from langchain_contextkit.notes import (
        DEFAULT_MAX_CONTENT_CHARS as DEFAULT_MAX_CONTENT_CHARS,
        DEFAULT_MAX_NOTES as DEFAULT_MAX_NOTES,
        DEFAULT_NAMESPACE as DEFAULT_NAMESPACE,
        DEFAULT_RECENT as DEFAULT_RECENT,
        DEFAULT_SEARCH_LIMIT as DEFAULT_SEARCH_LIMIT,
        NOTE_TYPES as NOTE_TYPES,
        FileNoteStore as FileNoteStore,
        Note as Note,
        NoteHit as NoteHit,
        NoteInfo as NoteInfo,
        NoteStore as NoteStore,
        NoteSummary as NoteSummary,
        NoteType as NoteType,
        StoreNoteStore as StoreNoteStore,
        check_note_id as check_note_id,
        new_note_id as new_note_id,
    )
    from langchain_contextkit.prompts import (
        PromptRegistry as PromptRegistry,
        with_data_boundary as with_data_boundary,
    )
    from langchain_contextkit.quality import (
        AblationCase as AblationCase,
        AblationReport as AblationReport,
        CaseDelta as CaseDelta,
        CaseResult as CaseResult,
        ComponentScore as ComponentScore,
        Drift as Drift,
        EvalCase as EvalCase,
        EvalResult as EvalResult,
        Fact as Fact,
        FigureDelta as FigureDelta,
        GateCheck as GateCheck,
        GateResult as GateResult,
        JudgeScore as JudgeScore,
        QualityGate as QualityGate,
        aablate as aablate,
        ablate as ablate,
        aevaluate as aevaluate,
        assert_context_quality as assert_context_quality,
        evaluate as evaluate,
    )
    from langchain_contextkit.reducers import (
        REDUCERS as REDUCERS,
        PlanStep as PlanStep,
        PlanTrajectory as PlanTrajectory,
        ReducerConfig as ReducerConfig,
        ReflectionRound as ReflectionRound,
        ReflectionTrajectory as ReflectionTrajectory,
        reduce_agent as reduce_agent,
        reduce_agent_sync as reduce_agent_sync,
        reduce_plan as reduce_plan,
        reduce_plan_sync as reduce_plan_sync,
        reduce_reflection as reduce_reflection,
        reduce_reflection_sync as reduce_reflection_sync,
        tokens_of as tokens_of,
    )
    from langchain_contextkit.retrieval import (
        RetrievalResult as RetrievalResult,
    )
    from langchain_contextkit.sources import (
        CallableSource as CallableSource,
        ContextSource as ContextSource,
        DocsSource as DocsSource,
        NoteSource as NoteSource,
        RetrieverSource as RetrieverSource,
        Scope as Scope,
    )
    from langchain_contextkit.tokens import (
        DEFAULT_IMAGE_TOKENS as DEFAULT_IMAGE_TOKENS,
        TiktokenCounter as TiktokenCounter,
        TokenCounter as TokenCounter,
        count_each as count_each,
        count_message_tokens as count_message_tokens,
        count_tokens as count_tokens,
        count_tool_tokens as count_tool_tokens,
        tiktoken_counter as tiktoken_counter,
        truncate_to_tokens as truncate_to_tokens,
    )
    from langchain_contextkit.tools import (
        DEFAULT_READ_ONLY as DEFAULT_READ_ONLY,
        NoteTool as NoteTool,
        NoteToolError as NoteToolError,
        NoteToolInput as NoteToolInput,
        TerminalTool as TerminalTool,
    )
    from langchain_contextkit.window_budget import (
        WindowBudget as WindowBudget,
        WindowBudgetConfig as WindowBudgetConfig,
    )

_PUBLIC: dict[str, tuple[str, ...]] = {
    "agents": (
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
        "WorkspaceOffloadStore",
        "compaction_node",
        "context_node",
        "reducer_node",
    ),
    "budget": ("ContextConfig",),
    "builder": ("BudgetedRetriever", "ContextBuilder", "ContextReport"),
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
    "mmr": ("mmr_indices", "mmr_select"),
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
    "prompts": ("PromptRegistry", "with_data_boundary"),
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
    "retrieval": ("RetrievalResult",),
    "sources": (
        "CallableSource",
        "ContextSource",
        "DocsSource",
        "NoteSource",
        "RetrieverSource",
        "Scope",
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
    "tools": ("DEFAULT_READ_ONLY", "NoteTool", "NoteToolError", "NoteToolInput", "TerminalTool"),
    "window_budget": ("WindowBudget", "WindowBudgetConfig"),
}
"""Every public name, by the layer package or core module (under `langchain_contextkit.`)
that exports it."""

_EXPORTS: dict[str, str] = {
    name: f"{__name__}.{module}" for module, names in _PUBLIC.items() for name in names
}
"""Where each public name lives: the module imported when the name is first used."""

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
    """The public names only: not the imports and loaded submodules `globals()` holds."""
    return list(__all__)


# A library never configures logging; this keeps "No handlers could be found" away.
logging.getLogger(__name__).addHandler(logging.NullHandler())
