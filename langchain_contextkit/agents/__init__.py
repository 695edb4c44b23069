"""The LangChain / LangGraph adapters: window assembler and ledger, middleware, graph nodes.

- [`ContextKitMiddleware`][langchain_contextkit.agents.ContextKitMiddleware]: every
  `create_agent` model call under one window ledger; `CompactionMiddleware` compacts only.
- [`WindowAssembler`][langchain_contextkit.agents.WindowAssembler]: lays out one request
  and accounts for it in a [`CallLedger`][langchain_contextkit.agents.CallLedger].
- `context_node`, `compaction_node`, `reducer_node`: the same steps as LangGraph nodes, over
  `ContextGraphState` / `CompactionGraphState`.
- `ToolResultOffloader` with an `OffloadStore` (`NoteOffloadStore`,
  `WorkspaceOffloadStore`): tool results too large for the window, kept whole elsewhere.
- `LedgerWriter` / `LedgerCallbackHandler`: the ledgers as JSON lines.
"""

from langchain_contextkit.agents.ledger import CallLedger, LedgerCallbackHandler, LedgerWriter
from langchain_contextkit.agents.middleware import CompactionMiddleware, ContextKitMiddleware
from langchain_contextkit.agents.nodes import (
    CompactionGraphState,
    ContextGraphState,
    compaction_node,
    context_node,
    reducer_node,
)
from langchain_contextkit.agents.offload_stores import (
    NoteOffloadStore,
    OffloadStore,
    WorkspaceOffloadStore,
)
from langchain_contextkit.agents.plan import WindowAssembler
from langchain_contextkit.agents.tool_results import OffloadConfig, ToolResultOffloader

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
    "WorkspaceOffloadStore",
    "compaction_node",
    "context_node",
    "reducer_node",
]
