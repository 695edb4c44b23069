"""`TerminalTool`: a read-only shell for agents, with its lexer, policy and executor."""

from langchain_contextkit.tools.terminal.tool import (
    DEFAULT_READ_ONLY,
    SandboxMode,
    TerminalCommandError,
    TerminalTool,
)

__all__ = ["DEFAULT_READ_ONLY", "SandboxMode", "TerminalCommandError", "TerminalTool"]
