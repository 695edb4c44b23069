r"""Fit the current turn into its room: cut its largest tool results to head + tail.

The current turn (the latest human message and the agent's work on it) is what the model
needs to go on, so it is never refused while the user's message fits. When the turn
outgrows the room the window leaves it and reducing its tool loop (`reduce_agent`) is not
enough, `ResultCutter` shows its largest tool results as head + tail with one marker line
that says how much was left out and how to read it: the whole result is saved first when
a store is at hand (an `OffloadStore`: the marker is then a pointer the store's reader
follows), else the marker says the whole result stays in the conversation's history.

The cut is water-filling: every result keeps up to one common size, the largest lose the
most, the small ones nothing. Parallel calls keep every result (each call still has its
answer), the history in state is never touched, and the view is a function of the turn
and the room alone, so a caller that re-sends the whole list gets the same request.

```python
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_contextkit.agents.result_cutter import ResultCutter

calls = [{"name": "fetch", "args": {"page": n}, "id": f"c{n}"} for n in range(3)]
turn = [HumanMessage("Compare the three pages."), AIMessage("", tool_calls=calls)]
turn += [
    ToolMessage("\n".join(f"page {n} line {i}" for i in range(400)), tool_call_id=f"c{n}")
    for n in range(3)
]
fit = ResultCutter().cut(turn, 1_500)
assert fit is not None and fit.cut == 3 and len(fit.messages) == len(turn)
print(fit.tokens <= 1_500, fit.messages[2].text.splitlines()[0])
# True page 0 line 0
```
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, ToolMessage

from langchain_contextkit.agents._preview import preview_span, render_preview
from langchain_contextkit.agents.offload_stores import HiddenSpan, OffloadStore, offload_key
from langchain_contextkit.tokens import (
    TokenCounter,
    count_message_tokens,
    count_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CutTurn", "ResultCutter"]

logger = logging.getLogger(__name__)

_ROUNDS = 16
"""Times the common size is lowered when the rendered previews still run over (each
step is the excess, or twice the step before when that was not enough)."""

_STORED_MEMO = 256
"""Keys a cutter remembers having saved (a result is written once per process)."""


@dataclass(frozen=True, slots=True)
class CutTurn:
    """A turn with some tool results shown as head + tail.

    Attributes:
        messages: The turn as the request shows it (same length, same order).
        tokens: Its tokens (message overheads included, no reply priming; 0 from `cap`,
            which does not measure the whole list).
        cut: Tool results shown as previews.
        cut_tokens: Tokens the previews left out.
        stored: Of those, results saved whole to the store (the marker points there).
    """

    messages: list[BaseMessage]
    tokens: int
    cut: int = 0
    cut_tokens: int = 0
    stored: int = 0


class ResultCutter:
    """Cut a turn's largest tool results until the turn fits (see the module).

    Args:
        token_counter: The ledger's counter.
        store: Where a cut result is saved whole first (None: the marker says the whole
            result is in the history).
    """

    def __init__(
        self, token_counter: TokenCounter = count_tokens, store: OffloadStore | None = None
    ) -> None:
        """Configure the cutter."""
        self.counter = token_counter
        self.store = store
        self._lock = threading.Lock()
        self._stored: OrderedDict[str, None] = OrderedDict()

    def cut(self, turn: Sequence[BaseMessage], target: int | None) -> CutTurn | None:
        """`turn` within `target` tokens, or None when even one-line markers do not fit.

        A `target` of None cuts every result to its marker line (None only when the turn
        has no tool result to cut). Only the results actually cut are saved to the store.
        """
        plan = self._plan(turn, target)
        if not isinstance(plan, _Cuts):
            return plan
        fit = self._fit(plan, self._assumed(plan))
        if fit is None or self.store is None:
            return None if fit is None else fit[0]
        cut = {r.key: r.text for r in fit[1] if r.key is not None}
        saved = {key for key, text in cut.items() if self._save(key, text)}
        return self._settled(plan, fit, saved)

    async def acut(self, turn: Sequence[BaseMessage], target: int | None) -> CutTurn | None:
        """Async `cut` (the store's `asave`)."""
        plan = self._plan(turn, target)
        if not isinstance(plan, _Cuts):
            return plan
        fit = self._fit(plan, self._assumed(plan))
        if fit is None or self.store is None:
            return None if fit is None else fit[0]
        cut = {r.key: r.text for r in fit[1] if r.key is not None}
        saved = {key for key, text in cut.items() if await self._asave(key, text)}
        return self._settled(plan, fit, saved)

    def cap(self, messages: Sequence[BaseMessage], *, threshold: int, size: int) -> CutTurn:
        """Every tool result over `threshold` tokens shown as a `size`-token preview.

        For the history before the current turn: a result the window could never show
        whole is summarised (or carried) as what the model saw of it, not re-read in full
        on every compaction. The preview depends on the message alone, so every call
        shows the same text.
        """
        view = list(messages)
        cut = left_out = 0
        min_chars = threshold // 8  # no counter gives 8+ tokens a character
        for index, message in enumerate(view):
            text = message.content
            if not isinstance(message, ToolMessage) or not isinstance(text, str):
                continue
            if len(text) <= min_chars or (tokens := self.counter(text)) <= threshold:
                continue
            result = _Result(index, text, tokens, _key(message))
            stored = result.key is not None and self._save(result.key, text)
            shown = message.model_copy(
                update={"content": self._preview(result, size, stored=stored)}
            )
            view[index] = shown
            cut += 1
            left_out += max(0, tokens - self.counter(shown.text))
        return CutTurn(view, 0, cut, left_out)

    # -- planning --------------------------------------------------------------------------

    def _plan(self, turn: Sequence[BaseMessage], target: int | None) -> CutTurn | _Cuts | None:
        """The turn as is when it fits, the results to cut when not, None when none can be."""
        total = sum(self._cost(message) for message in turn)
        if target is not None and total <= target:
            return CutTurn(list(turn), total)
        results = [
            _Result(index, message.content, self.counter(message.content), _key(message))
            for index, message in enumerate(turn)
            if isinstance(message, ToolMessage)
            and isinstance(message.content, str)
            and message.content
        ]
        return _Cuts(list(turn), target, total, results) if results else None

    def _assumed(self, plan: _Cuts) -> set[str]:
        """The keys whose markers are drawn as pointers before any save is made."""
        if self.store is None:
            return set()
        return {r.key for r in plan.results if r.key is not None}

    def _settled(
        self, plan: _Cuts, fit: tuple[CutTurn, list[_Result]], saved: set[str]
    ) -> CutTurn | None:
        """The fit drawn with pointers, or drawn again without those whose save failed."""
        if all(r.key is None or r.key in saved for r in fit[1]):
            return fit[0]
        again = self._fit(plan, saved)
        return None if again is None else again[0]

    def _fit(self, plan: _Cuts, saved: set[str]) -> tuple[CutTurn, list[_Result]] | None:
        """Lower one common size until the turn with its previews fits; and what was cut.

        A result whose key is in `saved` is drawn with a pointer to the store.
        """
        turn, cuts = plan.turn, plan.results
        if plan.target is None:  # every result to its marker line, whatever that comes to
            size, target = -1, sys.maxsize
        else:
            target = plan.target
            size = _common_size(sorted((c.tokens for c in cuts), reverse=True), plan.total - target)
        step = 0
        for _ in range(_ROUNDS):
            view = list(turn)
            cut: list[_Result] = []
            left_out = 0
            for result in cuts:
                if result.tokens <= size:
                    continue  # small enough: shown whole
                shown = self._preview(result, max(0, size), stored=result.key in saved)
                view[result.index] = turn[result.index].model_copy(update={"content": shown})
                cut.append(result)
                left_out += max(0, result.tokens - self.counter(shown))
            tokens = sum(self._cost(message) for message in view)
            if tokens <= target:
                stored = sum(1 for c in cut if c.key in saved)
                logger.info(
                    "%d tool result(s) cut to head + tail so the turn fits (%d tokens left out)",
                    len(cut),
                    left_out,
                )
                return CutTurn(view, tokens, len(cut), left_out, stored), cut
            if size <= 0:
                return None
            # Previews shrink by whole lines: a step smaller than a line may change
            # nothing, so a step that did not suffice is doubled.
            step = max(tokens - target, 2 * step)
            size = max(0, size - step)
        return None

    def _preview(self, result: _Result, budget: int, *, stored: bool) -> str:
        text = result.text
        hidden = preview_span(text, budget, self.counter) if budget else _all_hidden(text)
        shown = f"{hidden.end - hidden.start} of {len(text)} characters not shown"
        where = f"lines {hidden.first_line}-{hidden.last_line} of {hidden.lines}"
        if stored and self.store is not None and result.key is not None:
            pointer = self.store.pointer(result.key, text, hidden)
            reader = self.store.reader
            how = f"the whole result is saved. Read the rest with the {reader} tool: {pointer}"
        else:
            how = (
                "the whole result stays in the conversation's history. Ask the tool again "
                "for the part you need"
            )
        marker = f"[cut to fit the window: {shown} ({where}); {how}]"
        return render_preview(text, hidden, marker)

    def _cost(self, message: BaseMessage) -> int:
        return count_message_tokens([message], self.counter, reply_priming=False)

    # -- the store -------------------------------------------------------------------------

    def _save(self, key: str, text: str) -> bool:
        if self.store is None:
            return False
        if key in self._stored:
            return True
        try:
            self.store.save(key, text)
        except Exception as error:  # noqa: BLE001 - the preview still goes out, unstored
            logger.warning("could not save cut tool result %s (%s)", key, error)
            return False
        self._remember(key)
        return True

    async def _asave(self, key: str, text: str) -> bool:
        if self.store is None:
            return False
        if key in self._stored:
            return True
        try:
            await self.store.asave(key, text)
        except Exception as error:  # noqa: BLE001 - the preview still goes out, unstored
            logger.warning("could not save cut tool result %s (%s)", key, error)
            return False
        self._remember(key)
        return True

    def _remember(self, key: str) -> None:
        with self._lock:
            self._stored[key] = None
            self._stored.move_to_end(key)
            while len(self._stored) > _STORED_MEMO:
                self._stored.popitem(last=False)


@dataclass(frozen=True, slots=True)
class _Cuts:
    """A turn over its target, and the tool results that may be cut."""

    turn: list[BaseMessage]
    target: int | None
    total: int
    results: list[_Result]


@dataclass(frozen=True, slots=True)
class _Result:
    index: int
    text: str
    tokens: int
    key: str | None


def _key(message: ToolMessage) -> str | None:
    """The store key of a result (None when its text cannot be stored as UTF-8)."""
    try:
        return offload_key(message, message.content if isinstance(message.content, str) else "")
    except UnicodeEncodeError:
        return None


def _common_size(sizes: list[int], over: int) -> int:
    """The largest size S such that cutting every result above S down to S frees `over`.

    `sizes` is in descending order. Each preview also carries a marker line, which the
    rounds of `_fit` pay for by lowering S again.
    """
    freed_at = 0
    for count, size in enumerate(sizes, 1):
        following = sizes[count] if count < len(sizes) else 0
        # Lowering S from `size` to `following` frees `count` tokens per step.
        step = (size - following) * count
        if freed_at + step >= over:
            return size - -(-(over - freed_at) // count)
        freed_at += step
    return 0


def _all_hidden(text: str) -> HiddenSpan:
    lines = text.count("\n") + (not text.endswith("\n"))
    return HiddenSpan(0, len(text), 1, max(1, lines), lines)
