"""`ContentWitness`: one read of a history's contents per call, which the memos then trust."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings, strategies as st
from langchain_core.messages import HumanMessage, ToolMessage
from test_cutter_resume import _unit

from langchain_contextkit._content_witness import ContentWitness, vouched, vouching
from langchain_contextkit.agents.assembler import WindowAssembler
from langchain_contextkit.agents.result_cutter import ResultCutter


def test_a_growing_history_keeps_its_lineage_and_an_edit_starts_a_new_one() -> None:
    witness = ContentWitness()
    history = _unit(0, 50)
    first = witness.read(history)
    history += _unit(1, 50)
    assert witness.read(history) is first
    history[2].content = "edited in place"
    second = witness.read(history)
    assert second is not first
    assert witness.read(history) is second  # read again: unchanged since
    history[0] = history[0].model_copy(update={"content": "replaced"})
    assert witness.read(history) is not second  # not the same objects


def test_equal_copies_a_shorter_list_and_an_equal_content_reassigned() -> None:
    witness = ContentWitness()
    history = _unit(0, 50) + _unit(1, 50)
    first = witness.read(history)
    assert witness.read(history[:4]) is not first  # does not extend the list read last
    second = witness.read(history)
    history[1].content = str(history[1].content)  # an equal value: nothing a memo reads moved
    assert witness.read(history) is second
    assert witness.read([m.model_copy() for m in history]) is not second


def test_histories_without_ids_are_named_by_their_first_object() -> None:
    witness = ContentWitness(size=2)
    a, b = [HumanMessage("a")], [HumanMessage("b")]
    lineage_a, lineage_b = witness.read(a), witness.read(b)
    assert witness.read(a) is lineage_a
    assert witness.read(b) is lineage_b
    witness.read([HumanMessage("c")])  # a third history evicts the oldest (a)
    assert witness.read(a) is not lineage_a
    assert witness.read([]) is not witness.read([])


def test_vouching_is_scoped_and_nested() -> None:
    witness = ContentWitness()
    outer, inner = witness.read(_unit(0, 10)), witness.read(_unit(1, 10))
    assert vouched() is None
    with vouching(outer):
        assert vouched() is outer
        with vouching(inner):
            assert vouched() is inner
        assert vouched() is outer
    assert vouched() is None


def test_each_async_task_sees_its_own_vouch() -> None:
    witness = ContentWitness()
    lineages = [witness.read(_unit(i, 10)) for i in range(2)]

    async def seen(i: int) -> object:
        with vouching(lineages[i]):
            await asyncio.sleep(0)  # the other task runs here
            return vouched()

    async def both() -> list[object]:
        return list(await asyncio.gather(seen(0), seen(1)))

    assert asyncio.run(both()) == lineages


def test_the_memos_trust_a_vouched_lineage_and_read_contents_without_one() -> None:
    # Vouching for a lineage the witness did not read again after an edit shows the
    # memos skip their own read only then: outside a vouch they see the edit.
    witness = ContentWitness()
    history = [m for i in range(4) for m in _unit(i, 100)]
    lineage = witness.read(history)
    cutter = ResultCutter(len)
    with vouching(lineage):
        assert cutter.cap(history, threshold=200, size=10).cut == 0
    history[2].content = "word " * 400
    with vouching(lineage):
        assert cutter.cap(history, threshold=200, size=10).cut == 0  # trusted, not read
    assert cutter.cap(history, threshold=200, size=10).cut == 1


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(20, 6_000), st.just(0)),
        st.tuples(st.just("assign"), st.integers(0, 400), st.integers(0, 6_000)),
        st.tuples(st.just("replace"), st.integers(0, 400), st.integers(0, 6_000)),
        st.tuples(st.just("truncate"), st.integers(0, 400), st.just(0)),
    ),
    min_size=1,
    max_size=12,
)


@given(ops=_OPS)
@settings(max_examples=60, deadline=None)
def test_every_call_lays_out_what_a_fresh_assembler_lays_out(
    ops: list[tuple[str, int, int]],
) -> None:
    """In-place edits between calls are seen through the witness: memoised equals fresh."""
    warm = WindowAssembler(window=6_000)
    history = _unit(0, 300)
    units = 1
    for op, at, chars in ops:
        if op == "append":
            history = [*history, *_unit(units, at)]
            units += 1
        elif op == "assign":  # the same object, its content reassigned
            message = history[at % len(history)]
            if isinstance(message, ToolMessage):
                message.content = "word " * (chars // 5)
            else:
                message.content = f"edited {chars}"
        elif op == "replace":
            i = at % len(history)
            history[i] = history[i].model_copy(update={"content": f"replaced {chars}"})
        else:
            history = history[: max(1, at % (len(history) + 1))]
        # The question stays in the history, as an agent's does: the next call extends it.
        history = [*history, HumanMessage(f"now {units}", id=f"q{units}-{op}-{at}")]
        # Sync and async calls alike: the vouch is a context variable, per task. Without
        # reusing the process's recaps: a warm assembler may keep a recap a fresh one would
        # not make (the prefix stays cache-stable), which is not what this test is about.
        if units % 2:
            got = warm.assemble(history, reuse_recaps=False)
        else:
            got = asyncio.run(warm.aassemble(history, reuse_recaps=False))
        fresh = WindowAssembler(window=6_000).assemble(history)
        assert [m.text for m in got.messages] == [m.text for m in fresh.messages]
        assert got.ledger.prompt == fresh.ledger.prompt


def test_threads_sharing_one_assembler_see_the_edits_between_their_calls() -> None:
    """Two threads on one assembler, each on its history, edits in place between calls."""
    import threading

    warm = WindowAssembler(window=6_000)
    histories = {k: [m for i in range(3) for m in _unit(10 * k + i, 900)] for k in (1, 2)}
    for k, history in histories.items():
        for m in history:
            m.id = f"{k}-{m.id}"
    turn = threading.Barrier(2)
    failures: list[str] = []

    def worker(k: int) -> None:
        history = histories[k]
        for step in range(6):
            turn.wait()  # both threads call in the same moment, then edit
            history.append(HumanMessage(f"now {step}", id=f"{k}-q{step}"))
            got = warm.assemble(history, reuse_recaps=False)
            fresh = WindowAssembler(window=6_000).assemble(history)
            texts, prompt = [m.text for m in got.messages], got.ledger.prompt
            if (texts, prompt) != ([m.text for m in fresh.messages], fresh.ledger.prompt):
                failures.append(f"thread {k}, step {step}")
            # The newest result, in the kept tail: it grows past what the window shows.
            target = next(m for m in reversed(history) if isinstance(m, ToolMessage))
            target.content = f"step {step}: " + "word " * (400 * (step + 1))

    threads = [threading.Thread(target=worker, args=(k,)) for k in histories]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
