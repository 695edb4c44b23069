"""count_tokens on source code and roff: the code regime, the backslash, and every path."""

import pytest
from _count_paths import assert_every_path_agrees
from hypothesis import given, settings, strategies as st

from langchain_contextkit import count_each, count_tokens, tiktoken_counter
from langchain_contextkit.tokens import _token_count as counting
from langchain_contextkit.tokens._token_estimate import Tables
from langchain_contextkit.tokens._token_regimes import CHUNK

_C = (
    "static int parse_header(struct reader *rd, const char *buf, size_t len)\n{\n"
    "    if (rd->state == READ_HEADER && len > 0) {\n"
    "        rd->header_len = decode_length(buf, len);\n"
    "        rd->total_bytes += rd->header_len;\n"
    "    }\n    return rd->header_len > MAX_HEADER_SIZE ? -1 : 0;\n}\n"
)
_ENGLISH = "The file has been removed from the folder. Choose another one and try again. " * 4

# Code punctuation, identifiers, Welsh letter pairs, Belarusian and prose: texts of these switch
# between the code, dear, costly and cheap regimes from chunk to chunk.
_PIECES = st.sampled_from(
    [
        *";{}=*_",
        "->",
        "rd",
        "len",
        "header",
        "ў",
        "аў",
        "ы",
        "\\('a",
        "\\",
        "dd",
        "ll",
        "wy",
        "zk",
        "ś",
        *" \n()Y",
        "the ",
        "42",
    ]
)


@given(text=st.lists(_PIECES, max_size=200).map("".join))
@settings(max_examples=200, deadline=None)
def test_every_path_agrees_across_code_chunks(text: str) -> None:
    assert_every_path_agrees(text, head=50)


def test_code_chunks_damp_identifier_letters_and_prose_is_untouched() -> None:
    undamped = counting._Fast(Tables.build(code_letter_percent=100))
    code = _C * 2
    assert counting._count_short(code) < counting._count_short(code, undamped)
    assert counting._count_short(_ENGLISH) == counting._count_short(_ENGLISH, undamped)
    # The first chunks have no code chunks before them: nothing is damped yet.
    assert counting._count_short(code[:CHUNK]) == counting._count_short(code[:CHUNK], undamped)


def test_code_punctuation_is_priced_as_any_punctuation() -> None:
    # Without the code regime's damping, ';' and ',' cost alike: the class only carries evidence.
    undamped = counting._Fast(Tables.build(code_letter_percent=100))
    commas = _C.translate(str.maketrans(";{}=*>_", ",,,,,,,"))
    assert counting._count_short(_C, undamped) == counting._count_short(commas, undamped)


def test_c_source_is_not_counted_low_against_cl100k() -> None:
    exact = tiktoken_counter("cl100k_base")
    text = _C * 3
    assert count_tokens(text) >= 0.9 * exact(text), (count_tokens(text), exact(text))


def test_roff_escapes_pay_for_the_backslash_cl100k_cuts_at() -> None:
    # cl100k reads "direct\('orios" as direct, \, (', or, ios: the backslash is a token of
    # its own. A Portuguese roff page full of such escapes counted 18% low without it.
    without = counting._Fast(Tables.build(backslash_rate=0))
    roff = (
        "nomeia a etiqueta na \\('arvore de direct\\('orios do ficheiro de prefer\\(^encias\n" * 4
    )
    assert counting._count_short(roff) > counting._count_short(roff, without)
    assert count_tokens(_ENGLISH) == counting._count_short(_ENGLISH, without)
    exact = tiktoken_counter("cl100k_base")
    assert count_tokens(roff) >= 0.88 * exact(roff), (count_tokens(roff), exact(roff))


def test_every_path_agrees_where_code_and_prose_alternate_often() -> None:
    # More regime changes than `_FEW_STRETCHES`: the run keys are shifted in one pass.
    text = (_C + _ENGLISH) * 6
    expected = counting._count_short(text)
    regimes = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(counting, "_SHORT_TEXT", 0)
        real = counting._run_keys
        patch.setattr(counting, "_run_keys", lambda b, r: regimes.append(r) or real(b, r))
        assert counting.count_text_tokens(text) == expected
        changes = int((regimes[0][1:] != regimes[0][:-1]).sum())
        assert changes > counting._FEW_STRETCHES
        patch.setattr(counting, "_BLOCK", 7)
        assert counting.count_text_tokens(text) == expected
    assert count_each([text, _C]) == [expected, counting._count_short(_C)]
