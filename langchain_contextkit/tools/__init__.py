"""LangChain tools for agents: each a `BaseTool` with a pydantic argument schema, sync and async."""

from langchain_contextkit.tools.notes import NoteTool, NoteToolError, NoteToolInput
from langchain_contextkit.tools.terminal import DEFAULT_READ_ONLY, TerminalTool

__all__ = [
    "DEFAULT_READ_ONLY",
    "NoteTool",
    "NoteToolError",
    "NoteToolInput",
    "TerminalTool",
]
