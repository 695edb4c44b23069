"""Imports point one way: a module imports from its own layer and the layers below only.

DESIGN.md's target layout, checked on the source with `ast`: every import of the package in
every module, wherever it stands. A lazy import inside a function hides a dependency, it
does not remove it, and a `TYPE_CHECKING` import is a dependency of the types: both count.
When one points up, move the code it needs down to the layer that owns it (or the importer
up); a new exception goes in `EXCEPTIONS` with the reason and the issue that removes it.
"""

import ast
from pathlib import Path

import langchain_contextkit

PACKAGE = Path(langchain_contextkit.__file__).parent
NAME = PACKAGE.name

# Lowest first. `config` gathers every layer's configuration and nothing below reads it;
# `tools` (notes and terminal tools) needs only `notes`, and the agent path's offload store
# hands results to a `TerminalTool`; `testing` is the scripted chat model the command line's
# demo runs on; the root `__init__` (the public face) sits on top of everything.
LAYERS = (
    "_version",
    "errors",
    "prompts",
    "tokens",
    "messages",
    "notes",
    "retrieval",
    "compaction",
    "reducers",
    "tools",
    "agent",
    "config",
    "quality",
    "dashboard",
    "testing",
    "cli",
    "__init__",
)
RANK = {layer: i for i, layer in enumerate(LAYERS)}

# What the package root holds besides the layer folders: the public face, the error tree,
# the configuration and the prompts.
ROOT_FILES = {"__init__.py", "_version.py", "config.py", "errors.py", "prompts.py", "py.typed"}

# (importing module, imported module) -> why it may point up for now. Keep it empty.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str:
    """`pkg.retrieval.builder.runnable` -> `retrieval`; the package itself -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_root_entry(name: str) -> bool:
    return (PACKAGE / f"{name}.py").is_file() or (PACKAGE / name / "__init__.py").is_file()


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every package module `path` imports, with its line: top level, lazy, TYPE_CHECKING."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == NAME]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == NAME:
                # `from pkg import x`: the submodule x if there is one, else the root's face.
                found += [
                    (f"{NAME}.{a.name}" if _is_root_entry(a.name) else NAME, node.lineno)
                    for a in node.names
                ]
            elif node.module.split(".")[0] == NAME:
                found.append((node.module, node.lineno))
    return found


def _edges() -> list[tuple[str, str, int]]:
    return [
        (_module(path), imported, line)
        for path in sorted(PACKAGE.rglob("*.py"))
        for imported, line in _imports(path)
    ]


def test_every_module_has_a_layer() -> None:
    modules = {_module(path) for path in PACKAGE.rglob("*.py")}
    missing = sorted(m for m in modules if _layer(m) not in RANK)
    assert not missing, f"modules in no layer (add their folder to LAYERS): {missing}"


def test_imports_point_down() -> None:
    upward = [
        f"{module} ({_layer(module)}) imports {imported} ({_layer(imported)}), line {line}"
        for module, imported, line in _edges()
        if RANK.get(_layer(imported), -1) > RANK.get(_layer(module), len(RANK))
        and (module, imported) not in EXCEPTIONS
    ]
    assert not upward, "imports that point to a higher layer:\n" + "\n".join(upward)


def test_every_exception_is_still_needed() -> None:
    edges = {(module, imported) for module, imported, _ in _edges()}
    stale = sorted(set(EXCEPTIONS) - edges)
    assert not stale, f"exceptions no import needs any more: {stale}"


def test_the_root_holds_the_public_face_and_the_layers_only() -> None:
    entries = [p for p in PACKAGE.iterdir() if p.name != "__pycache__"]
    files = sorted(p.name for p in entries if p.is_file())
    folders = sorted(p.name for p in entries if p.is_dir())
    assert set(files) <= ROOT_FILES, f"files at the root: {sorted(set(files) - ROOT_FILES)}"
    strangers = [f for f in folders if f not in RANK or not (PACKAGE / f / "__init__.py").is_file()]
    assert not strangers, f"folders at the root that are not layers: {strangers}"
