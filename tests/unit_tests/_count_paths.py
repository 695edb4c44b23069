"""The estimator's counting paths agree: a property the token tests share."""

from __future__ import annotations

import pytest

from langchain_contextkit.tokens import _token_count as counting
from langchain_contextkit.tokens.count import count_each


def assert_every_path_agrees(text: str, head: int) -> None:
    """The numpy paths (whole, in tiny blocks, in a batch) give the character loop's count."""
    expected = counting._count_short(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(counting, "_SHORT_TEXT", 0)
        assert counting.count_text_tokens(text) == expected
        patch.setattr(counting, "_BLOCK", 7)  # one chunk per block: windows and runs cut
        assert counting.count_text_tokens(text) == expected
    batch = [text, text[:head], text, "x"]
    want = [expected, counting._count_short(text[:head]), expected, counting._count_short("x")]
    assert count_each(batch) == want
    # A few texts are counted one by one (`_FEW_LONG`, `_FEW_SHORT`): force each way.
    for few in (-1, len(batch)):
        counting._SHORT_COUNTS.clear()  # short texts go through the batch again
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(counting, "_FEW_LONG", few)
            patch.setattr(counting, "_FEW_SHORT", few)
            assert counting.count_texts_tokens(batch) == want
