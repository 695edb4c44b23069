r"""Large tool results offloaded: stored whole, shown as head + tail + a pointer.

One tool result can take more of the window than the whole conversation around it (a man
page, a log, a search over a repository). `ToolResultOffloader` stores such a result whole
and shows the model, in the request only, its first and last lines with one line between
them that says exactly which tool call reads the rest (progressive disclosure: the model
loads what it needs, when it needs it). The history in the agent's state is never
rewritten.

The two stores, behind the small `OffloadStore` protocol, are in
`langchain_contextkit.agents.offload_stores`: `NoteOffloadStore` (any `NoteStore`; over a
shared LangGraph `BaseStore` every process reads it back; the pointer is a `NoteTool`
read) and `WorkspaceOffloadStore` (a folder inside a `TerminalTool`'s root; the pointer
is a `tail | head` command its default whitelist allows, reading one page of lines).

Everything the request shows is a function of the message alone (its tool call id, tool
name and content digest) and of the window's ledger: a caller that re-sends the whole list
each turn gets the same request, byte for byte, as one with a checkpointer.

```python
import tempfile

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_contextkit.agents.offload import OffloadConfig, ToolResultOffloader
from langchain_contextkit.agents.offload_stores import WorkspaceOffloadStore

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

# String paths throughout, as os.path.realpath returns them:

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, ToolMessage

from langchain_contextkit._validate import check_count
from langchain_contextkit.agents._preview import preview_span, render_preview
from langchain_contextkit.agents.offload_stores import OffloadStore, offload_key
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.tokens import TokenCounter, count_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.agents.ledger import CallLedger

__all__ = [
    "DEFAULT_OFFLOAD_MIN_TOKENS",
    "DEFAULT_OFFLOAD_SHARE",
    "DEFAULT_PREVIEW_TOKENS",
    "STORE_OFFLOAD_MIN_TOKENS",
    "OffloadConfig",
    "OffloadOutcome",
    "ToolResultOffloader",
    "offloader_for",
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

        from langchain_contextkit.agents.offload import OffloadConfig
        from langchain_contextkit.agents.offload_stores import WorkspaceOffloadStore

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
        line = (
            f"[offloaded: {hidden.end - hidden.start} of {len(text)} characters not shown "
            f"(lines {hidden.first_line}-{hidden.last_line} of {hidden.lines}); the whole "
            f"result is saved. Read the rest with the {self.config.store.reader} tool: "
            f"{self.config.store.pointer(job.key, text, hidden)}]"
        )
        shown = render_preview(text, hidden, line)
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
