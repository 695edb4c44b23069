"""Summaries of texts longer than the summariser's window: map over chunks, then reduce.

A summariser request is its instruction plus the text it summarises, fenced as data; it
must fit the summariser's own window. When the text (an earlier recap plus the aged
messages) does not fit one request, the messages are packed into chunks that do, each
chunk is summarised on its own (map), and the partial summaries, the earlier recap first,
are merged in groups that fit until one recap is left (reduce). Every request is within
the limit, so a long thread never sends the summariser a request it must reject.

One generator (`summary_requests`) decides every request; `run_sync` and `run_async`
only answer them (the async twin runs a batch concurrently).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from langchain_contextkit.compaction.summarizers import compose_extension, reduce_recap
from langchain_contextkit.tokens.count import count_each, truncate_to_tokens

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Generator, Sequence

    from langchain_contextkit.prompts import Fidelity, PromptRegistry
    from langchain_contextkit.tokens.count import TokenCounter

    Request = tuple[str, str]
    """`(text, instruction)`: one summariser call."""

    Requests = Generator[list[Request], list[str], str]

__all__ = [
    "fitted_requests",
    "pack_chunks",
    "run_async",
    "run_sync",
    "stated_cap",
    "summary_requests",
]

_MAY_FIT = 1.25
"""A text whose parts sum to more than this times the limit is not counted whole: the
estimate of a joined text stays within a few percent of its parts' sum."""

_MAX_CONCURRENCY = 4
"""Chunk summaries in flight at once (async): enough to overlap, few enough for rate limits."""


def pack_chunks(
    blocks: Sequence[str],
    limit: int,
    counter: TokenCounter,
    costs: Sequence[int] | None = None,
) -> list[str]:
    """Join consecutive blocks into chunks of at most `limit` tokens each.

    A block that is longer than `limit` on its own is cut into pieces that fit. `costs`
    are the blocks' own tokens when the caller has them (each block is counted once).
    """
    if limit < 1:
        msg = f"the summariser's limit must be at least 1 token, got {limit}"
        raise ValueError(msg)
    if costs is None:
        costs = count_each(blocks, counter)
    pieces: list[tuple[str, int]] = []
    for block, block_cost in zip(blocks, costs, strict=True):
        rest, cost = block, block_cost
        while cost > limit:
            head = truncate_to_tokens(rest, limit, counter).removesuffix("…").rstrip()
            if not head or len(head) >= len(rest):
                head = rest[: max(1, len(rest) // 2)]
            pieces.append((head, counter(head)))
            rest = rest[len(head) :].lstrip()
            cost = counter(rest)
        if rest:
            pieces.append((rest, cost))
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for piece, cost in pieces:
        joined = cost + 1  # the line break that joins it
        if current and used + joined > limit:
            chunks.append("\n".join(current))
            current, used = [], 0
        current.append(piece)
        used += joined
    if current:
        chunks.append("\n".join(current))
    return chunks


def summary_requests(
    blocks: Sequence[str],
    previous: str | None,
    *,
    limit: int,
    cap: int,
    prompts: PromptRegistry,
    counter: TokenCounter,
    fidelity: Fidelity = "medium",
    cap_scale: float = 1.0,
) -> Requests:
    """Yield batches of summariser requests; receive their answers; return the recap.

    Args:
        blocks: The aged messages, rendered one block each (`render_transcript`).
        previous: The recap in force, extended by this summary (None for a first one).
        limit: Tokens the text of one request may take.
        cap: Tokens each summary may take (partials over it are reduced by score).
        prompts: The instructions.
        counter: Token counter.
        fidelity: What each summary keeps (written into the instructions).
        cap_scale: The summariser's tokens per `counter` token: the instructions state
            the cap in its tokens (`cap * cap_scale`, rounded down).
    """
    stated = stated_cap(cap, cap_scale)
    costs = count_each(blocks, counter)  # in one batch, and once: the chunks reuse them
    # The joined text is built and counted only when its parts' sum says it may fit: a
    # long history is far over the limit, and joining it would copy it all once more.
    near = sum(costs) + len(costs) + (counter(previous) if previous else 0)
    whole = None
    if near <= limit * _MAY_FIT:
        transcript = "\n".join(blocks)
        whole = transcript if previous is None else compose_extension(previous, transcript)
    if whole is not None and counter(whole) <= limit:
        instruction = (
            prompts.summary_instruction(max_tokens=stated, fidelity=fidelity)
            if previous is None
            else prompts.extend_instruction(max_tokens=stated, fidelity=fidelity)
        )
        return (yield [(whole, instruction)])[0]
    chunks = pack_chunks(blocks, limit, counter, costs)
    first = prompts.summary_instruction(max_tokens=stated, fidelity=fidelity)
    answers = yield [(chunk, first) for chunk in chunks]
    items = [
        *([previous] if previous else []),
        *(_capped(a, cap, counter, prompts) for a in answers),
    ]
    while len(items) > 1:
        groups = _groups(items, limit, counter)
        merged = yield [
            (_merge_text(group), prompts.extend_instruction(max_tokens=stated, fidelity=fidelity))
            for group in groups
            if len(group) > 1
        ]
        answered = iter(merged)
        items = [
            group[0] if len(group) == 1 else _capped(next(answered), cap, counter, prompts)
            for group in groups
        ]
    return items[0]


SAFETY = 0.1
"""Share of the summariser's window kept free for the estimator's error."""


def fitted_requests(
    blocks: Sequence[str],
    previous: str | None,
    *,
    window: int | None,
    cap: int,
    prompts: PromptRegistry,
    counter: TokenCounter,
    fidelity: Fidelity = "medium",
    cap_scale: float = 1.0,
) -> Requests:
    """`summary_requests` sized for a summariser whose window is `window` tokens.

    The instruction, its data fence, the summary it writes and a tenth of the window for
    the estimate's error come off first; what is left is the text one request may carry.
    A merge request holds two summaries and answers with one, so each summary gets at
    most a quarter of it. Without a window, one request carries everything, as written.
    """
    if window is None:
        limit = 10**12
    else:
        usable = int(window * (1 - SAFETY))
        instruction = prompts.extend_instruction(max_tokens=cap, fidelity=fidelity)
        framing = counter(prompts.with_data_boundary(instruction, "")) + 16
        cap = max(1, min(cap, (usable - framing) // 4))
        limit = usable - framing - cap
    return summary_requests(
        blocks,
        previous,
        limit=max(1, limit),
        cap=cap,
        prompts=prompts,
        counter=counter,
        fidelity=fidelity,
        cap_scale=cap_scale,
    )


def stated_cap(cap: int, cap_scale: float) -> int:
    """The cap as an instruction states it: `cap` tokens of ours in the summariser's."""
    return max(1, int(cap * cap_scale))


def _capped(answer: str, cap: int, counter: TokenCounter, prompts: PromptRegistry) -> str:
    text = answer.strip()
    if not text:
        msg = "the summariser returned no text for a chunk"
        raise ValueError(msg)
    return reduce_recap(text, cap, prompts=prompts, counter=counter)


def _groups(items: Sequence[str], limit: int, counter: TokenCounter) -> list[list[str]]:
    """Consecutive items merged per request, as many as fit the limit together.

    Raises:
        ValueError: When no two items fit one request (the cap is too large for the
            limit): merging could then never finish.
    """
    groups: list[list[str]] = []
    current: list[str] = []
    for item in items:
        trial = [*current, item]
        if len(trial) == 1 or counter(_merge_text(trial)) <= limit:
            current = trial
        else:
            groups.append(current)
            current = [item]
    groups.append(current)
    if all(len(group) == 1 for group in groups):
        msg = f"no two summaries fit one request of {limit} tokens"
        raise ValueError(msg)
    return groups


def _merge_text(group: Sequence[str]) -> str:
    return compose_extension(group[0], "\n\n".join(group[1:]))


def run_sync(requests: Requests, summarize: Callable[[str, str], str]) -> str:
    """Answer every request in turn; the final recap."""
    batch = next(requests)  # the generator always asks at least once
    while True:
        # Outside the `try`: a summariser's own StopIteration must not end the plan.
        answers = [summarize(text, instruction) for text, instruction in batch]
        try:
            batch = requests.send(answers)
        except StopIteration as stop:
            return cast("str", stop.value)


async def run_async(requests: Requests, asummarize: Callable[[str, str], Awaitable[str]]) -> str:
    """Answer each batch concurrently (a few at a time); the final recap."""
    gate = asyncio.Semaphore(_MAX_CONCURRENCY)

    async def one(text: str, instruction: str) -> str:
        async with gate:
            return await asummarize(text, instruction)

    batch = next(requests)
    while True:
        answers = await asyncio.gather(*(one(text, instr) for text, instr in batch))
        try:
            batch = requests.send(list(answers))
        except StopIteration as stop:
            return cast("str", stop.value)
