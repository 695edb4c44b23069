"""Reading an offload preview's pointer line as a model would: the tool and its arguments."""

from __future__ import annotations

import json
from typing import Any

POINTER = "[offloaded:"


def pointer_line(text: str) -> str:
    """The preview's pointer line."""
    return next(line for line in text.split("\n") if line.startswith(POINTER))


def pointer_call(text: str) -> tuple[str, dict[str, Any]]:
    """The reader tool and its exact arguments, parsed from a preview's pointer line."""
    line = pointer_line(text)
    name = line.split("Read the rest with the ", 1)[1].split(" tool: ", 1)[0]
    args, _ = json.JSONDecoder().raw_decode(line, line.index("{", line.index(" tool: ")))
    return name, args
