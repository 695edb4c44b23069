"""Message lists as providers accept them.

The provider rules as data, one scan that finds what a provider would reject
(`find_message_problems` / `check_messages`), `repair_messages` for one request,
whole-unit boundaries and `trim_to_budget`, which cuts only between them.
"""

from langchain_contextkit.messages.lists import (
    MessageProblem,
    MessageRepair,
    check_messages,
    find_message_problems,
    repair_messages,
    trim_to_budget,
)

__all__ = [
    "MessageProblem",
    "MessageRepair",
    "check_messages",
    "find_message_problems",
    "repair_messages",
    "trim_to_budget",
]
