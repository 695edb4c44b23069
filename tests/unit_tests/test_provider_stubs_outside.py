"""The HTTP provider stand-ins are test infrastructure: in `tests/`, not in the wheel.

The wheel ships the folder `langchain_contextkit` (pyproject's hatch `packages`), so a stub
is out of the wheel when no file of that folder is one and none imports the test tree.
`langchain_contextkit.testing` keeps the public test double, `ScriptedChatModel`. The
stubs' own docstring examples run here, since the package's docstring test no longer
reaches them.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import pkgutil
import re
import sys
import textwrap
from pathlib import Path

import provider_stubs
import pytest

import langchain_contextkit
import langchain_contextkit.testing

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(langchain_contextkit.__file__).resolve().parent
STUBS = Path(provider_stubs.__file__).resolve().parent
MOVED = (
    "openai_stub",
    "anthropic_stub",
    "converse_stub",
    "_http_stub",
    "_openai_rules",
    "_openai_usage",
    "_encodings",
    "_script",
)
_FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_the_wheel_ships_the_package_folder_alone() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [
        "langchain_contextkit"
    ]
    assert PACKAGE == ROOT / "langchain_contextkit"
    assert STUBS == ROOT / "tests" / "provider_stubs"


@pytest.mark.parametrize("name", MOVED)
def test_no_stub_module_is_in_the_package(name: str) -> None:
    assert importlib.util.find_spec(f"langchain_contextkit.testing.{name}") is None
    assert not list(PACKAGE.rglob(f"{name}.py"))
    assert (STUBS / f"{name}.py").is_file()


def test_the_package_never_imports_the_test_tree() -> None:
    importers = [
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "provider_stubs" in path.read_text(encoding="utf-8")
    ]
    assert importers == []


def test_testing_keeps_the_scripted_model() -> None:
    testing = langchain_contextkit.testing
    assert testing.__all__ == ["ScriptedChatModel", "ScriptedLLM"]
    assert testing.ScriptedLLM is testing.ScriptedChatModel


def test_the_stubs_import_from_the_test_tree() -> None:
    from provider_stubs.anthropic_stub import AnthropicStub
    from provider_stubs.openai_stub import OpenAIStub

    for stub in (OpenAIStub, AnthropicStub):
        assert Path(inspect.getfile(stub)).resolve().parent == STUBS


def _examples() -> list[tuple[str, str]]:
    found = []
    for info in pkgutil.iter_modules(provider_stubs.__path__, "provider_stubs."):
        module = importlib.import_module(info.name)
        docs = [(info.name, module.__doc__ or "")]
        for name, value in vars(module).items():
            if getattr(value, "__module__", None) == info.name and inspect.isclass(value):
                docs.append((f"{info.name}.{name}", inspect.getdoc(value) or ""))
        for where, doc in docs:
            found += [
                (f"{where}[{i}]", textwrap.dedent(block))
                for i, block in enumerate(_FENCE.findall(inspect.cleandoc(doc)))
            ]
    return found


EXAMPLES = _examples()


def test_the_stubs_have_examples() -> None:
    assert {where.split("[")[0].split(".")[1] for where, _ in EXAMPLES} >= {
        "openai_stub",
        "anthropic_stub",
        "converse_stub",
    }


@pytest.mark.parametrize(("where", "code"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_stub_docstring_example_prints_what_it_shows(where: str, code: str) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), {"__name__": "__example__"})  # noqa: S102
    shown = [line.strip()[2:] for line in code.splitlines() if line.strip().startswith("# ")]
    assert printed.getvalue().splitlines() == shown
