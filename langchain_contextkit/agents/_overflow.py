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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from langchain_core.exceptions import ContextOverflowError

__all__ = ["Overflow", "overflow_of"]

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
