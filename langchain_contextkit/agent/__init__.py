"""The LangChain / LangGraph adapters: window assembler and ledger, middleware, graph nodes.

- [`ContextKitMiddleware`][langchain_contextkit.agent.ContextKitMiddleware]: every
  `create_agent` model call under one window ledger; `CompactionMiddleware` compacts only.
- [`WindowAssembler`][langchain_contextkit.agent.WindowAssembler]: lays out one request
  and accounts for it in a [`CallLedger`][langchain_contextkit.agent.CallLedger].
- `context_node`, `compaction_node`, `reducer_node`: the same steps as LangGraph nodes, over
  `ContextGraphState` / `CompactionGraphState`.
- `ToolResultOffloader` with an `OffloadStore` (`NoteOffloadStore`,
  `WorkspaceOffloadStore`): tool results too large for the window, kept whole elsewhere.
- `LedgerWriter` / `LedgerCallbackHandler`: the ledgers as JSON lines.
"""

from langchain_contextkit.agent.ledger import CallLedger, LedgerCallbackHandler, LedgerWriter
from langchain_contextkit.agent.middleware import CompactionMiddleware, ContextKitMiddleware
from langchain_contextkit.agent.nodes import (
    CompactionGraphState,
    ContextGraphState,
    compaction_node,
    context_node,
    reducer_node,
)
from langchain_contextkit.agent.offload_stores import (
    NoteOffloadStore,
    OffloadStore,
    WorkspaceOffloadStore,
)
from langchain_contextkit.agent.plan import WindowAssembler
from langchain_contextkit.agent.tool_results import OffloadConfig, ToolResultOffloader
from langchain_contextkit.agent.window_budget import WindowBudget, WindowBudgetConfig

__all__ = [
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
]
