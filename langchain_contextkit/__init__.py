"""Context engineering for LangChain and LangGraph.

Decide what enters a model's window, keep it inside one explicit token ledger, and
compact what overflows. Everything public is importable from the package root.

Names are imported on first use (PEP 562), so `import langchain_contextkit` stays quick;
importing a name loads only the modules it needs. `_PUBLIC` below is the one list of
public names: `__all__` and the lazy lookup are derived from it. Type checkers cannot
read a table, so the `TYPE_CHECKING` block repeats it as imports, and
`tests/unit_tests/test_public_api.py` checks that the two agree.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from langchain_contextkit._version import __version__

if TYPE_CHECKING:
    from langchain_contextkit.agents.assembler import WindowAssembler as WindowAssembler
    from langchain_contextkit.agents.ledger import CallLedger as CallLedger
    from langchain_contextkit.agents.ledger_log import (
        LedgerCallbackHandler as LedgerCallbackHandler,
    )
    from langchain_contextkit.agents.ledger_log import (
        LedgerWriter as LedgerWriter,
    )
    from langchain_contextkit.agents.middleware import (
        CompactionMiddleware as CompactionMiddleware,
    )
    from langchain_contextkit.agents.middleware import (
        ContextKitMiddleware as ContextKitMiddleware,
    )
    from langchain_contextkit.agents.nodes import (
        CompactionGraphState as CompactionGraphState,
    )
    from langchain_contextkit.agents.nodes import (
        compaction_node as compaction_node,
    )
    from langchain_contextkit.agents.nodes import (
        context_node as context_node,
    )
    from langchain_contextkit.agents.nodes import (
        reducer_node as reducer_node,
    )
    from langchain_contextkit.agents.offload import (
        OffloadConfig as OffloadConfig,
    )
    from langchain_contextkit.agents.offload import (
        ToolResultOffloader as ToolResultOffloader,
    )
    from langchain_contextkit.agents.offload_stores import (
        NoteOffloadStore as NoteOffloadStore,
    )
    from langchain_contextkit.agents.offload_stores import (
        OffloadStore as OffloadStore,
    )
    from langchain_contextkit.agents.offload_stores import (
        WorkspaceOffloadStore as WorkspaceOffloadStore,
    )
    from langchain_contextkit.budget import ContextConfig as ContextConfig
    from langchain_contextkit.builder.report import ContextReport as ContextReport
    from langchain_contextkit.builder.retriever import BudgetedRetriever as BudgetedRetriever
    from langchain_contextkit.builder.runnable import ContextBuilder as ContextBuilder
    from langchain_contextkit.compaction.compactor import (
        CompactionConfig as CompactionConfig,
    )
    from langchain_contextkit.compaction.compactor import (
        CompactionResult as CompactionResult,
    )
    from langchain_contextkit.compaction.compactor import (
        HistoryCompactor as HistoryCompactor,
    )
    from langchain_contextkit.compaction.compactor import (
        RunningSummary as RunningSummary,
    )
    from langchain_contextkit.compaction.summarizers import (
        ExtractiveSummarizer as ExtractiveSummarizer,
    )
    from langchain_contextkit.compaction.summarizers import (
        summarizer_from_llm as summarizer_from_llm,
    )
    from langchain_contextkit.config import ContextKitConfig as ContextKitConfig
    from langchain_contextkit.dashboard.chart import plot_ledger as plot_ledger
    from langchain_contextkit.dashboard.figures import (
        LedgerDashboard as LedgerDashboard,
    )
    from langchain_contextkit.dashboard.figures import (
        LedgerFigures as LedgerFigures,
    )
    from langchain_contextkit.dashboard.figures import (
        summarize_ledgers as summarize_ledgers,
    )
    from langchain_contextkit.errors import (
        ConfigError as ConfigError,
    )
    from langchain_contextkit.errors import (
        ContextKitError as ContextKitError,
    )
    from langchain_contextkit.errors import (
        ContextQualityError as ContextQualityError,
    )
    from langchain_contextkit.errors import (
        ContextQualityWarning as ContextQualityWarning,
    )
    from langchain_contextkit.errors import (
        ContextWindowExceeded as ContextWindowExceeded,
    )
    from langchain_contextkit.errors import (
        InvalidMessagesError as InvalidMessagesError,
    )
    from langchain_contextkit.errors import (
        InvalidNoteError as InvalidNoteError,
    )
    from langchain_contextkit.errors import (
        NoteError as NoteError,
    )
    from langchain_contextkit.errors import (
        NoteLimitError as NoteLimitError,
    )
    from langchain_contextkit.errors import (
        NoteNotFoundError as NoteNotFoundError,
    )
    from langchain_contextkit.errors import (
        TokenizerUnavailableError as TokenizerUnavailableError,
    )
    from langchain_contextkit.messages import (
        MessageProblem as MessageProblem,
    )
    from langchain_contextkit.messages import (
        MessageRepair as MessageRepair,
    )
    from langchain_contextkit.messages import (
        check_messages as check_messages,
    )
    from langchain_contextkit.messages import (
        find_message_problems as find_message_problems,
    )
    from langchain_contextkit.messages import (
        repair_messages as repair_messages,
    )
    from langchain_contextkit.messages import (
        trim_to_budget as trim_to_budget,
    )
    from langchain_contextkit.mmr import (
        mmr_indices as mmr_indices,
    )
    from langchain_contextkit.mmr import (
        mmr_select as mmr_select,
    )
    from langchain_contextkit.notes import (
        FileNoteStore as FileNoteStore,
    )
    from langchain_contextkit.notes import (
        Note as Note,
    )
    from langchain_contextkit.notes import (
        NoteHit as NoteHit,
    )
    from langchain_contextkit.notes import (
        NoteInfo as NoteInfo,
    )
    from langchain_contextkit.notes import (
        NoteStore as NoteStore,
    )
    from langchain_contextkit.notes import (
        NoteSummary as NoteSummary,
    )
    from langchain_contextkit.notes import (
        NoteType as NoteType,
    )
    from langchain_contextkit.notes import (
        StoreNoteStore as StoreNoteStore,
    )
    from langchain_contextkit.prompts import (
        PromptRegistry as PromptRegistry,
    )
    from langchain_contextkit.prompts import (
        with_data_boundary as with_data_boundary,
    )
    from langchain_contextkit.quality.ablation import (
        AblationCase as AblationCase,
    )
    from langchain_contextkit.quality.ablation import (
        AblationReport as AblationReport,
    )
    from langchain_contextkit.quality.ablation import (
        aablate as aablate,
    )
    from langchain_contextkit.quality.ablation import (
        ablate as ablate,
    )
    from langchain_contextkit.quality.gate import (
        QualityGate as QualityGate,
    )
    from langchain_contextkit.quality.gate import (
        assert_context_quality as assert_context_quality,
    )
    from langchain_contextkit.quality.result import (
        GateCheck as GateCheck,
    )
    from langchain_contextkit.quality.result import (
        GateResult as GateResult,
    )
    from langchain_contextkit.reducers import REDUCERS as REDUCERS
    from langchain_contextkit.reducers.agent import (
        reduce_agent as reduce_agent,
    )
    from langchain_contextkit.reducers.agent import (
        reduce_agent_sync as reduce_agent_sync,
    )
    from langchain_contextkit.reducers.base import (
        ReducerConfig as ReducerConfig,
    )
    from langchain_contextkit.reducers.base import (
        tokens_of as tokens_of,
    )
    from langchain_contextkit.reducers.plan import (
        reduce_plan as reduce_plan,
    )
    from langchain_contextkit.reducers.plan import (
        reduce_plan_sync as reduce_plan_sync,
    )
    from langchain_contextkit.reducers.reflection import (
        reduce_reflection as reduce_reflection,
    )
    from langchain_contextkit.reducers.reflection import (
        reduce_reflection_sync as reduce_reflection_sync,
    )
    from langchain_contextkit.reducers.trajectories import (
        PlanStep as PlanStep,
    )
    from langchain_contextkit.reducers.trajectories import (
        PlanTrajectory as PlanTrajectory,
    )
    from langchain_contextkit.reducers.trajectories import (
        ReflectionRound as ReflectionRound,
    )
    from langchain_contextkit.reducers.trajectories import (
        ReflectionTrajectory as ReflectionTrajectory,
    )
    from langchain_contextkit.retrieval import RetrievalResult as RetrievalResult
    from langchain_contextkit.sources.base import (
        ContextSource as ContextSource,
    )
    from langchain_contextkit.sources.base import (
        Scope as Scope,
    )
    from langchain_contextkit.sources.callable import CallableSource as CallableSource
    from langchain_contextkit.sources.docs import DocsSource as DocsSource
    from langchain_contextkit.sources.notes import NoteSource as NoteSource
    from langchain_contextkit.sources.retriever import RetrieverSource as RetrieverSource
    from langchain_contextkit.tokens import (
        DEFAULT_IMAGE_TOKENS as DEFAULT_IMAGE_TOKENS,
    )
    from langchain_contextkit.tokens import (
        TiktokenCounter as TiktokenCounter,
    )
    from langchain_contextkit.tokens import (
        TokenCounter as TokenCounter,
    )
    from langchain_contextkit.tokens import (
        count_each as count_each,
    )
    from langchain_contextkit.tokens import (
        count_message_tokens as count_message_tokens,
    )
    from langchain_contextkit.tokens import (
        count_tokens as count_tokens,
    )
    from langchain_contextkit.tokens import (
        count_tool_tokens as count_tool_tokens,
    )
    from langchain_contextkit.tokens import (
        tiktoken_counter as tiktoken_counter,
    )
    from langchain_contextkit.tokens import (
        truncate_to_tokens as truncate_to_tokens,
    )
    from langchain_contextkit.tools import (
        DEFAULT_READ_ONLY as DEFAULT_READ_ONLY,
    )
    from langchain_contextkit.tools import (
        NoteTool as NoteTool,
    )
    from langchain_contextkit.tools import (
        TerminalTool as TerminalTool,
    )
    from langchain_contextkit.window_budget import (
        WindowBudget as WindowBudget,
    )
    from langchain_contextkit.window_budget import (
        WindowBudgetConfig as WindowBudgetConfig,
    )

_PUBLIC: dict[str, tuple[str, ...]] = {
    "agents.assembler": ("WindowAssembler",),
    "agents.ledger": ("CallLedger",),
    "agents.ledger_log": ("LedgerCallbackHandler", "LedgerWriter"),
    "agents.middleware": ("CompactionMiddleware", "ContextKitMiddleware"),
    "agents.nodes": ("CompactionGraphState", "compaction_node", "context_node", "reducer_node"),
    "agents.offload": ("OffloadConfig", "ToolResultOffloader"),
    "agents.offload_stores": ("NoteOffloadStore", "OffloadStore", "WorkspaceOffloadStore"),
    "budget": ("ContextConfig",),
    "builder.report": ("ContextReport",),
    "builder.retriever": ("BudgetedRetriever",),
    "builder.runnable": ("ContextBuilder",),
    "compaction.compactor": (
        "CompactionConfig",
        "CompactionResult",
        "HistoryCompactor",
        "RunningSummary",
    ),
    "compaction.summarizers": ("ExtractiveSummarizer", "summarizer_from_llm"),
    "config": ("ContextKitConfig",),
    "dashboard.chart": ("plot_ledger",),
    "dashboard.figures": ("LedgerDashboard", "LedgerFigures", "summarize_ledgers"),
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
        "FileNoteStore",
        "Note",
        "NoteHit",
        "NoteInfo",
        "NoteStore",
        "NoteSummary",
        "NoteType",
        "StoreNoteStore",
    ),
    "prompts": ("PromptRegistry", "with_data_boundary"),
    "quality.ablation": ("AblationCase", "AblationReport", "aablate", "ablate"),
    "quality.gate": ("QualityGate", "assert_context_quality"),
    "quality.result": ("GateCheck", "GateResult"),
    "reducers": ("REDUCERS",),
    "reducers.agent": ("reduce_agent", "reduce_agent_sync"),
    "reducers.base": ("ReducerConfig", "tokens_of"),
    "reducers.plan": ("reduce_plan", "reduce_plan_sync"),
    "reducers.reflection": ("reduce_reflection", "reduce_reflection_sync"),
    "reducers.trajectories": (
        "PlanStep",
        "PlanTrajectory",
        "ReflectionRound",
        "ReflectionTrajectory",
    ),
    "retrieval": ("RetrievalResult",),
    "sources.base": ("ContextSource", "Scope"),
    "sources.callable": ("CallableSource",),
    "sources.docs": ("DocsSource",),
    "sources.notes": ("NoteSource",),
    "sources.retriever": ("RetrieverSource",),
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
    "tools": ("DEFAULT_READ_ONLY", "NoteTool", "TerminalTool"),
    "window_budget": ("WindowBudget", "WindowBudgetConfig"),
}
"""Every public name, by the module (under `langchain_contextkit.`) that defines it."""

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
    return sorted({*globals(), *__all__})


# A library never configures logging; this keeps "No handlers could be found" away.
logging.getLogger(__name__).addHandler(logging.NullHandler())
