"""Recognise a provider's "context length exceeded" refusal, and read its figures.

langchain-core's `ContextOverflowError` is what langchain-openai, langchain-anthropic
and langchain-google-genai raise for it; other clients raise their own errors with a
message that says so. The figures (the window, and how many tokens the request took)
are read from the message when it gives them, in the wordings providers use:

- OpenAI: "maximum context length is 4000 tokens. However, you requested 4290 tokens
  (3778 in the messages, 512 in the completion)" or "your messages resulted in 4100
  tokens";
- Anthropic: "prompt is too long: 210000 tokens > 200000 maximum";
- Gemini and others: "input token count (1048600) exceeds the maximum number of tokens
  allowed (1048576)".

Also what a retry after such a refusal gives up (`retry_shrink`), and the error when
the retry is refused too (`refused_twice`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.exceptions import ContextOverflowError

from langchain_contextkit.errors import ContextWindowExceeded

if TYPE_CHECKING:
    from langchain_contextkit.agent.ledger import CallLedger
    from langchain_contextkit.agent.window_budget import Calibration

__all__ = ["Overflow", "overflow_of", "refused_twice", "retry_shrink"]

_SAYS_OVERFLOW = re.compile(
    r"context[_ ]length|context window|maximum context|prompt is too long|"
    r"too many (?:input )?tokens|exceeds? the (?:maximum|max)|input tokens? exceed",
    re.IGNORECASE,
)
_NUMBER = r"(\d[\d,]*)"
_OPENAI_LIMIT = re.compile(rf"maximum context length is {_NUMBER} tokens", re.IGNORECASE)
_OPENAI_MESSAGES = re.compile(
    rf"{_NUMBER} in the messages|messages resulted in {_NUMBER} tokens", re.IGNORECASE
)
_OPENAI_REQUESTED = re.compile(rf"requested {_NUMBER} tokens", re.IGNORECASE)
_ANTHROPIC = re.compile(rf"{_NUMBER} tokens > {_NUMBER} maximum", re.IGNORECASE)
_COUNT_AND_LIMIT = re.compile(
    rf"token count \(?{_NUMBER}\)?.*?maximum[^\d]*{_NUMBER}", re.IGNORECASE | re.DOTALL
)


@dataclass(frozen=True, slots=True)
class Overflow:
    """What a refusal for length says, as far as its message gives figures."""

    prompt_tokens: int | None = None
    """The refused request's input tokens, by the provider's count."""

    limit: int | None = None
    """The limit the request went over (the window, or the window minus `max_tokens`)."""

    excess: int | None = None
    """Tokens over the limit."""


def _int(text: str | None) -> int | None:
    return int(text.replace(",", "")) if text else None


def overflow_of(error: BaseException) -> Overflow | None:
    """The figures of a "context length exceeded" refusal; None for any other error."""
    message = str(error)
    if not isinstance(error, ContextOverflowError) and not _SAYS_OVERFLOW.search(message):
        return None
    if match := _ANTHROPIC.search(message):
        prompt, limit = _int(match.group(1)), _int(match.group(2))
        return Overflow(prompt, limit, None if prompt is None or limit is None else prompt - limit)
    if limit_match := _OPENAI_LIMIT.search(message):
        limit = _int(limit_match.group(1))
        messages = _OPENAI_MESSAGES.search(message)
        prompt = _int(messages.group(1) or messages.group(2)) if messages else None
        requested = _OPENAI_REQUESTED.search(message)
        total = _int(requested.group(1)) if requested else prompt
        excess = None if total is None or limit is None else total - limit
        return Overflow(prompt, limit, excess)
    if match := _COUNT_AND_LIMIT.search(message):
        prompt, limit = _int(match.group(1)), _int(match.group(2))
        return Overflow(prompt, limit, None if prompt is None or limit is None else prompt - limit)
    return Overflow()


RETRY_MARGIN = 0.02
"""Share of the window kept free on top of the reported excess when a refused call is
retried (the estimate of the retry is still an estimate)."""

BLIND_SHRINK = 0.1
"""Share of the window a retry gives up when the refusal gave no figures."""


def retry_shrink(
    calibration: Calibration, window: int, estimated: int, error: Exception
) -> tuple[Calibration, int]:
    """The calibration after a refused request and what the retry gives up, in tokens.

    `estimated` is the ledger's estimate of the refused request.

    The refused request's real size (when the message says it) calibrates the retry at
    once, and the reported excess is kept free on top (a tenth of the window when the
    message gives no figures), with a small margin either way.

    Raises:
        Exception: `error` itself, when it is not a context-window overflow.
    """
    overflow = overflow_of(error)
    if overflow is None:
        raise error
    margin = math.ceil(window * RETRY_MARGIN)
    stated = overflow.limit if overflow.limit and overflow.limit < window else None
    # The refused request's size is used exactly (the retry is priced through it); a
    # window the provider stated holds for the model that refused, not for others.
    calibration = calibration.observe_refusal(estimated, overflow.prompt_tokens, window=stated)
    if stated is not None:
        return calibration, margin  # the stated window is the ceiling now
    if overflow.prompt_tokens is not None:
        # The line passes through the refused request's real size: the retry is priced
        # exactly, and keeping the excess free on top would count it twice (an excess
        # that came from the completion asked for goes with the output reserve).
        return calibration, margin
    if overflow.excess is not None:
        # The refused request's ratio applies to all of it, though the part that made it
        # too long may be far denser than the rest: keep the excess free as well.
        return calibration, overflow.excess + margin
    return calibration, math.ceil(window * BLIND_SHRINK)


def refused_twice(ledger: CallLedger, error: Exception) -> ContextWindowExceeded:
    """The error for a retry refused as too long again.

    Raises:
        Exception: `error` itself, when it is not a context-window overflow.
    """
    if overflow_of(error) is None:
        raise error
    ceiling = ledger.window - ledger.output_reserve
    msg = (
        f"the provider refused the request as too long twice; the retry was estimated at "
        f"{ledger.prompt} tokens of a {ceiling}-token ceiling ({error})"
    )
    return ContextWindowExceeded(msg, required=ledger.prompt, budget=ceiling)
