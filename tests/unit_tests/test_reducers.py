"""Trajectory reducers: what each paradigm keeps, and reducer nodes in real graphs."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_contextkit import (
    ConfigError,
    ContextWindowExceeded,
    count_message_tokens,
    count_tokens,
    find_message_problems,
)
from langchain_contextkit.agent.nodes import reducer_node
from langchain_contextkit.compaction.summarizers import summarizer_from_llm
from langchain_contextkit.reducers import REDUCERS
from langchain_contextkit.reducers.agent import reduce_agent
from langchain_contextkit.reducers.base import ReducerConfig, tokens_of
from langchain_contextkit.reducers.plan import reduce_plan
from langchain_contextkit.reducers.reflection import reduce_reflection
from langchain_contextkit.reducers.trajectories import (
    PlanStep,
    PlanTrajectory,
    ReflectionRound,
    ReflectionTrajectory,
)
from langchain_contextkit.testing import ScriptedChatModel

# -- shared ---------------------------------------------------------------------------


def test_registry_config_and_tokens_of() -> None:
    assert set(REDUCERS) == {"agent", "plan", "reflection"}
    assert REDUCERS["plan"] is reduce_plan
    assert ReducerConfig() == ReducerConfig(agent_keep_recent_steps=3, plan_keep_recent=3)
    assert tokens_of("hello world", "你好世界") == count_tokens("hello world") + 4
    assert tokens_of() == 0
    assert tokens_of("abc", counter=len) == 3
    with pytest.raises(ConfigError, match="plan_keep_recent"):
        ReducerConfig(plan_keep_recent=-1)
    with pytest.raises(ConfigError, match="unknown"):
        ReducerConfig.from_dict({"keep": 1})


@pytest.mark.parametrize("budget", [-1, 1.5, True])
async def test_bad_budget_is_refused(budget: Any) -> None:
    with pytest.raises(ConfigError, match="budget"):
        await reduce_agent([HumanMessage("hi")], budget)


# -- tool loop ------------------------------------------------------------------------


def tool_loop(
    steps: int, *, errors: tuple[int, ...] = (), parallel_every: int = 0
) -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        SystemMessage("You are a research agent."),
        HumanMessage("Find the cheapest supplier for part P-100 and report the price."),
    ]
    for step in range(steps):
        calls = [{"name": "quote", "args": {"supplier": f"S{step}"}, "id": f"q{step}"}]
        if parallel_every and step % parallel_every == 0:
            calls.append({"name": "stock", "args": {"supplier": f"S{step}"}, "id": f"s{step}"})
        messages.append(AIMessage(f"Checking supplier S{step}.", tool_calls=calls))
        for call in calls:
            if step in errors and call["name"] == "quote":
                messages.append(
                    ToolMessage(
                        f"Error: supplier S{step} API returned 503 for P-100.",
                        tool_call_id=call["id"],
                        status="error",
                    )
                )
            else:
                messages.append(
                    ToolMessage(
                        f"Supplier S{step} quotes {100 + step} EUR for P-100, delivery "
                        f"2025-04-{step % 28 + 1:02d}. " + "Terms: net 30, FOB. " * 6,
                        tool_call_id=call["id"],
                    )
                )
    return messages


async def test_reduce_agent_returns_input_when_it_fits() -> None:
    messages = tool_loop(2)
    out = await reduce_agent(messages, 10_000)
    assert out == messages


async def test_reduce_agent_keeps_task_recent_steps_and_errors() -> None:
    messages = tool_loop(12, errors=(4,), parallel_every=3)
    budget = count_message_tokens(messages) // 3
    out = await reduce_agent(messages, budget, keep_recent_steps=2)
    assert count_message_tokens(out) <= budget
    assert find_message_problems(out) == []
    assert out[0] is messages[0]
    assert out[1] is messages[1]  # the task
    assert isinstance(out[2], AIMessage)
    assert out[2].text.startswith("[Recap]")
    # The last two tool steps are a verbatim suffix.
    tail_start = max(
        i
        for i, m in enumerate(messages)
        if isinstance(m, AIMessage) and m.tool_calls and "S10" in m.text
    )
    assert out[-(len(messages) - tail_start) :] == messages[tail_start:]
    # The failed step stays visible with its call.
    errors = [m for m in out if isinstance(m, ToolMessage) and m.status == "error"]
    assert len(errors) == 1
    assert "S4" in errors[0].text


async def test_reduce_agent_unpins_errors_when_the_budget_cannot_hold_them() -> None:
    messages = tool_loop(10, errors=tuple(range(8)))
    must = count_message_tokens([*messages[:2], *messages[-2:]])
    out = await reduce_agent(messages, must + 60, keep_recent_steps=1)
    assert count_message_tokens(out) <= must + 60
    assert find_message_problems(out) == []


async def test_reduce_agent_raises_when_the_must_keep_part_does_not_fit() -> None:
    messages = tool_loop(6)
    with pytest.raises(ContextWindowExceeded) as info:
        await reduce_agent(messages, 50, keep_recent_steps=3)
    assert info.value.budget == 50
    assert info.value.required > 50


async def test_reduce_agent_with_llm_summariser_and_fallback() -> None:
    messages = tool_loop(10)
    budget = count_message_tokens(messages) // 2
    llm = ScriptedChatModel(responses=["Suppliers S0-S7 quoted 100-107 EUR; S0 is cheapest."])
    out = await reduce_agent(messages, budget, summarizer_from_llm(llm), keep_recent_steps=2)
    assert "S0 is cheapest" in out[2].text
    assert len(llm.requests) == 1

    def broken(text: str, instruction: str) -> str:
        raise RuntimeError(text[:10])

    out = await reduce_agent(messages, budget, broken, keep_recent_steps=2)
    assert "100 EUR" in out[2].text  # the extractive fallback kept the numbers


async def test_reduce_agent_without_task_puts_summary_in_a_system_message() -> None:
    messages = [SystemMessage("sys"), *tool_loop(8)[2:]]
    out = await reduce_agent(messages, count_message_tokens(messages) // 2, keep_recent_steps=2)
    assert isinstance(out[1], SystemMessage)
    assert find_message_problems(out) == []


# -- plan -----------------------------------------------------------------------------


def plan_with(steps: int, *, done: int | None = None) -> PlanTrajectory:
    finished = steps if done is None else done
    return PlanTrajectory(
        goal="Migrate the billing database",
        steps=tuple(
            PlanStep(
                number=n,
                description=f"Migrate shard {n}",
                status="done" if n <= finished else "pending",
                result=(
                    f"Shard {n} moved {n * 1000} rows on 2025-05-{n:02d}; ticket MIG-{700 + n}. "
                    "We concluded the indexes are intact. " + "Checks passed. " * 25
                )
                if n <= finished
                else None,
            )
            for n in range(1, steps + 1)
        ),
    )


def skeleton_tokens(plan: PlanTrajectory, keep_recent: int) -> int:
    """Tokens of the plan with all but the last `keep_recent` results folded away."""
    with_result = [i for i, s in enumerate(plan.steps) if s.result is not None]
    fold = set(with_result[: len(with_result) - keep_recent])
    steps = tuple(
        s.model_copy(update={"result": None, "summarized": True}) if i in fold else s
        for i, s in enumerate(plan.steps)
    )
    return count_tokens(plan.model_copy(update={"steps": steps}).render())


async def test_reduce_plan_keeps_plan_and_every_fact() -> None:
    plan = plan_with(12, done=10)
    budget = skeleton_tokens(plan, 3) + 250
    assert budget < count_tokens(plan.render()) * 2 // 3
    out = await reduce_plan(plan, budget, keep_recent=3)
    text = out.render()
    assert count_tokens(text) <= budget
    assert [(s.number, s.description, s.status) for s in out.steps] == [
        (s.number, s.description, s.status) for s in plan.steps
    ]
    assert [s.result for s in out.steps[7:10]] == [s.result for s in plan.steps[7:10]]
    assert all(s.summarized for s in out.steps[:7])
    for n in range(1, 8):
        assert f"{n * 1000}" in text
        assert f"2025-05-{n:02d}" in text
        assert f"MIG-{700 + n}" in text


async def test_reduce_plan_reinserts_what_the_summariser_dropped() -> None:
    plan = plan_with(8)
    budget = skeleton_tokens(plan, 2) + 300

    async def vague(text: str, instruction: str) -> str:
        return "Several shards were migrated without trouble."

    out = await reduce_plan(plan, budget, vague, keep_recent=2)
    assert out.summary == "Several shards were migrated without trouble."
    facts = "; ".join(out.key_facts)
    for n in range(1, 7):
        assert f"step {n}:" in facts
        assert f"MIG-{700 + n}" in facts
        assert f"2025-05-{n:02d}" in facts
    assert "We concluded the indexes are intact." in facts
    assert count_tokens(out.render()) <= budget


async def test_reduce_plan_extends_its_summary_on_the_next_reduction() -> None:
    seen: list[str] = []

    async def summarize(text: str, instruction: str) -> str:
        seen.append(text)
        return f"Summary {len(seen)}: shards 1000 2000 3000 rows, MIG-701 MIG-702 MIG-703 done."

    first = await reduce_plan(
        plan_with(6), skeleton_tokens(plan_with(6), 2) + 150, summarize, keep_recent=2
    )
    grown = first.model_copy(update={"steps": first.steps + plan_with(12).steps[6:]})
    second = await reduce_plan(grown, skeleton_tokens(grown, 2) + 250, summarize, keep_recent=2)
    assert seen[1].startswith("PREVIOUS SUMMARY:\nSummary 1")
    assert "Shard 1 moved" not in seen[1]
    assert [s.number for s in second.steps] == list(range(1, 13))
    # Facts of the first round (kept in summary 1 or key facts) are still there.
    text = second.render()
    for n in range(1, 10):
        assert f"MIG-{700 + n}" in text


async def test_reduce_plan_raises_when_the_plan_itself_does_not_fit() -> None:
    plan = plan_with(10)
    with pytest.raises(ContextWindowExceeded):
        await reduce_plan(plan, 40)


def test_plan_model_validates() -> None:
    with pytest.raises(ValueError, match="unique"):
        PlanTrajectory(
            goal="g",
            steps=(PlanStep(number=1, description="a"), PlanStep(number=1, description="b")),
        )
    with pytest.raises(ValueError, match="status"):
        PlanStep(number=1, description="a", status="finished")  # type: ignore[arg-type]


# -- reflection -----------------------------------------------------------------------


def reflection_loop(rounds: int) -> ReflectionTrajectory:
    critiques = [
        "Too long.",
        "Cite the source.",
        "too long!",
        "Mention the 2024 figures.",
        "Cite the source",
    ]
    return ReflectionTrajectory(
        task="Write the product announcement",
        rounds=tuple(
            ReflectionRound(
                draft=f"Draft {r}: " + "Our product is great. " * 20,
                critique=(critiques[r % len(critiques)], f"Point unique to round {r}."),
            )
            for r in range(rounds)
        ),
    )


async def test_reduce_reflection_keeps_latest_draft_and_every_distinct_point() -> None:
    loop = reflection_loop(8)
    out = await reduce_reflection(loop, count_tokens(loop.render()) // 3)
    assert len(out.rounds) == 1
    assert out.rounds[0].draft == loop.rounds[-1].draft
    assert out.round_count == 8
    points = out.all_points()
    for r in range(8):
        assert f"Point unique to round {r}." in points
    assert "Too long." in points
    assert "too long!" not in points  # a near-duplicate, merged
    assert sum(p.startswith("Cite the source") for p in points) == 1
    assert "Draft 6" not in out.render()


async def test_reduce_reflection_merges_paraphrases_with_embeddings() -> None:
    class Paraphrases(DeterministicFakeEmbedding):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            # "shorter" and "too long" mean the same here.
            return [self.embed_query("LEN" if "long" in t or "shorter" in t else t) for t in texts]

    loop = ReflectionTrajectory(
        task="t",
        rounds=(
            ReflectionRound(draft="x " * 200, critique=("It is too long.",)),
            ReflectionRound(draft="y " * 200, critique=("Make it shorter.",)),
            ReflectionRound(draft="z"),
        ),
    )
    plain = await reduce_reflection(loop, 60)
    merged = await reduce_reflection(loop, 60, embeddings=Paraphrases(size=16))
    assert len(plain.all_points()) == 2
    assert merged.all_points() == ["It is too long."]


async def test_reduce_reflection_raises_when_latest_draft_does_not_fit() -> None:
    loop = ReflectionTrajectory(task="t", rounds=(ReflectionRound(draft="word " * 500),))
    with pytest.raises(ContextWindowExceeded):
        await reduce_reflection(loop, 50)


# -- nodes in real graphs ---------------------------------------------------------------


def test_reducer_node_needs_a_budget_or_a_window() -> None:
    with pytest.raises(ConfigError, match="budget"):
        reducer_node("agent")
    with pytest.raises(ConfigError, match="paradigm"):
        reducer_node("swarm", budget=10)  # type: ignore[arg-type]


class LoopState(MessagesState):
    llm_input_messages: list[BaseMessage]


def test_tool_loop_graph_reduces_its_trajectory_every_step() -> None:
    calls = iter(range(1000))

    def agent(messages: list[BaseMessage]) -> AIMessage:
        step = next(calls)
        if step >= 20:
            return AIMessage("Final: S0 is cheapest at 100 EUR.")
        call = {"name": "quote", "args": {"supplier": f"S{step}"}, "id": f"q{step}"}
        return AIMessage(f"Checking supplier S{step}.", tool_calls=[call])

    model = ScriptedChatModel(
        respond=agent, profile={"max_input_tokens": 1500, "max_output_tokens": 300}
    )
    views: list[list[BaseMessage]] = []

    def call_model(state: LoopState) -> dict[str, Any]:
        views.append(state["llm_input_messages"])
        return {"messages": [model.invoke(state["llm_input_messages"])]}

    def run_tools(state: LoopState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {
            "messages": [
                ToolMessage(
                    f"Quote {len(state['messages'])}: {90 + len(state['messages'])} EUR. "
                    + "Fine print. " * 15,
                    tool_call_id=c["id"],
                )
                for c in last.tool_calls
            ]
        }

    builder = StateGraph(LoopState)
    builder.add_node(
        "reduce",
        reducer_node("agent", model=model, config=ReducerConfig(agent_keep_recent_steps=2)),
    )
    builder.add_node("model", call_model)
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "reduce")
    builder.add_edge("reduce", "model")
    builder.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].tool_calls else END
    )
    builder.add_edge("tools", "reduce")
    graph = builder.compile(checkpointer=InMemorySaver())
    state = graph.invoke(
        {"messages": [HumanMessage("Find the cheapest supplier for P-100.")]},
        {"configurable": {"thread_id": "loop"}, "recursion_limit": 100},
    )
    assert state["messages"][-1].text.startswith("Final")
    assert sum(isinstance(m, ToolMessage) for m in state["messages"]) == 20  # full trajectory
    budget = 1500 - 300
    assert all(count_message_tokens(v) <= budget for v in views)
    reduced = [v for v in views if len(v) > 1 and v[1].text.startswith("[Recap]")]
    assert len(reduced) >= 5  # reduced again and again as the loop ran
    assert all(find_message_problems(v) == [] for v in views)


class PlanState(TypedDict):
    plan: dict[str, Any]
    plan_view: str
    views: Annotated[list[str], operator.add]


def test_plan_execute_graph() -> None:
    executor = ScriptedChatModel(
        respond=lambda messages: (
            f"Result: moved {len(messages[0].text)} rows on 2025-06-11, "
            f"ticket MIG-{len(messages[0].text) % 997}. " + "All checks passed. " * 10
        )
    )

    def execute(state: PlanState) -> dict[str, Any]:
        plan = PlanTrajectory.model_validate(state["plan"])
        step = next(s for s in plan.steps if s.status == "pending")
        result = executor.invoke(state["plan_view"] + f"\nExecute step {step.number}.").text
        steps = tuple(
            s.model_copy(update={"status": "done", "result": result})
            if s.number == step.number
            else s
            for s in plan.steps
        )
        return {
            "plan": plan.model_copy(update={"steps": steps}).model_dump(),
            "views": [state["plan_view"]],
        }

    def route(state: PlanState) -> str:
        return "reduce" if any(s["status"] == "pending" for s in state["plan"]["steps"]) else END

    builder = StateGraph(PlanState)
    builder.add_node(
        "reduce", reducer_node("plan", budget=700, config=ReducerConfig(plan_keep_recent=2))
    )
    builder.add_node("execute", execute)
    builder.add_edge(START, "reduce")
    builder.add_edge("reduce", "execute")
    builder.add_conditional_edges("execute", route)
    plan = PlanTrajectory(
        goal="Migrate all shards",
        steps=tuple(PlanStep(number=n, description=f"Migrate shard {n}") for n in range(1, 16)),
    )
    state = builder.compile().invoke(
        {"plan": plan.model_dump(), "views": []}, {"recursion_limit": 100}
    )
    final = PlanTrajectory.model_validate(state["plan"])
    assert all(s.status == "done" and s.result for s in final.steps)  # full trajectory kept
    assert all(count_tokens(v) <= 700 for v in state["views"])
    assert sum("summarised below" in v for v in state["views"]) >= 5
    last = state["views"][-1]
    for n in range(1, 16):
        assert f"{n}. [" in last  # every step number and status visible


class ReflectState(TypedDict):
    reflection: dict[str, Any]
    reflection_view: str
    views: Annotated[list[str], operator.add]


async def test_reflection_graph_async() -> None:
    async def draft_and_critique(state: ReflectState) -> dict[str, Any]:
        loop = ReflectionTrajectory.model_validate(state["reflection"])
        r = loop.round_count
        new = ReflectionRound(
            draft=f"Draft {r}: " + "The launch is on Monday. " * 15,
            critique=(f"Round {r}: add the price.", "Too vague." if r % 2 else "too vague"),
        )
        updated = loop.model_copy(update={"rounds": (*loop.rounds, new)})
        return {"reflection": updated.model_dump(), "views": [state["reflection_view"]]}

    builder = StateGraph(ReflectState)
    builder.add_node("reduce", reducer_node("reflection", budget=300))
    builder.add_node("draft", draft_and_critique)
    builder.add_edge(START, "reduce")
    builder.add_edge("reduce", "draft")
    builder.add_conditional_edges(
        "draft", lambda s: END if len(s["reflection"]["rounds"]) >= 12 else "reduce"
    )
    start = ReflectionTrajectory(
        task="Announce the launch", rounds=(ReflectionRound(draft="First idea."),)
    )
    state = await builder.compile().ainvoke(
        {"reflection": start.model_dump(), "views": []}, {"recursion_limit": 100}
    )
    assert len(state["reflection"]["rounds"]) == 12  # full trajectory kept
    last = state["views"][-1]
    assert count_tokens(last) <= 300
    for r in range(1, 11):
        assert f"Round {r}: add the price." in last
    assert last.count("ague") == 1  # "Too vague." and "too vague" merged
    assert sum("Latest draft" in v and "Draft (round" not in v for v in state["views"]) >= 5
