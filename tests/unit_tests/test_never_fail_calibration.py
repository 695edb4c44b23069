"""Never fail the agent: a provider that counts differently cannot fool the ledger.

Issue 28 item 3 (and item 6's cases for it). The scripted provider reports its own input
tokens in `usage_metadata`, as a real service does: a fixed overhead added to every
request (~350 tokens, as Anthropic's tool-use preamble), ~9 tokens per message, or a
denser tokenizer (1.3 tokens per estimated token). After one tiny first request a large
turn that fits must still be sent, and over a thread no request may exceed the window in
the provider's tokens. Every case runs on the default and on ``summaries="extractive"``.
"""

from __future__ import annotations

import math

import pytest
from _never_fail import (
    SUMMARIES,
    Provider,
    assert_history_whole,
    assert_requests_fit_and_valid,
    build,
    bulky,
    facts_in,
    play,
    turn,
)

pytestmark = pytest.mark.parametrize("summaries", SUMMARIES)

FIXED_OVERHEAD = 350
PER_MESSAGE = 9
DENSER = 1.3


def fixed_overhead(tokens: int, _messages: int) -> int:
    return tokens + FIXED_OVERHEAD


def per_message(tokens: int, messages: int) -> int:
    return tokens + PER_MESSAGE * messages


def denser(tokens: int, _messages: int) -> int:
    return math.ceil(tokens * DENSER)


def test_a_fixed_overhead_after_a_tiny_request_does_not_refuse_a_large_turn(
    summaries: str,
) -> None:
    # 200k window: a tiny first request, then an ~81.7k-token one that fits with room.
    provider = Provider(window=200_000, max_output=4_096, overhead=fixed_overhead)
    big = f"{bulky(81_500, 'log')}\nPlease check the log above."
    run = build(provider, summaries)
    play(run, ["hi", big, turn(3)])
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    second = provider.agent_requests()[1]
    assert second[-1].text == big, "the large turn was not sent as the user wrote it"


def test_a_per_message_charge_after_a_tiny_request_does_not_refuse_a_large_turn(
    summaries: str,
) -> None:
    provider = Provider(window=32_000, max_output=2_000, overhead=per_message)
    big = f"{bulky(24_000, 'log')}\nPlease check the log above."
    run = build(provider, summaries)
    play(run, ["hi", big, turn(3)])
    assert_requests_fit_and_valid(run)
    second = provider.agent_requests()[1]
    assert second[-1].text == big


@pytest.mark.parametrize(
    "overhead", [fixed_overhead, per_message, denser], ids=lambda f: f.__name__
)
def test_a_thread_stays_inside_the_window_in_the_providers_tokens(
    summaries: str, overhead: object
) -> None:
    provider = Provider(window=8_000, overhead=overhead)  # type: ignore[arg-type]
    results = {f"r{n}": bulky(250, f"r{n}") for n in range(1, 41)}
    run = build(provider, summaries, results=results)
    play(run, [turn(n, fetch=[f"r{n}"], filler=3) for n in range(1, 41)])
    assert_requests_fit_and_valid(run)
    assert_history_whole(run)
    assert {39, 40} <= facts_in(run.last_request())
