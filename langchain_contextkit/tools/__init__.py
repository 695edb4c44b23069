"""LangChain tools for agents: each a `BaseTool` with a pydantic argument schema, sync and async."""

from langchain_contextkit.tools.notes import NoteSource, NoteTool, NoteToolError, NoteToolInput

__all__ = [
    "NoteSource",
    "NoteTool",
    "NoteToolError",
    "NoteToolInput",
]
