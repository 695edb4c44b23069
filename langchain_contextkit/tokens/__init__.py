"""Token counting, the layer everything else measures with.

`count_tokens` (a zero-dependency estimate for every script), the tiktoken
counters, message and tool costs, and the content-keyed cache of counts. A leaf:
it imports nothing of the library but its errors.
"""

from langchain_contextkit.tokens.count import (
    DEFAULT_IMAGE_TOKENS,
    TiktokenCounter,
    TokenCounter,
    count_each,
    count_message_tokens,
    count_tokens,
    count_tool_tokens,
    tiktoken_counter,
    truncate_to_tokens,
)

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "TiktokenCounter",
    "TokenCounter",
    "count_each",
    "count_message_tokens",
    "count_tokens",
    "count_tool_tokens",
    "tiktoken_counter",
    "truncate_to_tokens",
]
