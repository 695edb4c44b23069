"""`evaluate`: per-case figures recomputed by hand, judges, drift, concurrency, targets."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit import (
    CallableSource,
    ContextBuilder,
    ContextConfig,
    ContextKitMiddleware,
    EvalCase,
    EvalResult,
    QualityGate,
    RetrievalResult,
    aevaluate,
    evaluate,
)
from langchain_contextkit.agent.plan import WindowAssembler
from langchain_contextkit.agent.window_budget import WindowBudgetConfig
from langchain_contextkit.cli.demo.evaluation import (
    DONT_KNOW,
    fact_cases,
    reader_agent,
    reader_reply,
    transcript,
)
from langchain_contextkit.cli.demo.project import copy_project
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens.count import count_message_tokens

if TYPE_CHECKING:
    from pathlib import Path

# Six passages, one fact each; a question per passage. A reader answers a question with
# its fact exactly when the passage reached the request.
PASSAGES = {
    f"What is the code of site {name}?": (f"Site {name} has the access code {code}. " * 3).strip()
    for name, code in [
        ("north", "N-1107"),
        ("south", "S-2281"),
        ("east", "E-3395"),
        ("west", "W-4402"),
        ("harbour", "H-5518"),
        ("airport", "A-6624"),
    ]
}
CODES = {q: re.search(r"[A-Z]-\d{4}", text).group(0) for q, text in PASSAGES.items()}  # type: ignore[union-attr]


def _passages(query: str) -> list[RetrievalResult]:
    # Ranked north first, airport last: a budget that keeps fewer drops the last ones.
    return [RetrievalResult(text, 0.9 - i / 100, "rag") for i, text in enumerate(PASSAGES.values())]


def _reader(messages: list[BaseMessage]) -> AIMessage:
    question = messages[-1].text
    context = "\n".join(m.text for m in messages[:-1])
    code = CODES.get(question, "?")
    return AIMessage(code if code in context else "I don't know")


def _assembler(rag_ratio: float) -> WindowAssembler:
    return WindowAssembler(
        window=3000,
        sources=[CallableSource("rag", _passages)],
        budget_config=WindowBudgetConfig(desired_output_tokens=500, rag_ratio=rag_ratio),
    )


CASES = [EvalCase(q, code, case_id=q.split()[-1][:-1]) for q, code in CODES.items()]


def test_every_figure_is_recomputed_by_hand_from_the_cases() -> None:
    model = ScriptedChatModel(respond=_reader)
    assembler = _assembler(0.5)
    result = evaluate(assembler, CASES, "exact", model=model)
    assert [c.case_id for c in result.cases] == [
        "north",
        "south",
        "east",
        "west",
        "harbour",
        "airport",
    ]
    for case, request in zip(result.cases, model.requests, strict=True):
        # One model call per case, in case order (the requests are recorded as sent).
        assert request[-1].text == case.question
        assert case.tokens == count_message_tokens(request, assembler.counter)
        assert case.answer == CODES[case.question]
        assert case.score == 1.0
        assert case.limit == 3000 - 500
        assert case.over_budget is (case.tokens > 3000 - 500)
        assert case.latency_ms >= (case.model_ms or 0) > 0
    n = len(CASES)
    assert result.mean_score == pytest.approx(sum(c.score for c in result.cases) / n)
    assert result.mean_tokens == pytest.approx(sum(c.tokens for c in result.cases) / n)
    assert result.over_budget_share == 0.0
    assert result.gate_failure_share is None
    assert result.cache_read_share is None  # the scripted model reports no usage
    latencies = sorted(c.latency_ms for c in result.cases)
    assert result.mean_latency_ms == pytest.approx(sum(latencies) / n)
    assert result.p95_latency_ms == latencies[5]  # nearest rank: ceil(0.95 * 6) = 6th
    text = str(result)
    assert "evaluate WindowAssembler over 6 case(s), judge exact" in text
    assert "mean score 1.000; over budget 0.0%; gate failures n/a" in text


def test_a_smaller_budget_that_drops_the_needed_fact_is_flagged_and_the_same_policy_passes() -> (
    None
):
    model = ScriptedChatModel(respond=_reader)
    good = evaluate(_assembler(0.5), CASES, "exact", model=model)
    again = evaluate(_assembler(0.5), CASES, "exact", model=model, baseline=good)
    worse = evaluate(_assembler(0.08), CASES, "exact", model=model, baseline=good)
    assert good.mean_score == 1.0
    again.assert_no_regression()  # the same policy against itself
    assert again.compare().passed
    assert worse.mean_score < good.mean_score
    drift = worse.compare()
    assert not drift.passed
    assert [f.spec.key for f in drift.regressions] == ["mean_score"]
    assert drift["mean_score"].delta == pytest.approx(worse.mean_score - 1.0)
    dropped = [c.case_id for c in worse.cases if c.answer == "I don't know"]
    assert dropped
    assert [c.case_id for c in drift.worse_cases] == dropped
    with pytest.raises(AssertionError, match="mean score"):
        worse.assert_no_regression()
    # Tokens fell (less retrieval): the amount is better, so it never gates.
    assert drift["mean_tokens"].delta < 0
    assert not drift["mean_tokens"].worse
    # A tolerance as wide as the drop lets it pass; per-case drops past it are listed.
    worse.assert_no_regression(tolerance=1.0 - worse.mean_score)
    assert "WORSE" in str(worse)


def test_concurrent_and_sequential_runs_give_the_same_results() -> None:
    model = ScriptedChatModel(respond=_reader)
    cases = [
        EvalCase(c.question, c.reference, case_id=f"{c.case_id}-{n}")
        for n in range(5)
        for c in CASES
    ]
    concurrent = evaluate(_assembler(0.08), cases, "exact", model=model, max_concurrency=8)
    sequential = evaluate(_assembler(0.08), cases, "exact", model=model, max_concurrency=1)

    def stable(result: EvalResult) -> list[tuple[Any, ...]]:
        return [(c.case_id, c.answer, c.score, c.tokens, c.over_budget) for c in result.cases]

    assert stable(concurrent) == stable(sequential)
    assert 0 < concurrent.mean_score < 1  # some facts dropped: the comparison is not trivial


def test_the_demo_agent_gives_the_same_results_concurrently_and_in_order(tmp_path: Path) -> None:
    copy_project(tmp_path / "project")
    agent = reader_agent(tmp_path / "project", window=6000)
    cases = fact_cases(transcript(), repeat=4)
    concurrent = evaluate(agent, cases, "exact", max_concurrency=8)
    sequential = evaluate(agent, cases, "exact", max_concurrency=1)

    def stable(result: EvalResult) -> list[tuple[Any, ...]]:
        return [(c.case_id, c.answer, c.score, c.tokens, c.calls) for c in result.cases]

    assert stable(concurrent) == stable(sequential)
    assert concurrent.mean_score == 1.0  # the recap keeps every planted fact
    for case in concurrent.cases:
        assert case.calls == 1
        assert case.limit == 6000 - 1000
        assert case.model_ms is not None
        assert 0 <= case.model_ms <= case.latency_ms


def test_the_reader_answers_only_from_what_reached_it() -> None:
    question = fact_cases()[0].question
    assert reader_reply([HumanMessage(question)]).text == DONT_KNOW
    assert (
        reader_reply([HumanMessage("Ticket INC-4821."), HumanMessage(question)]).text == "INC-4821"
    )


def test_a_builder_case_over_budget_and_its_gate() -> None:
    text = "Support opens at 9:00 on weekdays and closes at 18:00."
    builder = ContextBuilder(
        ContextConfig(max_tokens=400, source_ratios={"rag": 1.0}, min_chunk_tokens=4),
        sources=[CallableSource("rag", lambda q: [text])],
    )
    model = ScriptedChatModel(respond=lambda m: AIMessage("9:00" if "9:00" in m[-1].text else "?"))
    gate = QualityGate(max_request_tokens=10, required_facts=["9:00"])
    result = evaluate(builder, [("When do you open?", "9:00")], "contains", model=model, gate=gate)
    case = result.cases[0]
    report = builder.build_report("When do you open?")
    assert case.tokens == builder.token_counter(report.text)
    assert case.limit == 400
    assert case.over_budget is False
    assert case.gate is not None
    assert case.gate["max_request_tokens"].passed is False  # the prompt is over 10 tokens
    assert case.gate["required_facts"].passed is True
    assert result.gate_failure_share == 1.0


def test_usage_gives_the_cache_read_share() -> None:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        tokens = 100 * len(messages[-1].text)
        usage = {
            "input_tokens": tokens,
            "output_tokens": 1,
            "total_tokens": tokens + 1,
            "input_token_details": {"cache_read": tokens // 4},
        }
        return AIMessage("ok", usage_metadata=usage)  # type: ignore[arg-type]

    assembler = WindowAssembler(window=3000)
    cases = [("a?", "ok"), ("bbbb?", "ok")]
    result = evaluate(assembler, cases, "exact", model=ScriptedChatModel(respond=reply))
    assert [c.reported for c in result.cases] == [200, 500]
    assert [c.cache_read for c in result.cases] == [50, 125]
    assert result.cache_read_share == pytest.approx((50 + 125) / (200 + 500))


# -- judges -----------------------------------------------------------------------------


def _answer(text: str) -> ScriptedChatModel:
    return ScriptedChatModel(respond=lambda _m: AIMessage(text))


@pytest.mark.parametrize(
    ("judge", "answer", "reference", "score"),
    [
        ("exact", " 42 ", "42", 1.0),
        ("exact", "42!", "42", 0.0),
        ("contains", "it is 42.", "42", 1.0),
        ("contains", "it is 42.", {"answer": "42"}, 1.0),  # a LangSmith outputs dict
        ("regex", "order A-17", r"[A-Z]-\d+", 1.0),
        (re.compile(r"\d+"), "no digits", None, 0.0),
    ],
)
def test_built_in_judges(judge: Any, answer: str, reference: Any, score: float) -> None:
    result = evaluate(
        WindowAssembler(window=2000), [("q?", reference)], judge, model=_answer(answer)
    )
    assert result.cases[0].score == score


def test_langsmith_and_openevals_shaped_judges_plug_in() -> None:
    seen: list[dict[str, Any]] = []

    def correct(inputs: dict[str, Any], outputs: dict[str, Any], reference_outputs: Any) -> bool:
        seen.append({"inputs": inputs, "outputs": outputs, "reference": reference_outputs})
        return outputs["answer"] == reference_outputs

    def openevals_like(*, inputs: Any = None, outputs: Any = None, **kwargs: Any) -> dict[str, Any]:
        return {"key": "similar", "score": 0.5, "comment": f"ref {kwargs['reference_outputs']}"}

    async def positional(a: Any, b: Any, c: Any) -> float:
        return 0.25 if b["answer"] == c else 0.0

    assembler = WindowAssembler(window=2000)
    model = _answer("yes")
    assert evaluate(assembler, [("q?", "yes")], correct, model=model).cases[0].score == 1.0
    assert seen == [
        {"inputs": {"question": "q?"}, "outputs": {"answer": "yes"}, "reference": "yes"}
    ]
    scored = evaluate(assembler, [("q?", "yes")], openevals_like, model=model).cases[0]
    assert (scored.key, scored.score, scored.comment) == ("similar", 0.5, "ref yes")
    assert evaluate(assembler, [("q?", "yes")], positional, model=model).cases[0].score == 0.25


def test_a_judge_returning_nonsense_fails_loudly() -> None:
    with pytest.raises(TypeError, match="returned 'good'"):
        evaluate(
            WindowAssembler(window=2000), [("q?", "a")], lambda i, o, r: "good", model=_answer("a")
        )


# -- JSON, cases, errors ----------------------------------------------------------------


def test_json_round_trip_and_baseline_from_a_file(tmp_path: Path) -> None:
    model = ScriptedChatModel(respond=_reader)
    first = evaluate(_assembler(0.5), CASES, "exact", model=model)
    path = tmp_path / "baseline.json"
    text = first.to_json(path)
    data = json.loads(path.read_text())
    assert data["kind"] == "contextkit.evaluate"
    assert data["figures"]["mean_score"] == first.mean_score
    again = EvalResult.from_json(path)
    assert again == first
    assert EvalResult.from_json(text) == first
    second = evaluate(_assembler(0.5), CASES, "exact", model=model, baseline=str(path))
    assert second.baseline == first
    second.assert_no_regression()


def test_case_shapes_and_bad_arguments() -> None:
    model = _answer("x")
    assembler = WindowAssembler(window=2000)
    example = {"inputs": {"question": "q?"}, "outputs": {"answer": "x"}, "id": "ex1"}
    result = evaluate(assembler, [example, ("q2?", "x")], "contains", model=model)
    assert [c.case_id for c in result.cases] == ["ex1", "2"]
    assert [c.score for c in result.cases] == [1.0, 1.0]
    with pytest.raises(ConfigError, match="at least one case"):
        evaluate(assembler, [], "exact", model=model)
    with pytest.raises(ConfigError, match="unique"):
        evaluate(
            assembler,
            [EvalCase("a", case_id="x"), EvalCase("b", case_id="x")],
            "exact",
            model=model,
        )
    with pytest.raises(ConfigError, match="needs model="):
        evaluate(assembler, [("q", "x")], "exact")
    with pytest.raises(ConfigError, match="max_concurrency"):
        evaluate(assembler, [("q", "x")], "exact", model=model, max_concurrency=0)
    with pytest.raises(ConfigError, match="judge must be one of"):
        evaluate(assembler, [("q", "x")], "fuzzy", model=model)
    with pytest.raises(ConfigError, match="no baseline"):
        result.compare()
    with pytest.raises(ConfigError, match="tolerance"):
        result.compare(result, tolerance=-1)


async def test_aevaluate_on_the_middleware() -> None:
    middleware = ContextKitMiddleware(window=3000, sources=[CallableSource("rag", _passages)])
    result = await aevaluate(
        middleware, CASES[:2], "exact", model=ScriptedChatModel(respond=_reader)
    )
    assert result.target == "ContextKitMiddleware"
    assert [c.score for c in result.cases] == [1.0, 1.0]


def test_an_agent_without_the_middleware_still_gets_answers() -> None:
    from langchain.agents import create_agent

    agent = create_agent(_answer("hello"))
    history = [HumanMessage("hi"), AIMessage("hey")]
    result = evaluate(agent, [EvalCase("q?", "hello", history)], "exact")
    case = result.cases[0]
    assert (case.score, case.calls, case.limit) == (1.0, 0, None)
    assert case.tokens == count_message_tokens([*history, HumanMessage("q?")])
    with pytest.raises(ConfigError, match="own model"):
        evaluate(agent, [("q?", "x")], "exact", model=_answer("x"))
