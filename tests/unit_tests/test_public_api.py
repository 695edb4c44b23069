import importlib
import pkgutil

import langchain_contextkit

EXPECTED_ALL = {
    "NoteOffloadStore",
    "OffloadConfig",
    "OffloadStore",
    "ToolResultOffloader",
    "WorkspaceOffloadStore",
    "DEFAULT_IMAGE_TOKENS",
    "DEFAULT_READ_ONLY",
    "BudgetedRetriever",
    "CallableSource",
    "ContextBuilder",
    "ContextConfig",
    "ContextReport",
    "ContextSource",
    "RetrieverSource",
    "Scope",
    "TerminalTool",
    "WindowBudget",
    "WindowBudgetConfig",
    "ConfigError",
    "ContextKitError",
    "ContextWindowExceeded",
    "PromptRegistry",
    "RetrievalResult",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableError",
    "__version__",
    "count_each",
    "count_message_tokens",
    "count_tokens",
    "count_tool_tokens",
    "mmr_indices",
    "mmr_select",
    "tiktoken_counter",
    "with_data_boundary",
    # context quality: the gate and ablation (issue 20)
    "AblationCase",
    "AblationReport",
    "ContextQualityError",
    "ContextQualityWarning",
    "GateCheck",
    "GateResult",
    "QualityGate",
    "aablate",
    "ablate",
    "assert_context_quality",
    # history compaction (issue 4)
    "CompactionConfig",
    "CompactionGraphState",
    "CompactionMiddleware",
    "CompactionResult",
    "ExtractiveSummarizer",
    "HistoryCompactor",
    "InvalidMessagesError",
    "MessageProblem",
    "RunningSummary",
    "check_messages",
    "compaction_node",
    "find_message_problems",
    "summarizer_from_llm",
    "trim_to_budget",
    # every list a provider accepts; a broken one repaired in the request (issue 28)
    "MessageRepair",
    "repair_messages",
    "truncate_to_tokens",
    # one ledger per model call (issue 8)
    "CallLedger",
    "DocsSource",
    "WindowAssembler",
    "ContextKitMiddleware",
    "context_node",
    # ledgers as JSON lines (issue 20)
    "LedgerCallbackHandler",
    "LedgerDashboard",
    "LedgerFigures",
    "LedgerWriter",
    "plot_ledger",
    "summarize_ledgers",
    # trajectory reducers (issue 5)
    "ContextKitConfig",
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
    "reducer_node",
    "tokens_of",
    # notes (issue 6)
    "FileNoteStore",
    "InvalidNoteError",
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
    "StoreNoteStore",
}


def _modules() -> list[str]:
    return [
        info.name
        for info in pkgutil.walk_packages(langchain_contextkit.__path__, "langchain_contextkit.")
    ]


def test_public_api_is_pinned() -> None:
    assert set(langchain_contextkit.__all__) == EXPECTED_ALL
    for name in EXPECTED_ALL:
        assert hasattr(langchain_contextkit, name)


def test_every_module_imports_and_declares_all() -> None:
    modules = _modules()
    assert "langchain_contextkit.tokens" in modules
    for name in modules:
        module = importlib.import_module(name)
        if name.rsplit(".", 1)[-1].startswith("_"):
            continue
        exported = getattr(module, "__all__", None)
        assert exported is not None, f"{name} has no __all__"
        for symbol in exported:
            assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol}"


def test_package_ships_py_typed() -> None:
    from importlib.resources import files

    assert files("langchain_contextkit").joinpath("py.typed").is_file()


def test_type_checking_imports_match_the_export_table() -> None:
    # Issue 18: __init__.py names each public symbol once, in `_PUBLIC`; type checkers
    # cannot read a table, so its TYPE_CHECKING block repeats it as imports. Same set,
    # same modules, each re-exported (`import X as X`).
    import ast
    from pathlib import Path

    tree = ast.parse(Path(langchain_contextkit.__file__).read_text(encoding="utf-8"))
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                for alias in stmt.names:
                    assert alias.asname == alias.name, alias.name
                    assert alias.name not in imported, alias.name
                    imported[alias.name] = f"{stmt.module}"
    assert imported == langchain_contextkit._EXPORTS
    assert set(langchain_contextkit.__all__) == {*imported, "__version__"}
