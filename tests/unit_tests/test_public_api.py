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
    # evaluation over cases, and drift against a baseline (issue 33)
    "CaseDelta",
    "CaseResult",
    "Drift",
    "EvalCase",
    "EvalResult",
    "FigureDelta",
    "JudgeScore",
    "aevaluate",
    "compare_ledgers",
    "evaluate",
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
    # every layer's __all__ is re-exported at the root (issue 31)
    "ComponentScore",
    "ContextGraphState",
    "DEFAULT_MAX_CONTENT_CHARS",
    "DEFAULT_MAX_NOTES",
    "DEFAULT_NAMESPACE",
    "DEFAULT_RECENT",
    "DEFAULT_SEARCH_LIMIT",
    "Fact",
    "NOTE_TYPES",
    "NoteToolError",
    "NoteToolInput",
    "check_note_id",
    "new_note_id",
}

# Folders that are not layers of the library: test doubles and the command line. They keep
# their own `__all__` but the root does not re-export them.
NOT_REEXPORTED = {"langchain_contextkit.testing", "langchain_contextkit.cli"}


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
    assert "langchain_contextkit.tokens.count" in modules
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
    # Type checkers cannot read `_PUBLIC`; the TYPE_CHECKING block imports each of its
    # modules: `*` when that module's `__all__` is the entry, else the entry's names.
    import ast
    from pathlib import Path

    tree = ast.parse(Path(langchain_contextkit.__file__).read_text(encoding="utf-8"))
    imported: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                assert all(alias.asname in {None, alias.name} for alias in stmt.names)
                module = f"{stmt.module}".removeprefix("langchain_contextkit.")
                names = {alias.name for alias in stmt.names}
                if names == {"*"}:
                    names = set(importlib.import_module(f"{stmt.module}").__all__)
                imported[module] = names
    table = langchain_contextkit._PUBLIC
    assert imported == {module: set(names) for module, names in table.items()}


def _layers() -> list[str]:
    """Every subpackage directly under the root that is a layer of the library."""
    return sorted(
        f"langchain_contextkit.{info.name}"
        for info in pkgutil.iter_modules(langchain_contextkit.__path__)
        if info.ispkg and f"langchain_contextkit.{info.name}" not in NOT_REEXPORTED
    )


def test_the_layers_are_the_folders_design_md_names() -> None:
    short = {name.rsplit(".", 1)[-1] for name in _layers()}
    assert {"agent", "compaction", "messages", "notes", "reducers", "retrieval", "tokens"} <= short


def test_dir_is_all_and_nothing_else() -> None:
    # Load some layers first: a loaded subpackage becomes a module attribute, and the
    # imports `__init__.py` needs (`Any`, `TYPE_CHECKING`, `annotations`) are globals too.
    importlib.import_module("langchain_contextkit.compaction")
    importlib.import_module("langchain_contextkit.agent")
    _ = langchain_contextkit.HistoryCompactor
    shown = dir(langchain_contextkit)
    assert shown == sorted(langchain_contextkit.__all__)
    assert [name for name in shown if name.startswith("_")] == ["__version__"]
    for leaked in ("Any", "TYPE_CHECKING", "annotations", "importlib", "logging", "compaction"):
        assert leaked not in shown


def test_each_layer_exports_its_public_names() -> None:
    for layer in _layers():
        module = importlib.import_module(layer)
        exported = getattr(module, "__all__", None)
        assert exported, f"{layer} re-exports nothing"
        assert len(set(exported)) == len(exported), layer
        namespace: dict[str, object] = {}
        exec(f"from {layer} import *", namespace)  # noqa: S102 - a fixed, trusted module name
        assert set(exported) <= set(namespace), layer
        assert not [name for name in exported if name.startswith("_")], layer


def test_a_layer_name_imports_from_its_folder() -> None:
    from langchain_contextkit.agent import ContextGraphState, ContextKitMiddleware
    from langchain_contextkit.compaction import HistoryCompactor
    from langchain_contextkit.reducers import reduce_agent
    from langchain_contextkit.retrieval.builder import ContextBuilder
    from langchain_contextkit.retrieval.sources import CallableSource

    assert HistoryCompactor is langchain_contextkit.HistoryCompactor
    assert ContextKitMiddleware is langchain_contextkit.ContextKitMiddleware
    assert ContextGraphState is langchain_contextkit.ContextGraphState
    assert ContextBuilder is langchain_contextkit.ContextBuilder
    assert CallableSource is langchain_contextkit.CallableSource
    assert reduce_agent is langchain_contextkit.reduce_agent


def test_root_reexports_equal_the_layers() -> None:
    table = langchain_contextkit._PUBLIC
    for layer in _layers():
        short = layer.removeprefix("langchain_contextkit.")
        module = importlib.import_module(layer)
        assert set(table.get(short, ())) == set(module.__all__), short
        for name in module.__all__:
            assert getattr(langchain_contextkit, name) is getattr(module, name), name
    # The other entries are core modules at the root, never a module inside a layer.
    layers = {layer.removeprefix("langchain_contextkit.") for layer in _layers()}
    for key in table:
        assert "." not in key, key
        assert key in layers or not hasattr(
            importlib.import_module(f"langchain_contextkit.{key}"), "__path__"
        ), key


def test_api_docstrings_carry_no_history() -> None:
    # Issue numbers and size apologies belong in git, not in what `help()` shows.
    import inspect
    import re

    history = re.compile(r"Over \d+ lines on purpose|\b[Ii]ssues? #?\d+|\w #\d{3,}\b")
    for name in _modules():
        module = importlib.import_module(name)
        docs = [(name, module.__doc__ or "")]
        for attr, value in vars(module).items():
            if getattr(value, "__module__", None) == name and (
                inspect.isclass(value) or inspect.isfunction(value)
            ):
                docs.append((f"{name}.{attr}", inspect.getdoc(value) or ""))
                if inspect.isclass(value):
                    docs += [
                        (f"{name}.{attr}.{member}", inspect.getdoc(item) or "")
                        for member, item in vars(value).items()
                        if inspect.isfunction(item)
                    ]
        for where, doc in docs:
            assert not history.search(doc), f"{where}: {history.search(doc)}"
