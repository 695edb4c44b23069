"""Run every ```python example in the package's docstrings, offline, with fakes only."""

import contextlib
import importlib
import inspect
import io
import pkgutil
import re
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

import langchain_contextkit

_FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _docstrings(module: ModuleType) -> list[tuple[str, str]]:
    found = [(module.__name__, module.__doc__ or "")]
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            found.append((f"{module.__name__}.{name}", obj.__doc__ or ""))
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if inspect.isfunction(member) or isinstance(
                        member, (classmethod, staticmethod)
                    ):
                        doc = getattr(member, "__doc__", None) or ""
                        found.append((f"{module.__name__}.{name}.{attr}", doc))
    return found


def _examples() -> list[tuple[str, str]]:
    examples = []
    for info in pkgutil.walk_packages(langchain_contextkit.__path__, "langchain_contextkit."):
        module = importlib.import_module(info.name)
        for where, doc in _docstrings(module):
            for i, block in enumerate(_FENCE.findall(inspect.cleandoc(doc) if doc else "")):
                examples.append((f"{where}[{i}]", textwrap.dedent(block)))
    return examples


EXAMPLES = _examples()


def test_examples_were_found() -> None:
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize(("where", "code"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_docstring_example_runs(where: str, code: str) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), {"__name__": "__example__"})  # noqa: S102
    # Where an example shows its output as trailing comments, the output must match.
    expected = [
        line.strip()[2:]
        for line in code.splitlines()
        if line.strip().startswith("# ") and "print(" not in line
    ]
    shown = printed.getvalue().splitlines()
    if expected and shown and len(expected) == len(shown):
        assert shown == expected


README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.skipif(not README.is_file(), reason="README.md is not beside the tests")
def test_readme_examples_run() -> None:
    blocks = _FENCE.findall(README.read_text(encoding="utf-8"))
    assert blocks, "the README has no python example"
    for i, code in enumerate(blocks):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"README.md[{i}]", "exec"), {"__name__": "__example__"})  # noqa: S102
