"""One assembler handed down: a middleware or a node takes a built `WindowAssembler`.

Its ten options are declared (and documented) once, on `WindowAssembler`; the middleware
and `context_node` accept them as keywords too, for the short path, and refuse the two
ways at once.
"""

from __future__ import annotations

import inspect
from typing import Any

from langchain_contextkit.agents.assembler import WindowAssembler
from langchain_contextkit.errors import ConfigError

__all__ = ["handed_down"]


def handed_down(assembler: WindowAssembler | None, options: dict[str, Any]) -> WindowAssembler:
    """`assembler`, or one built from `options` (a middleware's or a node's keywords).

    Raises:
        ConfigError: When an assembler is given together with an option of its own
            (they would silently disagree), or is not a `WindowAssembler`.
    """
    given: object = assembler  # checked at run time: callers are not always typed
    if given is None:
        return WindowAssembler(**options)
    if not isinstance(given, WindowAssembler):
        msg = f"assembler takes a WindowAssembler, got {type(given).__name__}"
        raise ConfigError(msg)
    defaults = inspect.signature(WindowAssembler.__init__).parameters
    clashing = sorted(
        name
        for name, value in options.items()
        if value is not None and value != defaults[name].default
    )
    if clashing:
        msg = f"pass {', '.join(clashing)} to the WindowAssembler, not beside assembler="
        raise ConfigError(msg)
    return given
