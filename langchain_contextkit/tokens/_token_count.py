"""How `count_tokens` evaluates the model of `_token_estimate`: two paths, one result.

A text shorter than `_SHORT_TEXT` characters is read by a plain loop, character by
character (`_count_short`, the model's reference). Longer texts, and many texts at once,
are read by numpy in three passes, each a handful of calls however long the text:

- every character's class, and the cost of each class pair (a strided ``uint16`` view of
  the class bytes reads each pair as one index into a 65,536-entry table);
- the language evidence summed per chunk, and each chunk's regime from the chunks before;
- the runs of one script in one regime (words, and runs of spaces): a run's charge only
  depends on its script, regime and length, so one table lookup per run prices it
  (`_Fast.run_table`; runs longer than the table are priced by the same formula).

Both paths charge exactly the same milli-tokens (the tests compare them on random
Unicode, and with blocks cut inside words and runs of spaces).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from langchain_contextkit.tokens._token_estimate import (
    _EVIDENCE_END,
    _PER_ROW,
    _PERIOD,
    ALPHABET,
    CODE_PUNCT,
    LATIN,
    LONG_RUN,
    LONG_RUN_RATE,
    MILLI,
    N_CLASSES,
    SCRIPT_OF_CLASS,
    SPACE_RUN,
    SPACE_TOKEN,
    SPACES,
    START,
    START_CHARGE,
    STRIDES,
    TABLES,
    Tables,
)
from langchain_contextkit.tokens._token_regimes import (
    CHUNK,
    CHUNKS_BACK,
    CODE_REGIME,
    CODE_THRESHOLD,
    DEAR_THRESHOLD,
    REGIMES,
    THRESHOLD,
)

__all__ = ["count_text_tokens", "count_texts_tokens"]

_RUN_TABLE = 4096
"""Runs up to this long are priced by table lookup; longer ones (rare) by the formula. A
text no longer than this needs no check for longer runs."""
_KEYS = 16
"""A run's key: ``regime * 4 + script`` (script 0 is no letter and costs nothing); run
costs are laid out by length, then key (``length << 4 | key``)."""
_KEY_BITS = 4
_COST_BITS = 18
_CODE_BITS = 6
"""The numpy paths read a pair's cost, its code evidence (1 where it ends in CODE_PUNCT) and
its dear-language evidence in one int32: ``cost + (code << 18) + (dear << 24)``. Summed
per chunk of 32 characters, the costs stay below ``1 << 18`` (each below 2**13) and the
code evidence below ``1 << 6``, so one sum gives all three: ``sum >> 18`` is ``code + (dear
<< 6)``, whose largest value belongs to the chunk of the most dear evidence."""
_CODE_BYTE = bytes([CODE_PUNCT])
"""``bytes.count`` of it bounds a block's code evidence at C speed: only texts dense in code
punctuation read it per chunk."""


class _Fast:
    """Tables in the forms each counting path reads fastest (bytes, lists, flat arrays)."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.class_bytes = tables.classes.tobytes()  # bytes indexing: fastest in pure Python
        self.ascii_classes = tables.classes[:256].tobytes()  # for bytes.translate
        self.ascii_evidence = tables.evidence[:256].view(np.uint8).tobytes()
        self.evidence_list = tables.evidence.tolist()
        self.pair_list = tables.pair_cost.tolist()
        self.pair_evidence_list = tables.pair_evidence.tolist()
        # Pair costs and evidence by ``current * 256 + previous``: a little-endian uint16
        # read at every byte of the class bytes is that index.
        if int(tables.pair_cost.max()) >= 1 << (_COST_BITS - 5) or tables.pair_cost.min() < 0:
            msg = "pair costs must lie in [0, 2**13) to be packed with their evidence"
            raise ValueError(msg)
        if int(np.abs(tables.pair_evidence).max()) > 127:  # noqa: PLR2004 - a signed byte
            msg = "pair evidence must lie in [-127, 127] to be packed with the costs"
            raise ValueError(msg)
        code = np.zeros((N_CLASSES + 1, N_CLASSES), dtype=np.int64)
        code[:, CODE_PUNCT] = 1
        # A pair's evidence as ``sum >> _COST_BITS`` reads it: code + (dear << _CODE_BITS).
        high = code.reshape(-1) + (tables.pair_evidence << _CODE_BITS)
        self.pair_high_list = high.tolist()
        packed = tables.pair_cost + (high << _COST_BITS)
        pairs = packed.reshape(N_CLASSES + 1, N_CLASSES)
        by_bytes = np.zeros((256, 256), dtype=np.int32)
        by_bytes[:N_CLASSES, : N_CLASSES + 1] = pairs.T
        self.pair_by_bytes = by_bytes.reshape(-1)
        # The Basic Multilingual Plane's class and evidence in one little-endian uint16.
        bmp_evidence = np.zeros(0x10000, dtype=np.uint16)
        bmp_evidence[: len(tables.evidence)] = tables.evidence.view(np.uint8)
        self.bmp_class_evidence = (
            tables.classes[:0x10000].astype(np.uint16) | bmp_evidence << 8
        ).astype("<u2")
        table = tables.letter_rate.reshape(2, REGIMES, _PER_ROW)
        # first[key]: a word's first letter; rates[key]: each stride's rate (key 0-15).
        self.first = [0] * _KEYS
        self.rates: list[list[int]] = [[0] * len(STRIDES) for _ in range(_KEYS)]
        for script in (LATIN, ALPHABET):
            for regime in range(REGIMES):
                key = regime * 4 + script
                self.first[key] = int(table[script - 1, regime, 0])
                self.rates[key] = [int(r) for r in table[script - 1, regime, 1:]]
        # By script * REGIMES + regime, for the loop; a run of spaces' first space is free.
        self.first_list = [self.first[r * 4 + s] for s in range(4) for r in range(REGIMES)]
        # Indexed by script and regime, then by a letter's position in its word.
        by_position = [0] * (4 * REGIMES * _PERIOD)
        for script in (LATIN, ALPHABET):
            for regime in range(REGIMES):
                rates = self.rates[regime * 4 + script]
                for position in range(1, _PERIOD + 1):
                    by_position[(script * REGIMES + regime) * _PERIOD + position - 1] = sum(
                        rate
                        for stride, rate in zip(STRIDES, rates, strict=True)
                        if not position % stride
                    )
        self.by_position = by_position
        lengths = np.arange(_RUN_TABLE + 1, dtype=np.int64)
        by_key = [self._run_costs(key, lengths) for key in range(_KEYS)]
        self.run_table = np.stack(by_key, axis=1).reshape(-1)  # [length * _KEYS + key]

    def _run_costs(self, key: int, lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """What a run of each length costs (the loop's charges, summed in closed form)."""
        script = key % 4
        if script == SPACES:  # the 2nd space of a run, and every SPACE_TOKEN-th
            return SPACE_RUN * ((lengths >= 2) + lengths // SPACE_TOKEN)  # noqa: PLR2004
        if not script:
            return np.zeros_like(lengths)
        cost: npt.NDArray[np.int64] = np.where(lengths > 0, self.first[key], 0)
        for stride, rate in zip(STRIDES, self.rates[key], strict=True):
            cost += rate * (lengths // stride)
        cost += LONG_RUN_RATE * np.maximum(lengths - LONG_RUN, 0)
        return cost

    def run_cost(self, key: int, length: int) -> int:
        """What one run of `length` costs, of any length."""
        return int(self._run_costs(key, np.array([length], dtype=np.int64))[0])


_SHORT_TEXT = 96
"""Below this many characters a plain loop beats numpy's per-call overhead."""
_BLOCK = 1 << 20
"""Long texts are counted in blocks of about this many characters to bound memory."""
_SCRIPT_KEYS = tuple(
    bytes(s + 4 * regime if s else 0 for s in SCRIPT_OF_CLASS) + bytes(256 - len(SCRIPT_OF_CLASS))
    for regime in range(REGIMES)
)
"""Class byte -> run key, in each regime (bytes.translate tables)."""
_CHUNK_STARTS = np.arange(0, _BLOCK + CHUNK, CHUNK, dtype=np.intp)
_PAIR_CHUNK_STARTS = np.maximum(_CHUNK_STARTS - 1, 0)
"""Where each chunk's pairs start among `_pair_costs` (entry i is character i + 1)."""


def _finish(milli: int) -> int:
    return -(-(milli + START_CHARGE) // MILLI) if milli > 0 else 0


def _count_short(text: str, fast: _Fast | None = None) -> int:
    """The model read one character at a time: the reference the numpy paths match."""
    fast = fast or _FAST
    classes = fast.class_bytes
    evidence = fast.evidence_list
    pair_cost = fast.pair_list
    pair_evidence = fast.pair_evidence_list
    by_position = fast.by_position
    first = fast.first_list
    scripts = SCRIPT_OF_CLASS
    milli = run = regime = script = chunk = dear = code = 0
    sums: list[int] = []
    dear_sums: list[int] = []
    code_sums: list[int] = []
    prev = START
    for i, ch in enumerate(text):
        if i and not i % CHUNK:  # a chunk ends: the next one's regime is its language
            sums.append(chunk)
            dear_sums.append(dear)
            code_sums.append(code)
            chunk = dear = code = 0
            now = _regime(
                sum(sums[-CHUNKS_BACK:]),
                sum(dear_sums[-CHUNKS_BACK:]),
                sum(code_sums[-CHUNKS_BACK:]),
            )
            if now != regime:
                regime, script = now, 0  # a regime change starts a new word
        cp = ord(ch)
        cls = classes[cp]
        milli += pair_cost[prev * N_CLASSES + cls]
        dear += pair_evidence[prev * N_CLASSES + cls]
        code += cls == CODE_PUNCT
        if cp < _EVIDENCE_END:
            chunk += evidence[cp]
        own = scripts[cls]
        if own:
            if own == script:
                run += 1
            else:
                script, run = own, 1
                milli += first[own * REGIMES + regime]
            if own == SPACES:
                if run == 2 or not run % SPACE_TOKEN:  # noqa: PLR2004 - a run's second space
                    milli += SPACE_RUN
            else:
                milli += by_position[(own * REGIMES + regime) * _PERIOD + (run - 1) % _PERIOD]
                if run > LONG_RUN:
                    milli += LONG_RUN_RATE
        else:
            script = 0
        prev = cls
    return _finish(milli)


def _regime(evidence: int, dear: int, code: int) -> int:
    """A chunk's regime from the evidence of the chunks before it: dear, code, costly or cheap."""
    if dear > DEAR_THRESHOLD:
        return 2
    if code >= CODE_THRESHOLD:
        return CODE_REGIME
    return int(evidence > THRESHOLD)


def _class_and_evidence(text: str, fast: _Fast) -> tuple[bytes, npt.NDArray[np.int8]]:
    """One class byte and one evidence value per character of `text`."""
    if text.isascii():  # O(1) in CPython; bytes.translate is a tight C loop
        raw = text.encode("ascii")
        evidence = np.frombuffer(raw.translate(fast.ascii_evidence), dtype=np.int8)
        return raw.translate(fast.ascii_classes), evidence
    units = text.encode("utf-16-le", "surrogatepass")  # a lone surrogate is one unit
    if len(units) == 2 * len(text):  # no surrogate pairs: every character is one unit
        # One lookup gives both: class in the low byte, evidence in the high one.
        both = fast.bmp_class_evidence.take(np.frombuffer(units, dtype=np.uint16))
        return both.view(np.uint8)[0::2].tobytes(), both.view(np.int8)[1::2]
    codepoints = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    classes = fast.tables.classes.take(codepoints).tobytes()  # take: faster than indexing
    # mode="clip" reads every later code point as U+07FF, whose evidence is 0.
    return classes, fast.tables.evidence.take(codepoints, mode="clip")


def _pair_costs(class_bytes: bytes, fast: _Fast) -> npt.NDArray[np.signedinteger]:
    """The cost of every character after the first, given the class before it."""
    # Each uint16 read one byte after the last is ``current * 256 + previous``.
    codes = np.ndarray((len(class_bytes) - 1,), dtype="<u2", buffer=class_bytes, strides=(1,))
    return fast.pair_by_bytes.take(codes)


def _window_sums(
    sums: npt.NDArray[np.int64] | npt.NDArray[np.uint8], before: tuple[int, ...]
) -> npt.NDArray[np.int64]:
    """Each chunk's sum over the CHUNKS_BACK chunks before it, in one text.

    `before` holds the sums of the chunks before `sums` (the block before, at most
    CHUNKS_BACK of them).
    """
    m = len(sums)
    padded = np.zeros(m + CHUNKS_BACK + 1, dtype=np.int64)
    padded[CHUNKS_BACK + 1 - len(before) : CHUNKS_BACK + 1] = before
    padded[CHUNKS_BACK + 1 :] = sums
    total: npt.NDArray[np.int64] = padded.cumsum()
    # Chunk j sits at j + CHUNKS_BACK + 1; the chunks before it at j + 1 .. j + CHUNKS_BACK.
    return total[CHUNKS_BACK : CHUNKS_BACK + m] - total[:m]


def _batch_window_sums(
    sums: npt.NDArray[np.int64], firsts: npt.NDArray[np.intp]
) -> npt.NDArray[np.int64]:
    """`_window_sums` of many texts' chunks; `firsts[j]` is the first chunk of chunk j's text."""
    total = np.zeros(len(sums) + 1, dtype=np.int64)
    np.cumsum(sums, out=total[1:])
    index = np.arange(len(sums), dtype=np.intp)
    low = np.maximum(index - CHUNKS_BACK, firsts)
    return total[index] - total[low]


def _regimes(
    evidence: npt.NDArray[np.int64],
    dear: npt.NDArray[np.int64] | None,
    code: npt.NDArray[np.int64] | None,
) -> npt.NDArray[np.uint8]:
    """`_regime` of every chunk, from its evidence windows (None: none reaches its threshold)."""
    regimes = (evidence > THRESHOLD).astype(np.uint8)
    if code is not None:
        regimes[code >= CODE_THRESHOLD] = CODE_REGIME
    if dear is not None:
        regimes[dear > DEAR_THRESHOLD] = 2
    return regimes


_total = np.add.reduce
_most = np.maximum.reduce
"""The ufuncs' reductions themselves: ``a.sum()`` and ``a.max()`` pass through Python
wrappers that cost more than summing a few hundred numbers."""
_FEW_STRETCHES = 4
"""Up to this many regime changes, each stretch is translated with its own table."""


def _run_keys(
    class_bytes: bytes, regimes: npt.NDArray[np.uint8] | npt.NDArray[np.bool_] | None
) -> npt.NDArray[np.uint8]:
    """Every character's run key: its script, and the regime of its chunk (None: all 0)."""
    if regimes is None:
        return np.frombuffer(class_bytes.translate(_SCRIPT_KEYS[0]), dtype=np.uint8)
    changes = ((regimes[1:] != regimes[:-1]).nonzero()[0] + 1).tolist()
    if not changes:
        table = _SCRIPT_KEYS[int(regimes[0])]
        return np.frombuffer(class_bytes.translate(table), dtype=np.uint8)
    if len(changes) > _FEW_STRETCHES:  # code and prose in turn: shift every key at once
        # A non-letter's key shifts too: its runs split where the regime changes, at no cost.
        shift = np.repeat(regimes.astype(np.uint8) << 2, CHUNK)[: len(class_bytes)]
        return np.frombuffer(class_bytes.translate(_SCRIPT_KEYS[0]), dtype=np.uint8) + shift
    starts = [0, *changes]
    values = regimes[starts].tolist()
    bounds = [*(c * CHUNK for c in starts), len(class_bytes)]
    keys = b"".join(
        class_bytes[bounds[i] : bounds[i + 1]].translate(_SCRIPT_KEYS[values[i]])
        for i in range(len(starts))
    )
    return np.frombuffer(keys, dtype=np.uint8)


@dataclass(frozen=True, slots=True)
class _Runs:
    """The runs of one key in a stretch of text (words, runs of spaces, other stretches)."""

    starts: npt.NDArray[np.intp]
    lengths: npt.NDArray[np.intp]
    keys: npt.NDArray[np.uint8]
    costs: npt.NDArray[np.int64]


def _runs(keys: npt.NDArray[np.uint8], breaks: npt.NDArray[np.intp] | None, fast: _Fast) -> _Runs:
    """Split `keys` into runs (also at `breaks`, where texts start) and price each one."""
    n = len(keys)
    # starting[i]: a run starts at i; the extra entry at n closes the last one.
    starting = np.empty(n + 1, dtype=bool)
    starting[0] = starting[n] = True
    np.not_equal(keys[1:], keys[:-1], out=starting[1:n])
    if breaks is not None:
        starting[breaks] = True
    bounds = starting.nonzero()[0]
    starts = bounds[:-1]
    lengths = bounds[1:] - starts
    run_keys = keys.take(starts)
    # run_table is laid out by length, then key: one shift and one add make the index. No
    # run of a text of at most _RUN_TABLE characters is longer than the table.
    longest = int(lengths.max()) if n > _RUN_TABLE else 0
    index = (lengths if longest <= _RUN_TABLE else np.minimum(lengths, _RUN_TABLE)) << _KEY_BITS
    index += run_keys
    costs = fast.run_table.take(index)
    if longest > _RUN_TABLE:  # rare: priced by the formula
        for i in (lengths > _RUN_TABLE).nonzero()[0].tolist():
            costs[i] = fast.run_cost(int(run_keys[i]), int(lengths[i]))
    return _Runs(starts, lengths, run_keys, costs)


@dataclass
class _Carry:
    """What one block of a long text hands to the next (the defaults start a text)."""

    prev: int = START
    key: int = 0  # the run the block ended in
    run: int = 0  # ... and its length so far
    sums: tuple[int, ...] = ()  # letter evidence of the last CHUNKS_BACK chunks
    dear: tuple[int, ...] = ()  # ... their pair evidence
    code: tuple[int, ...] = ()  # ... and their code evidence


def _block_regimes(
    sums: npt.NDArray[np.int64],
    high: npt.NDArray[np.int64],
    code: npt.NDArray[np.int64] | None,
    carry: _Carry,
) -> npt.NDArray[np.uint8] | npt.NDArray[np.bool_] | None:
    """Each chunk's regime from a block's chunk evidence (None: all cheap).

    `high` is each chunk's ``code + (dear << _CODE_BITS)``; `code` its code evidence, None
    where too little to pass the threshold.
    """
    # Evidence that cannot pass a threshold leaves every chunk in regime 0.
    most = max(int(_most(sums)), *carry.sums) if carry.sums else int(_most(sums))
    most_dear = int(_most(high)) >> _CODE_BITS  # the code evidence never reaches 1 << _CODE_BITS
    most_dear = max(most_dear, *carry.dear) if carry.dear else most_dear
    dear_windows = code_windows = None
    if most_dear * CHUNKS_BACK > DEAR_THRESHOLD:
        dear_windows = _window_sums(high >> _CODE_BITS, carry.dear)
        if not (dear_windows > DEAR_THRESHOLD).any():
            dear_windows = None
    most_code = 0 if code is None else max(int(_most(code)), *carry.code, 0)
    if code is not None and most_code * CHUNKS_BACK >= CODE_THRESHOLD:
        code_windows = _window_sums(code, carry.code)
        if not (code_windows >= CODE_THRESHOLD).any():
            code_windows = None
    if dear_windows is not None or code_windows is not None:
        return _regimes(_window_sums(sums, carry.sums), dear_windows, code_windows)
    if most * CHUNKS_BACK > THRESHOLD:  # cheap or costly only (a bool is regime 0 or 1)
        return _window_sums(sums, carry.sums) > THRESHOLD
    return None


def _count_block(block: str, carry: _Carry, fast: _Fast, *, more: bool = True) -> int:
    """Milli-tokens of one block of a text; updates `carry` for the next block (`more`)."""
    n = len(block)
    class_bytes, evidence = _class_and_evidence(block, fast)
    chunks = -(-n // CHUNK)
    sums = np.add.reduceat(evidence, _CHUNK_STARTS[:chunks], dtype=np.int64)
    first = carry.prev * N_CLASSES + class_bytes[0]
    milli: int = fast.pair_list[first]
    if n > 1:  # each chunk's pair costs and pair evidence, in one sum of packed values
        packed = np.add.reduceat(
            _pair_costs(class_bytes, fast), _PAIR_CHUNK_STARTS[:chunks], dtype=np.int64
        )
        high = packed >> _COST_BITS  # costs are in [0, 1 << _COST_BITS)
        milli += int(_total(packed)) - (int(_total(high)) << _COST_BITS)
    else:
        high = np.zeros(1, dtype=np.int64)
    first_evidence = fast.pair_high_list[first]
    if first_evidence:  # the block's first pair joins chunk 0 (a text's first has none)
        high[0] += first_evidence
    # The code evidence is read only where enough CODE_PUNCT characters could make a chunk code.
    dense = more or class_bytes.count(_CODE_BYTE) + sum(carry.code) >= CODE_THRESHOLD
    code = high & ((1 << _CODE_BITS) - 1) if dense else None
    regimes = _block_regimes(sums, high, code, carry)
    runs = _runs(_run_keys(class_bytes, regimes), None, fast)
    milli += int(_total(runs.costs))
    if not carry.key and not more:  # a whole text: no word goes on from or into another block
        return milli
    key, length = int(runs.keys[0]), int(runs.lengths[0])
    continued = key == carry.key and key % 4 != 0  # the word (or run) before goes on
    if continued:
        milli += fast.run_cost(key, carry.run + length) - fast.run_cost(key, carry.run)
        milli -= int(runs.costs[0])
    last = len(runs.starts) == 1
    carry.run = int(runs.lengths[-1]) + (carry.run if continued and last else 0)
    carry.key = int(runs.keys[-1])
    carry.prev = class_bytes[-1]
    carry.sums = (*carry.sums, *sums[-CHUNKS_BACK:].tolist())[-CHUNKS_BACK:]
    tail = high[-CHUNKS_BACK:]
    carry.dear = (*carry.dear, *(tail >> _CODE_BITS).tolist())[-CHUNKS_BACK:]
    carry.code = (*carry.code, *(tail & ((1 << _CODE_BITS) - 1)).tolist())[-CHUNKS_BACK:]
    return milli


_SHORT_COUNTS: dict[str, int] = {}
"""Counts of short texts, by `count_text_tokens` and `count_texts_tokens` alike. Short
texts repeat: every message's role, every tool call's name; a history of 10,000 messages
holds about 24,000 of them, a quarter distinct."""
_SHORT_KEPT = 1 << 15


def _short_tokens(text: str) -> int:
    """`_count_short` with the default tables, remembered in `_SHORT_COUNTS`."""
    known = _SHORT_COUNTS.get(text)
    if known is None:
        known = _count_short(text)
        _keep_short([(text, known)])
    return known


def _keep_short(counts: list[tuple[str, int]]) -> None:
    """Remember short texts' counts, within `_SHORT_KEPT`."""
    if len(_SHORT_COUNTS) + len(counts) > _SHORT_KEPT:
        _SHORT_COUNTS.clear()  # a bound, not an eviction order: they are cheap to count again
    _SHORT_COUNTS.update(counts)


def count_text_tokens(text: str) -> int:
    """Estimate the tokens of `text` (see `_token_estimate` for the model)."""
    if len(text) < _SHORT_TEXT:
        return _short_tokens(text)
    carry = _Carry()
    milli = 0
    step = max(_BLOCK // CHUNK, 1) * CHUNK  # blocks end on chunk boundaries
    if len(text) <= step:  # one block (the usual case): no carry to keep
        return _finish(_count_block(text, carry, _FAST, more=False)) if text else 0
    for start in range(0, len(text), step):
        milli += _count_block(text[start : start + step], carry, _FAST)
    return _finish(milli)


_BATCH_CHARS = 1 << 14
"""Texts are counted together in batches of about this many characters: enough to amortise
numpy's per-call cost, few enough that the per-character arrays stay in cache (a batch of
1 << 18 was twice as slow and took 12 times the memory)."""


def count_texts_tokens(texts: list[str]) -> list[int]:
    """Estimate the tokens of each text; equal to `count_text_tokens` on each, faster.

    Many small texts (candidate lines, messages) are joined and read in one numpy pass:
    their character pairs, their chunks' evidence and regimes and their runs, every run
    starting afresh where a text starts.
    """
    counts = [0] * len(texts)
    batch: list[int] = []
    short: list[int] = []  # short texts not seen before: counted in the batch, then kept
    size = 0
    for i, text in enumerate(texts):
        if len(text) >= _BLOCK:
            counts[i] = count_text_tokens(text)
            continue
        if len(text) < _SHORT_TEXT:
            known = _SHORT_COUNTS.get(text)
            if known is not None or not text:
                counts[i] = known or 0
                continue
            short.append(i)
        batch.append(i)
        size += len(text)
        if size >= _BATCH_CHARS:
            _count_batch(texts, batch, counts, _FAST)
            batch, size = [], 0
    if len(batch) - len(short) <= _FEW_LONG and len(short) <= _FEW_SHORT:
        # An agent call's new texts (a result, a call's name, arguments and id): numpy's
        # fixed cost per batch (~100 us) is more than counting them one by one.
        for i in batch:
            counts[i] = count_text_tokens(texts[i])
        return counts
    if batch:
        _count_batch(texts, batch, counts, _FAST)
    # Unseen short texts were counted in the batch (it gives `_count_short`'s figures): one
    # at a time in Python, 6,500 of them took most of a cold 10,000-message call's counting.
    _keep_short([(texts[i], counts[i]) for i in short])
    return counts


_FEW_LONG, _FEW_SHORT = 2, 8
"""A batch of at most this many texts of `_SHORT_TEXT` characters or more, and this many
shorter ones, is counted one text at a time (`count_text_tokens`, which keeps the short
ones): numpy's fixed cost per batch is then the larger part. Measured: a result and four
short texts, 180 us batched, about 110 us one by one; two short texts, 130 against 22."""


def _count_batch(texts: list[str], batch: list[int], counts: list[int], fast: _Fast) -> None:
    if len(batch) == 1:  # one text (an agent call's new result): no per-text arrays to build
        counts[batch[0]] = count_text_tokens(texts[batch[0]])
        return
    joined = "".join(texts[i] for i in batch)
    n = len(joined)
    class_bytes, evidence = _class_and_evidence(joined, fast)
    cls = np.frombuffer(class_bytes, dtype=np.uint8)
    lengths = [len(texts[i]) for i in batch]
    text_starts = np.concatenate(([0], np.cumsum(lengths[:-1]))).astype(np.intp)

    cost = np.empty(n, dtype=fast.pair_by_bytes.dtype)
    cost[1:] = _pair_costs(class_bytes, fast)
    cost[text_starts] = fast.pair_by_bytes[cls[text_starts].astype(np.intp) * 256 + START]

    # Chunks start afresh at every text's start.
    chunks = [-(-m // CHUNK) for m in lengths]
    offsets = np.repeat(text_starts, chunks)
    firsts = np.repeat(np.cumsum([0, *chunks[:-1]]), chunks).astype(np.intp)
    chunk_starts = offsets + (np.arange(len(offsets)) - firsts) * CHUNK
    packed = np.add.reduceat(cost, chunk_starts, dtype=np.int64)
    high = packed >> _COST_BITS  # costs are in [0, 1 << _COST_BITS)
    costs = packed - (high << _COST_BITS)
    milli = np.add.reduceat(costs, np.cumsum([0, *chunks[:-1]]), dtype=np.int64)
    sums = np.add.reduceat(evidence, chunk_starts, dtype=np.int64)
    regimes = _regimes(
        _batch_window_sums(sums, firsts),
        _batch_window_sums(high >> _CODE_BITS, firsts),
        _batch_window_sums(high & ((1 << _CODE_BITS) - 1), firsts),
    )
    if regimes.any() and not (regimes == regimes[0]).all():
        # A chunk's key shift spans the chunk, which may end early at a text's end.
        shift = np.repeat(regimes * 4, np.diff(chunk_starts, append=n))
        keys = np.frombuffer(class_bytes.translate(_SCRIPT_KEYS[0]), dtype=np.uint8) + shift
    else:
        keys = _run_keys(class_bytes, regimes)
    runs = _runs(keys, text_starts, fast)
    first_runs = np.searchsorted(runs.starts, text_starts)
    milli += np.add.reduceat(runs.costs, first_runs, dtype=np.int64)
    for i, total in zip(batch, milli.tolist(), strict=True):
        counts[i] = _finish(total)


_FAST = _Fast(TABLES)
