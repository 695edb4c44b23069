"""Where each part of a request goes: `lay_out`, the one place that orders them.

Cache-first: `[system][recap][older turns verbatim][retrieval block][current turn]`.
Everything before the block changes only when a compaction does, so each request extends
the previous one byte for byte up to its dynamic tail and the provider's prompt cache
serves it; the block sits next to the question it was retrieved for, and the question
stays last. To place a part elsewhere, change the order in `lay_out`: the positions it
returns are what the ledger, the cache breakpoints and the checks read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

__all__ = ["Layout", "Part", "lay_out"]

Part = Literal["system", "recap", "older", "retrieval", "turn"]
"""The parts of a request, by name."""


@dataclass(frozen=True, slots=True)
class Layout:
    """A request's messages and where each part lies in them.

    Attributes:
        messages: What is sent after the request's own system message.
        spans: For each part, its ``(start, end)`` slice of `messages` (empty when the
            part is absent: ``start == end``).
    """

    messages: list[BaseMessage]
    spans: dict[Part, tuple[int, int]]

    def part(self, name: Part) -> list[BaseMessage]:
        """The messages of one part."""
        start, end = self.spans[name]
        return self.messages[start:end]

    def end(self, name: Part) -> int | None:
        """The index of a part's last message (None when the part is empty)."""
        start, end = self.spans[name]
        return end - 1 if end > start else None


def lay_out(
    *,
    system: Sequence[BaseMessage],
    recap: BaseMessage | None,
    older: Sequence[BaseMessage],
    retrieval: BaseMessage | None,
    turn: Sequence[BaseMessage],
) -> Layout:
    """Order a request's parts, cache-first, and say where each one lies.

    Args:
        system: System messages that lead the conversation (the request's own system
            message is sent apart and is not among them).
        recap: The recap of the compacted history, when there is one.
        older: The older turns kept verbatim.
        retrieval: The retrieval block, when one was built.
        turn: The current turn: the user's last message and the agent's work on it.

    Returns:
        The messages and each part's span.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage

        from langchain_contextkit.agent.layout import lay_out

        layout = lay_out(
            system=[],
            recap=HumanMessage("[Recap] The user ordered 3 boxes."),
            older=[HumanMessage("Ship them Monday."), AIMessage("Done.")],
            retrieval=HumanMessage("[Knowledge] Shipping takes 2 days."),
            turn=[HumanMessage("When do they arrive?")],
        )
        print(layout.spans["older"], layout.part("turn")[0].text)
        # (1, 3) When do they arrive?
        ```
    """
    order: tuple[tuple[Part, Sequence[BaseMessage]], ...] = (
        ("system", system),
        ("recap", () if recap is None else (recap,)),
        ("older", older),
        ("retrieval", () if retrieval is None else (retrieval,)),
        ("turn", turn),
    )
    messages: list[BaseMessage] = []
    spans: dict[Part, tuple[int, int]] = {}
    for name, part in order:
        spans[name] = (len(messages), len(messages) + len(part))
        messages.extend(part)
    return Layout(messages, spans)
