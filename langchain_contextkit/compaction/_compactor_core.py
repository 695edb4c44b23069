"""The state every part of `HistoryCompactor` reads, and how a recap sits in a view.

`HistoryCompactor` is layered: this core (its settings and the recap message's layout),
`_plan` (where to cut), `_recap_chain` (the summariser requests, epoch by epoch) and
`_recap_commit` (holding a recap to its cap and the window, and committing it). Each
layer is a base class of the next, so the compactor's methods stay methods of one object
whose state is set once, in `HistoryCompactor.__init__`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit.compaction.recap import RECAP_ID_PREFIX, ViewParts, is_recap
from langchain_contextkit.messages import split_system
from langchain_contextkit.tokens import (
    REPLY_PRIMING,
    TokenCounter,
    count_message_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel

    from langchain_contextkit.compaction._history_index import HistoryArrays, HistoryIndex
    from langchain_contextkit.compaction._recap_memo import NewestKnown, RecapMemo
    from langchain_contextkit.compaction.config import CompactionConfig
    from langchain_contextkit.compaction.summarizers import (
        ExtractiveSummarizer,
        LLMSummarizer,
    )
    from langchain_contextkit.prompts import Fidelity, PromptRegistry


class CompactorCore:
    """Settings and recap layout shared by the compactor's layers (set by its `__init__`)."""

    config: CompactionConfig
    prompts: PromptRegistry
    llm: BaseChatModel | None
    token_counter: TokenCounter
    require_human_first: bool
    fallback: bool
    extractive: ExtractiveSummarizer
    summarizer_window: int | None
    _llm_summarizer: LLMSummarizer | None
    _recaps: RecapMemo
    _newest_known: NewestKnown
    _floors: RecapMemo
    _index: HistoryIndex
    _last_recap: BaseMessage | None = None  # the recap message shown last (`_recap`)
    _heading_count: tuple[str, int] | None = None  # `_heading_tokens`, for its heading

    @property
    def keep_recent(self) -> int:
        """Recent turns kept verbatim, at least."""
        return self.config.keep_recent

    @property
    def trigger_tokens(self) -> int:
        """A standalone compaction fires above this many tokens (2000 unless stated)."""
        return self.config.standalone_trigger_tokens

    @property
    def max_summary_tokens(self) -> int:
        """Hard cap of the recap."""
        return self.config.max_summary_tokens

    @property
    def sized_by_window(self) -> bool:
        """True when `trigger_tokens` was left at None: an agent sizes it by its window."""
        return self.config.sized_by_window

    @property
    def fidelity(self) -> Fidelity:
        """The recap's fidelity tier (it may step down to fit a call's cap)."""
        return self.config.fidelity

    @property
    def target_tokens(self) -> int:
        """What a compaction aims for (hysteresis)."""
        target = self.config.target_tokens
        return self.trigger_tokens // 2 if target is None else target

    def _tokens(self, messages: Sequence[BaseMessage], overhead: int) -> int:
        return (
            count_message_tokens(messages, self.token_counter) + overhead if messages else overhead
        )

    def _parts_tokens(self, parts: ViewParts, overhead: int) -> int:
        """`_tokens` of the view, the kept tail priced from the index when it is known."""
        if parts.kept_tokens is None:
            return self._tokens(parts.messages, overhead)
        head = [*parts.system, *(() if parts.recap is None else (parts.recap,))]
        if not head and not parts.kept:
            return overhead
        counted = count_message_tokens(head, self.token_counter, reply_priming=False)
        return counted + parts.kept_tokens + REPLY_PRIMING + overhead

    def _recap(self, text: str, covered: int, *, as_human: bool) -> BaseMessage:
        content = f"{self.prompts.heading('recap')} {text}"
        recap_id = f"{RECAP_ID_PREFIX}{covered}"
        # Between compactions every call shows the same recap: the same object again, so the
        # memos by object know its count and digest (a new one was counted afresh each call).
        last = self._last_recap
        if (
            last is not None
            and last.id == recap_id
            and isinstance(last, HumanMessage) == as_human
            and last.content == content  # (also sees a copy edited in place downstream)
        ):
            return last
        recap = (
            HumanMessage(content, id=recap_id) if as_human else SystemMessage(content, id=recap_id)
        )
        self._last_recap = recap
        return recap

    def _heading_tokens(self) -> int:
        """Tokens of the recap's heading as a message of its own (a share of the recap's room)."""
        heading = self.prompts.heading("recap")
        known = self._heading_count
        if known is None or known[0] != heading:
            tokens = count_message_tokens(
                [SystemMessage(heading)], self.token_counter, reply_priming=False
            )
            known = self._heading_count = (heading, tokens)
        return known[1]

    def _recap_as_human(self, tail: Sequence[BaseMessage]) -> bool:
        return self.require_human_first and not (tail and isinstance(tail[0], HumanMessage))

    def _parts(
        self,
        system: list[BaseMessage],
        text: str | None,
        covered: int,
        tail: list[BaseMessage],
        known: tuple[HistoryArrays, int] | None = None,
    ) -> ViewParts:
        """The view's parts; `known`: the history's arrays and where `tail` starts in them."""
        recap = (
            None
            if text is None
            else self._recap(text, covered, as_human=self._recap_as_human(tail))
        )
        if known is None:
            return ViewParts(tuple(system), recap, tuple(tail))
        arrays, start = known
        return ViewParts(
            tuple(system), recap, tuple(tail), arrays.cost(start), arrays.clean_from(start)
        )

    def _split_recap(
        self, history: Sequence[BaseMessage]
    ) -> tuple[list[BaseMessage], list[BaseMessage], str | None]:
        """System prefix, the rest, and the text of a recap found in `history` (if any)."""
        system, rest = split_system(history)
        previous: str | None = None
        kept_system: list[BaseMessage] = []
        for message in system:
            if is_recap(message):
                previous = self._recap_text(message)
            else:
                kept_system.append(message)
        if rest and is_recap(rest[0]):
            previous = self._recap_text(rest[0])
            rest = rest[1:]
        return kept_system, rest, previous

    def _recap_text(self, message: BaseMessage) -> str:
        heading = f"{self.prompts.heading('recap')} "
        text = message.text
        return text.removeprefix(heading)
