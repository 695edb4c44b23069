"""Confine paths to the workspace root: resolution, glob expansion, file-type checks.

Every path a command will open is resolved as the kernel will (following every symlink)
and refused unless it lands inside the root; nothing relies on file permissions. A swap
between the check and the command's open cannot come from the model (nothing allowed
writes), and the bubblewrap sandbox closes it for everyone else.
"""

# String paths throughout, as os.path.realpath returns them:
# ruff: noqa: PTH116, PTH118, PTH206

from __future__ import annotations

import glob
import os
import stat
from itertools import islice

from langchain_contextkit.tools.terminal._lex import Refusal, Word

__all__ = ["MAX_GLOB_MATCHES", "MAX_NAME_LIST_BYTES", "Workspace"]

MAX_GLOB_MATCHES = 5_000
"""Most paths one glob may expand to; more is refused (narrow the pattern instead)."""

MAX_NAME_LIST_BYTES = 1 << 20
"""Largest file-name list (`--files0-from`, `file -f`) the tool will vet name by name."""

# Kernel views of processes and devices: a path into them is refused even where it would
# resolve elsewhere (/proc/self/cwd, /proc/self/root and /dev/fd/N resolve per process).
_VIRTUAL = ("/proc", "/sys", "/dev")


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


class Workspace:
    """The root directory every path must stay inside."""

    __slots__ = ("_virtual", "root")

    def __init__(self, root: str) -> None:
        """Remember the root (an existing directory) as its real path."""
        self.root = os.path.realpath(root)
        # A root inside /dev (say /dev/shm) must not forbid itself.
        self._virtual = tuple(v for v in _VIRTUAL if not _within(self.root, v))

    def contains(self, path: str) -> bool:
        """Tell whether the real path `path` is the root or inside it."""
        return _within(path, self.root)

    def relative(self, path: str) -> str:
        """`path` (inside the root) relative to the root, `.` for the root itself."""
        return os.path.relpath(path, self.root)

    def resolve(self, text: str, cwd: str) -> str:
        """The real path of `text` from `cwd`; `Refusal` if it lands outside the root."""
        joined = os.path.join(cwd, text)
        lexical = os.path.normpath(joined)
        if any(_within(lexical, v) for v in self._virtual):
            msg = f"'{text}' is in a system directory ({lexical.split(os.sep)[1]}); "
            raise Refusal(msg + "only files inside the workspace can be used.")
        resolved = os.path.realpath(joined)
        if not self.contains(resolved):
            where = self.relative(cwd)
            msg = (
                f"'{text}' is outside the workspace (it resolves above the workspace root, "
                f"or through a symlink that leaves it). You are in '{where}'; use paths "
                "inside the workspace."
            )
            raise Refusal(msg)
        return resolved

    def check_input(self, resolved: str, text: str) -> None:
        """Refuse an input that would block or never end (FIFO, device, socket).

        A missing file is left to the command, which says so itself.
        """
        try:
            mode = os.stat(resolved).st_mode
        except OSError:
            return
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else None
        msg = (
            f"'{text}' is {kind or 'a device file'}; only regular files and directories "
            "can be read."
        )
        raise Refusal(msg)

    def expand(self, word: Word, cwd: str) -> list[str]:
        """The paths a word stands for: its glob matches inside the root, or the word itself.

        As a shell: matches sorted, hidden names only for a leading dot, no match passed on
        literally. A match starting with `-` gets `./`, so it is never read as an option.
        """
        if word.pattern is None:
            return [word.text]
        matches = list(
            islice(glob.iglob(word.pattern, root_dir=cwd), MAX_GLOB_MATCHES + 1)  # noqa: PTH207 - needs root_dir
        )
        if len(matches) > MAX_GLOB_MATCHES:
            msg = f"'{word.text}' matches more than {MAX_GLOB_MATCHES} paths; narrow the pattern."
            raise Refusal(msg)
        if not matches:
            return [word.text]
        matches.sort()
        for match in matches:
            if not self.contains(os.path.realpath(os.path.join(cwd, match))):
                msg = (
                    f"The glob '{word.text}' reaches outside the workspace; globs are "
                    "confined to it."
                )
                raise Refusal(msg)
        return [f"./{m}" if m.startswith("-") else m for m in matches]

    def check_name_list(self, text: str, cwd: str, separator: str) -> None:
        """Vet a file that lists file names (`--files0-from`, `file -f`) name by name.

        The command opens every name in it, so each must resolve inside the root. Names
        from standard input (`-`) are refused: they would come from the previous stage.
        """
        if text == "-":
            msg = (
                "Reading file names from standard input is not accepted; name the files "
                "as arguments."
            )
            raise Refusal(msg)
        resolved = self.resolve(text, cwd)
        self.check_input(resolved, text)
        try:
            with open(resolved, "rb") as handle:  # noqa: PTH123 - a bounded raw read
                data = handle.read(MAX_NAME_LIST_BYTES + 1)
        except OSError:
            return  # missing or unreadable: the command reports it
        if len(data) > MAX_NAME_LIST_BYTES:
            msg = f"The name list '{text}' is larger than {MAX_NAME_LIST_BYTES} bytes."
            raise Refusal(msg)
        # Names are taken byte for byte as the command takes them (no stripping: "x " and
        # "x" are different files, and only one of them may be a symlink out).
        for name in data.decode("utf-8", "surrogateescape").split(separator):
            if name:
                self.check_input(self.resolve(name, cwd), name)
