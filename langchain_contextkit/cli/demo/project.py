"""The demo's sample project: copy it out of the package into a workspace.

The project (``langchain_contextkit/cli/demo/demo_project``) is package data: a fictional
service's README, architecture, runbook, on-call guide, decisions and a postmortem, a
few hundred lines of markdown with facts worth remembering. The demo copies it to a
workspace that the agent explores with `TerminalTool` and retrieves from with
`DocsSource`.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable
    from pathlib import Path

__all__ = ["copy_project"]

_PACKAGE_DIR = "demo_project"


def copy_project(target: Path) -> list[str]:
    """Copy the bundled sample project into `target` (created); return its files.

    Reads through `importlib.resources`, so it works from a wheel, a source tree or a zip.
    """
    files: list[str] = []
    _copy_tree(resources.files("langchain_contextkit.cli.demo") / _PACKAGE_DIR, target, "", files)
    return sorted(files)


def _copy_tree(source: Traversable, target: Path, prefix: str, files: list[str]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir(), key=lambda item: item.name):
        if entry.name.startswith((".", "__")):
            continue
        if entry.is_dir():
            _copy_tree(entry, target / entry.name, f"{prefix}{entry.name}/", files)
        else:
            (target / entry.name).write_bytes(entry.read_bytes())
            files.append(f"{prefix}{entry.name}")
