"""`NewestKnown` resumes its search where the last one ended, and finds what a full search finds."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from langchain_contextkit.compaction._recap_memo import NewestKnown, RecapMemo


def _full_search(memo: RecapMemo, starts: list[int], base: int, digests: list[str]) -> int | None:
    after = [s for s in starts if s > base]
    return next((s for s in reversed(after) if memo.get(digests[s]) is not None), None)


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("grow"), st.integers(1, 6)),
        st.tuples(st.just("recap"), st.integers(0, 200)),
        st.tuples(st.just("base"), st.integers(0, 200)),
        st.tuples(st.just("edit"), st.integers(0, 200)),
        st.tuples(st.just("evict"), st.integers(0, 3)),
    ),
    max_size=30,
)


@given(steps=_STEPS)
@settings(max_examples=200, deadline=None)
def test_each_search_equals_a_full_search(steps: list[tuple[str, int]]) -> None:
    memo = RecapMemo(size=4)
    newest = NewestKnown(memo)
    # digests[n] names the first n messages; a message i starts a unit when i % 3 == 0.
    digests, era, base = ["d0"], 0, 0
    for kind, value in steps:
        n = len(digests) - 1
        if kind == "grow":
            digests += [f"{era}:{n + k}" for k in range(1, value + 1)]
        elif kind == "recap" and n:
            memo.put(digests[value % (n + 1)], "recap")
        elif kind == "base":
            base = value % (n + 1)
        elif kind == "edit" and n:  # a message changed: every prefix digest from it moves
            at, era = value % n + 1, era + 1
            digests[at:] = [f"{era}:{i}" for i in range(at, n + 1)]
        elif kind == "evict":
            for k in range(value):
                memo.put(f"other-{len(steps)}-{k}-{era}", "recap")
        n = len(digests) - 1
        starts = [i for i in range(n) if i % 3 == 0]
        assert newest.find(starts, base, digests) == _full_search(memo, starts, base, digests)


def test_a_steady_search_reads_only_the_new_unit_starts() -> None:
    memo = RecapMemo()
    newest = NewestKnown(memo)
    digests = [f"d{i}" for i in range(1_001)]
    starts = list(range(0, 1_000, 2))
    memo.put(digests[10], "recap")
    assert newest.find(starts, 0, digests) == 10

    class Counting(list[str]):
        reads = 0

        def __getitem__(self, i):  # type: ignore[no-untyped-def]
            Counting.reads += 1
            return super().__getitem__(i)

    grown = Counting([*digests, *(f"d{i}" for i in range(1_001, 1_011))])
    assert newest.find([*starts, *range(1_000, 1_010, 2)], 0, grown) == 10
    assert Counting.reads <= 12  # the 5 new starts, the check of the old end, no more
