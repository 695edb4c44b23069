"""The notebooks in `notebooks/` execute cleanly and show what their text promises.

Each notebook runs top to bottom in a fresh Jupyter kernel of this interpreter (so the
package and its fakes are the ones under test), offline. The kernel talks to the test
over ZeroMQ's IPC transport, i.e. unix sockets in a temporary folder: no TCP port is
opened, so the suite's `--disable-socket --allow-unix-socket` stays as it is.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CELL_TIMEOUT = 120  # seconds per cell; a whole notebook takes a few seconds
STARTUP_TIMEOUT = 60  # seconds for the kernel to answer, generous for a loaded machine
_UNIX_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes; the kernel appends "-<port>"


@pytest.fixture(scope="module", autouse=True)
def _matplotlib_font_cache() -> None:
    """Build matplotlib's font cache here, once, when it is missing.

    A kernel that has to build it logs "building the font cache" on a slow machine, and
    that line would land in notebook 02's output as stderr.
    """
    import matplotlib.font_manager  # noqa: F401 - importing it builds the cache


def _kernel_manager(workdir: Path) -> AsyncKernelManager:
    """A kernel of `sys.executable`, on IPC sockets, with every file it writes in `workdir`.

    The kernel spec is written here rather than looked up, so a `python3` spec installed
    elsewhere on the machine (another interpreter) can never be picked instead.
    """
    spec_dir = workdir / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (the test's interpreter)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    socket_prefix = workdir / "ipc"
    assert len(str(socket_prefix)) < _UNIX_SOCKET_PATH_MAX, socket_prefix
    return AsyncKernelManager(
        kernel_name="python3",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(workdir / "kernels")]),
        transport="ipc",
        ip=str(socket_prefix),
        connection_file=str(workdir / "connection.json"),
    )


def _execute(name: str, workdir: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        nb,
        km=_kernel_manager(workdir),
        timeout=CELL_TIMEOUT,
        startup_timeout=STARTUP_TIMEOUT,
        resources={"metadata": {"path": str(workdir)}},  # the kernel's working directory
    )
    # Raises CellExecutionError (with the cell and its traceback) on any error. The client
    # does not own a kernel manager it is handed, so ask it to shut the kernel down and
    # close its channels anyway.
    client.execute(cleanup_kc=True)
    return nb


def _outputs(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    return [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]


def _stdout(nb: nbformat.NotebookNode) -> str:
    return "".join(
        o["text"] for o in _outputs(nb) if o["output_type"] == "stream" and o["name"] == "stdout"
    )


def _count(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not printed:\n{text}"
    return int(match.group(1))


def _check_builder(nb: nbformat.NotebookNode) -> None:
    text = _stdout(nb)
    assert "the prompt the model received: True" in text
    assert "[Knowledge]" in text
    assert "[Current question]" in text
    assert re.search(r"^rag +\d+", text, re.MULTILINE), "the ledger table is missing"
    assert "from the chain's callbacks:" in text
    # Shrinking the window drops whole candidates, and the fake model notices the loss.
    assert "dropped for budget {'rag': 0" in text
    assert "no meal cap in my context" in text
    assert "ConfigError: The 'rag' quota is" in text


def _check_graph(nb: nbformat.NotebookNode) -> None:
    text = _stdout(nb)
    charts = [
        o for o in _outputs(nb) if o["output_type"] == "display_data" and "image/png" in o["data"]
    ]
    assert len(charts) == 1, "the ledger chart was not drawn"
    assert _count(r"model calls: (\d+)", text) >= 30
    assert _count(r"compactions: (\d+)", text) >= 3
    assert _count(r"reductions: (\d+)", text) >= 1
    assert "every request within the window: True" in text
    largest = re.search(r"largest request: (\d+) of (\d+) tokens allowed", text)
    assert largest
    assert int(largest.group(1)) <= int(largest.group(2))
    assert _count(r"messages in state: (\d+)", text) > _count(
        r"messages in the last request: (\d+)", text
    )


def _check_tools(nb: nbformat.NotebookNode) -> None:
    text = _stdout(nb)
    assert "-> terminal [error]" in text
    assert "'rm' is not available" in text
    assert "src/billing/refund.py:1:def refund(order, amount):" in text
    assert "Created note note_" in text
    assert "Updated note note_" in text
    assert "type: conclusion" in text  # the file on disk after the update


def _check_drift(nb: nbformat.NotebookNode) -> None:
    text = _stdout(nb)
    scores = [float(s) for s in re.findall(r"mean score (\d\.\d+);", text)]
    # The baseline, the smaller budget, and the saved smaller result read back by the CLI.
    assert scores[0] == 1.0
    assert scores[1] < 1.0
    assert scores[2] == scores[1]
    assert "drift against the baseline: WORSE (1 figure(s))" in text
    assert "the same policy against itself: passed" in text
    assert "assert_no_regression: 1 figure(s) worse than the baseline:" in text
    assert "drift against baseline.json: WORSE" in text
    assert "exit status 1" in text


CASES = {
    "01_builder_lcel.ipynb": _check_builder,
    "02_graph_compaction_and_reducer.ipynb": _check_graph,
    "03_notes_and_terminal_tools.ipynb": _check_tools,
    "04_evaluate_and_drift.ipynb": _check_drift,
}


def test_every_notebook_is_covered() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_notebook_is_stored_without_outputs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code
    assert all(not cell.outputs and cell.execution_count is None for cell in code)


@pytest.mark.parametrize("name", sorted(CASES))
def test_notebook_executes(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel picks its own inline (Agg-rendered) matplotlib backend only when none is
    # forced; IPython keeps its profile and history out of the user's home.
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = _execute(name, tmp_path)
    stderr = [o["text"] for o in _outputs(nb) if o.get("name") == "stderr"]
    assert not stderr, f"{name} wrote to stderr (a warning a reader would see): {stderr}"
    CASES[name](nb)
