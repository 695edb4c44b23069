"""A realistic workspace with traps around it, shared by the terminal tests.

```
<base>/outside/secret.txt      the canary: its token must never reach the model
<base>/ws/                     the workspace root (a small shop project)
    escape_link -> ../outside/secret.txt, escape_abs -> <base>/outside/secret.txt,
    escape_dir -> ../outside, etc_link -> /etc, fifo (a named pipe),
    data/big.bin (2 GB, sparse), lists/ (file-name lists naming the canary),
    trap_opt/ (a file named like an option), trap_link/-n (a symlink out)
```
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from langchain_contextkit.tools.terminal._exec import find_bwrap, sandbox_works

_PAY = '''"""Card payments."""

from shop.money import round_cents


def charge(amount, currency="EUR"):
    # TODO: rounding bug for JPY (no minor unit)
    return round_cents(amount * 100) / 100


def refund(payment_id):
    raise NotImplementedError(payment_id)
'''


@dataclass(frozen=True)
class World:
    base: Path
    root: Path
    outside: Path
    secret: str


def build_world(base: Path) -> World:
    outside = base / "outside"
    root = base / "ws"
    outside.mkdir()
    root.mkdir()
    secret = f"CANARY-{uuid.uuid4().hex}"
    (outside / "secret.txt").write_text(f"{secret}\n")
    files = {
        "README.md": "# Shop\n\nA tiny shop. See docs/guide.md.\n",
        "pyproject.toml": '[project]\nname = "shop"\nversion = "0.1.0"\n',
        "src/shop/__init__.py": '"""Shop."""\n',
        "src/shop/money.py": "def round_cents(x):\n    return round(x)\n",
        "src/shop/cart.py": "class Cart:\n    def total(self):\n        return 0\n",
        "src/shop/payments/__init__.py": "",
        "src/shop/payments/pay.py": _PAY,
        "tests/test_pay.py": "from shop.payments.pay import charge\n\n\ndef test_charge():\n"
        "    assert charge(1) == 1\n",
        "docs/guide.md": "".join(f"Guide line {i}\n" for i in range(1, 201)),
        "data/app.log": "".join(
            f"2024-01-{1 + i % 28:02d} {'ERROR' if i % 50 == 0 else 'INFO'} event {i}\n"
            for i in range(5000)
        ),
        "lists/names0": "../outside/secret.txt\0",
        "lists/names.txt": "../outside/secret.txt\n",
        "lists/inside0": "README.md\0",
        "trap_opt/names0": "../../outside/secret.txt\0",
        "trap_opt/--files0-from=names0": "",
        "trap_opt/a.txt": "a\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    with (root / "data" / "big.bin").open("wb") as handle:
        handle.truncate(2 << 30)  # sparse: 2 GB of zeros, no disk used
    (root / "escape_link").symlink_to("../outside/secret.txt")
    (root / "escape_abs").symlink_to(outside / "secret.txt")
    (root / "escape_dir").symlink_to("../outside")
    (root / "etc_link").symlink_to("/etc")
    (root / "trap_link").mkdir()
    (root / "trap_link" / "-n").symlink_to("../../outside/secret.txt")
    os.mkfifo(root / "fifo")
    return World(base, root, outside, secret)


def snapshot(world: World) -> dict[str, tuple[int, int]]:
    """Every path under base with its size and mtime (symlinks not followed)."""
    seen = {}
    for directory, dirs, files in os.walk(world.base):
        for name in dirs + files:
            info = (Path(directory) / name).lstat()
            seen[f"{directory}/{name}"] = (info.st_size, info.st_mtime_ns)
    return seen


def processes_in(path: Path) -> list[int]:
    """Pids (other than ours) whose working directory or command line mentions `path`."""
    mine = os.getpid()
    found = []
    needle = str(path)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == mine:
            continue
        try:
            cwd = str((entry / "cwd").readlink())
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if cwd.startswith(needle) or needle in cmdline:
            found.append(int(entry.name))
    return found


BWRAP = find_bwrap()
BWRAP_WORKS = BWRAP is not None and sandbox_works(BWRAP)
BWRAP_SKIP = (
    "bubblewrap is not installed"
    if BWRAP is None
    else "bubblewrap cannot create its namespaces here (user namespaces disabled?)"
)
MODES = [
    pytest.param("none", id="policy-only"),
    pytest.param(
        "bwrap",
        id="bwrap",
        marks=pytest.mark.skipif(not BWRAP_WORKS, reason=BWRAP_SKIP),
    ),
]
HAS_TREE = shutil.which("tree", path="/usr/local/bin:/usr/bin:/bin") is not None
HAS_GAWK = shutil.which("gawk", path="/usr/local/bin:/usr/bin:/bin") is not None
