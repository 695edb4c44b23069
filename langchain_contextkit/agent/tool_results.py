r"""Tool results too large for the window: one module shows less of them, one way.

A tool result can take more of the window than the conversation around it (a man page, a
log, a search over a repository). Each way of showing less of it keeps whole lines of its
head and tail (`preview_span`) and puts one marker line between them (`preview_marker`)
that says how much was left out and how to read it:

- `ToolResultOffloader` stores results over a share of the room whole (an `OffloadStore`)
  and the marker is a pointer its reader tool follows (progressive disclosure);
- `ResultCutter` cuts the current turn's largest results until the turn fits its room
  (water-filling: every result keeps up to one common size), saving them first when a
  store is at hand; `ResultCutter.cap` shows a history result the window could never
  show whole as the preview the turn that fetched it showed.

The history in state is never rewritten, and what a request shows is a function of the
message and the window's ledger alone: a caller that re-sends the whole list each turn
gets the same request, byte for byte, as one with a checkpointer.

```python
import tempfile

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_contextkit.agent.tool_results import OffloadConfig, ToolResultOffloader
from langchain_contextkit.agent.offload_stores import WorkspaceOffloadStore

with tempfile.TemporaryDirectory() as root:
    store = WorkspaceOffloadStore(root)
    offloader = ToolResultOffloader(OffloadConfig(store=store))
    big = "\n".join(f"line {n}: " + "noise " * 8 for n in range(1, 401))
    call = {"name": "terminal", "args": {"command": "cat big.log"}, "id": "call_1"}
    messages = [
        HumanMessage("Read the log."),
        AIMessage("", tool_calls=[call]),
        ToolMessage(big, tool_call_id="call_1", name="terminal"),
    ]
    outcome = offloader.offload(messages, room=20_000, tools=["terminal"])
    shown = outcome.messages[-1].text
    print(outcome.count, len(shown) < len(big), messages[-1].text == big)
    pointer = next(line for line in shown.splitlines() if line.startswith("[offloaded"))
    print(pointer[:57])
    print(pointer[pointer.index("{") :].split(" |")[0])
# 1 True True
# [offloaded: 22214 of 23491 characters not shown (lines 12
# {"command": "tail -n +12 .contextkit/tool_results/terminal-call_1-a8da9e908dfc298a.txt
```
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_contextkit.agent.offload_stores import HiddenSpan, OffloadStore, offload_key
from langchain_contextkit.errors import ConfigError, check_count
from langchain_contextkit.tokens.count import TokenCounter, count_message_tokens, count_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.agent.ledger import CallLedger

__all__ = [
    "DEFAULT_OFFLOAD_MIN_TOKENS",
    "DEFAULT_OFFLOAD_SHARE",
    "DEFAULT_PREVIEW_TOKENS",
    "STORE_OFFLOAD_MIN_TOKENS",
    "CutTurn",
    "OffloadConfig",
    "OffloadOutcome",
    "ResultCutter",
    "ToolResultOffloader",
    "offloader_for",
    "preview_marker",
    "preview_span",
    "with_offload_tally",
]

logger = logging.getLogger(__name__)


DEFAULT_OFFLOAD_SHARE = 0.1
"""A result over this share of the trajectory budget is offloaded.

deepagents offloads over 20,000 tokens, a tenth of a 200k window; a tenth of the room the
conversation has keeps that proportion on every window, so a tool loop of several large
steps still fits before compaction or reduction has to step in."""

DEFAULT_OFFLOAD_MIN_TOKENS = 1_000
"""The threshold never goes below this: under ~1,000 tokens (a screenful or two) a result
costs less to show than the extra call that would read it back, so a small window does
not turn every result into a pointer."""

STORE_OFFLOAD_MIN_TOKENS = 20_000
"""With no `offload=` but a store at hand (the agent's LangGraph store), results over
this many tokens (about deepagents' 80,000 characters), or a tenth of the trajectory
budget when that is more, are offloaded to it: on by default, for results no window
should carry whole."""

DEFAULT_PREVIEW_TOKENS = 400
"""Head plus tail shown of an offloaded result (at most a quarter of the threshold)."""

_MEMO_SIZE = 256  # entries per memo; each may hold a large result alive


# -- the policy --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class OffloadConfig:
    """When a tool result is offloaded, where to, and how much of it stays in view.

    The threshold is ``max(min_tokens, share * trajectory budget)``: a share, so it
    scales with the window, and a floor, so a small window does not offload every result.
    The trajectory budget is the uncalibrated one, so a threshold (and every pointer)
    stays put while the calibration learns.

    Example:
        ```python
        import tempfile

        from langchain_contextkit.agent.tool_results import OffloadConfig
        from langchain_contextkit.agent.offload_stores import WorkspaceOffloadStore

        with tempfile.TemporaryDirectory() as root:
            config = OffloadConfig(store=WorkspaceOffloadStore(root))
            print(config.threshold(3_000), config.threshold(120_000))
        # 1000 12000
        ```
    """

    store: OffloadStore
    """Where results go, and which tool reads them back."""
    share: float = DEFAULT_OFFLOAD_SHARE
    """Share of the trajectory budget a result may take before it is offloaded."""
    min_tokens: int = DEFAULT_OFFLOAD_MIN_TOKENS
    """The threshold's floor, in tokens."""
    preview_tokens: int = DEFAULT_PREVIEW_TOKENS
    """Head plus tail shown (at most a quarter of the threshold), in tokens."""
    require_reader: bool = True
    """Offload only when the store's reader tool is bound to the model (else the pointer
    could not be followed, and the result is kept whole)."""

    def __post_init__(self) -> None:
        """Check the knobs.

        Raises:
            ConfigError: When `store` is not an `OffloadStore`, `share` is not in (0, 1],
                or a token count is not a positive integer.
        """
        store: object = self.store  # checked at run time: callers are not always typed
        if not isinstance(store, OffloadStore):
            msg = (
                f"store must be an OffloadStore (NoteOffloadStore, WorkspaceOffloadStore), "
                f"got {type(store).__name__}"
            )
            raise ConfigError(msg)
        if isinstance(self.share, bool) or not 0 < self.share <= 1:
            msg = f"share must be in (0, 1], got {self.share!r}"
            raise ConfigError(msg)
        check_count("min_tokens", self.min_tokens, minimum=1)
        check_count("preview_tokens", self.preview_tokens, minimum=1)

    def threshold(self, room: int) -> int:
        """Tokens a result may have before it is offloaded, for a trajectory budget `room`."""
        return max(self.min_tokens, int(self.share * room))


@dataclass(frozen=True, slots=True)
class OffloadOutcome:
    """The request's messages with large results replaced, and what that did."""

    messages: list[BaseMessage]
    """The view: the same list when nothing was offloaded."""
    count: int = 0
    """Results shown as head + tail + pointer."""
    saved: int = 0
    """Tokens the previews saved (the results' minus the previews')."""
    failed: int = 0
    """Results kept whole because the store refused them (logged as warnings)."""


@dataclass(frozen=True, slots=True)
class _Job:
    index: int
    key: str
    text: str
    tokens: int


class ToolResultOffloader:
    """Replace large tool results by head + tail + pointer in a request (see the module).

    Remembers the keys already stored (a bounded memo), so a result is written once per
    process.
    """

    def __init__(
        self, config: OffloadConfig, *, token_counter: TokenCounter = count_tokens
    ) -> None:
        """Configure the offloader.

        Args:
            config: The policy and the store.
            token_counter: Counts a result's tokens (the ledger's counter).
        """
        self.config = config
        self.counter = token_counter
        self._lock = threading.Lock()
        self._stored: OrderedDict[str, None] = OrderedDict()

    # -- planning (pure) -------------------------------------------------------------------

    def _plan(self, messages: Sequence[BaseMessage], room: int, tools: Sequence[Any]) -> list[_Job]:
        config = self.config
        if config.require_reader and config.store.reader not in _tool_names(tools):
            return []
        threshold = config.threshold(room)
        reads = _reads(messages, config.store)
        jobs = []
        for index, message in enumerate(messages):
            if not isinstance(message, ToolMessage) or message.tool_call_id in reads:
                continue
            text = message.content
            if not isinstance(text, str):
                # Blocks (images, files, text parts): their order and kinds are the
                # provider's format; rewriting some of them is not worth the risk.
                logger.debug("tool result %s has list content: not offloaded", index)
                continue
            if len(text) <= threshold // 8:  # no counter gives 8+ tokens a character
                continue
            tokens = self.counter(text)
            if tokens <= threshold:
                continue
            try:
                key = offload_key(message, text)
            except UnicodeEncodeError:
                logger.warning("tool result %s is not valid Unicode: kept whole", index)
                continue
            jobs.append(_Job(index, key, text, tokens))
        return jobs

    def _preview(self, job: _Job, message: BaseMessage, room: int) -> tuple[BaseMessage, int]:
        """The view of `message` and its tokens (a function of the message and the room)."""
        budget = min(self.config.preview_tokens, self.config.threshold(room) // 4)
        shown, tokens = self._render(job, budget)
        return message.model_copy(update={"content": shown}), tokens

    def _render(self, job: _Job, budget: int) -> tuple[str, int]:
        text = job.text
        hidden = preview_span(text, budget, self.counter)
        shown = preview_marker("offloaded", text, hidden, self.config.store, job.key)
        return shown, self.counter(shown)

    def _view(
        self, messages: Sequence[BaseMessage], jobs: list[_Job], done: set[str], room: int
    ) -> OffloadOutcome:
        view = list(messages)
        count = saved = 0
        for job in jobs:
            if job.key not in done:
                continue
            view[job.index], tokens = self._preview(job, messages[job.index], room)
            count += 1
            saved += max(0, job.tokens - tokens)
        failed = len(jobs) - count
        if not count:
            return OffloadOutcome(list(messages), 0, 0, failed)
        return OffloadOutcome(view, count, saved, failed)

    def _stored_already(self, key: str) -> bool:
        return key in self._stored

    def _mark_stored(self, key: str) -> None:
        with self._lock:
            _remember(self._stored, key, None)

    # -- the entry points ------------------------------------------------------------------

    def offload(
        self, messages: Sequence[BaseMessage], *, room: int, tools: Sequence[Any] = ()
    ) -> OffloadOutcome:
        """The request's view of `messages` with every large tool result offloaded.

        Args:
            messages: The conversation (never changed).
            room: The trajectory budget the threshold is a share of.
            tools: The tools bound to the model (their names, to find the reader).

        Returns:
            The view and the tally; a result whose write failed stays whole.
        """
        jobs = self._plan(messages, room, tools)
        done: set[str] = set()
        for job in jobs:
            if self._stored_already(job.key):
                done.add(job.key)
                continue
            try:
                self.config.store.save(job.key, job.text)
            except Exception as error:  # noqa: BLE001 - never lose data: keep it whole
                _log_failure(job, error)
                continue
            self._mark_stored(job.key)
            done.add(job.key)
        return self._view(messages, jobs, done, room)

    async def aoffload(
        self, messages: Sequence[BaseMessage], *, room: int, tools: Sequence[Any] = ()
    ) -> OffloadOutcome:
        """Async `offload` (the store's `asave`)."""
        jobs = self._plan(messages, room, tools)
        done: set[str] = set()
        for job in jobs:
            if self._stored_already(job.key):
                done.add(job.key)
                continue
            try:
                await self.config.store.asave(job.key, job.text)
            except Exception as error:  # noqa: BLE001 - never lose data: keep it whole
                _log_failure(job, error)
                continue
            self._mark_stored(job.key)
            done.add(job.key)
        return self._view(messages, jobs, done, room)


def _log_failure(job: _Job, error: Exception) -> None:
    logger.warning(
        "could not offload tool result %s (%s: %s); it stays whole in the request",
        job.key,
        type(error).__name__,
        error,
    )


def _remember(memo: OrderedDict[Any, Any], key: object, value: object) -> None:
    memo[key] = value
    memo.move_to_end(key)
    while len(memo) > _MEMO_SIZE:
        memo.popitem(last=False)


def _tool_names(tools: Sequence[Any]) -> set[str]:
    names = set()
    for tool in tools:
        if isinstance(tool, str):
            names.add(tool)
        elif isinstance(tool, dict):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            if isinstance(name, str):
                names.add(name)
        elif isinstance(getattr(tool, "name", None), str):
            names.add(tool.name)
    return names


def _reads(messages: Sequence[BaseMessage], store: OffloadStore) -> set[str]:
    """Ids of the tool calls that read an offloaded result: never offloaded again."""
    ids = set()
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == store.reader and call["id"] and store.reads(call["args"]):
                    ids.add(call["id"])
    return ids


def with_offload_tally(ledger: CallLedger, outcome: OffloadOutcome | None) -> CallLedger:
    """`ledger` with the outcome's tally (unchanged when nothing was offloaded or failed)."""
    if outcome is None or not (outcome.count or outcome.failed):
        return ledger
    return dataclasses.replace(
        ledger,
        offloaded=outcome.count,
        offloaded_tokens=outcome.saved,
        offload_failed=outcome.failed,
    )


def offloader_for(
    offload: OffloadConfig | OffloadStore | None, counter: TokenCounter
) -> ToolResultOffloader | None:
    """The offloader of the `offload=` argument (None when off)."""
    given: object = offload  # checked at run time: callers are not always typed
    if given is None:
        return None
    if isinstance(given, OffloadStore):
        given = OffloadConfig(store=given)
    if not isinstance(given, OffloadConfig):
        msg = (
            f"offload takes an OffloadConfig or an OffloadStore, got {type(given).__name__}: "
            "for example offload=WorkspaceOffloadStore.for_terminal(terminal_tool)"
        )
        raise ConfigError(msg)
    return ToolResultOffloader(given, token_counter=counter)


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
        store = self.store if stored else None
        return preview_marker("cut to fit the window", text, hidden, store, result.key)

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


def preview_span(text: str, budget: int, counter: TokenCounter) -> HiddenSpan:
    """The part of `text` not shown when `budget` tokens go to its head and tail (half each)."""
    head = _head_end(text, budget // 2, counter)
    tail = max(head, _tail_start(text, budget - budget // 2, counter))
    first = text.count("\n", 0, head) + 1
    last = text.count("\n", 0, max(head, tail - 1)) + 1
    lines = text.count("\n") + (not text.endswith("\n"))
    return HiddenSpan(head, tail, first, last, lines)


def preview_marker(
    why: str, text: str, hidden: HiddenSpan, store: OffloadStore | None, key: str | None
) -> str:
    """`text` with its hidden span replaced by the one marker line every preview carries.

    The marker says why (``"offloaded"``, ``"cut to fit the window"``), how much is not
    shown and where, and how to read it: a pointer the store's reader tool follows when the
    whole result was saved there (`store` and `key` given), else that it stays in the
    conversation's history.
    """
    if store is not None and key is not None:
        pointer = store.pointer(key, text, hidden)
        how = f"the whole result is saved. Read the rest with the {store.reader} tool: {pointer}"
    else:
        how = (
            "the whole result stays in the conversation's history. Ask the tool again for "
            "the part you need"
        )
    marker = (
        f"[{why}: {hidden.end - hidden.start} of {len(text)} characters not shown "
        f"(lines {hidden.first_line}-{hidden.last_line} of {hidden.lines}); {how}]"
    )
    head = text[: hidden.start]
    newline = "" if not head or head.endswith("\n") else "\n"
    return f"{head}{newline}{marker}\n{text[hidden.end :]}"


def _head_end(text: str, budget: int, counter: TokenCounter) -> int:
    """End of the longest run of whole lines from the start within `budget` tokens."""
    end = 0
    used = 0
    while end < len(text):
        stop = text.find("\n", end)
        stop = len(text) if stop < 0 else stop + 1
        cost = counter(text[end:stop])
        if used + cost > budget:
            break
        used += cost
        end = stop
    if end == 0:  # one long first line: cut it by characters
        end = _chars_within(text, budget, counter, from_end=False)
    return end


def _tail_start(text: str, budget: int, counter: TokenCounter) -> int:
    """Start of the longest run of whole lines at the end within `budget` tokens."""
    start = len(text)
    used = 0
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        cost = counter(text[prev:start])
        if used + cost > budget:
            break
        used += cost
        start = prev
    if start == len(text):
        start = len(text) - _chars_within(text, budget, counter, from_end=True)
    return start


def _chars_within(text: str, budget: int, counter: TokenCounter, *, from_end: bool) -> int:
    """Characters from one end of `text` that fit `budget` tokens (binary search)."""
    low, high = 0, min(len(text), budget * 8)
    while low < high:
        middle = (low + high + 1) // 2
        piece = text[-middle:] if from_end else text[:middle]
        if counter(piece) <= budget:
            low = middle
        else:
            high = middle - 1
    return low
