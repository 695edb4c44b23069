"""LangGraph nodes: history compaction and per-paradigm trajectory reducers.

`compaction_node` drops into any `StateGraph` whose state has a `messages` channel (for
example `MessagesState`). By default it is non-destructive: the full history stays in
state, and the node writes the compacted view the model should see to another key
(`llm_input_messages`) together with the running summary, so a checkpointer persists
both and the next turn extends the summary. `mode="replace"` rewrites `messages`
instead, and only after a summary succeeded.

`reducer_node` reduces an agent's own trajectory (a tool loop's messages, a plan, a
reflection loop) to the run's trajectory budget from the window ledger, and writes the
view for the next model call beside the full trajectory.

The three node factories share their budget helpers, so they live together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

from langchain_core.messages import AnyMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import MessagesState
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from typing_extensions import NotRequired

from langchain_contextkit.agent.ledger import next_call_number, with_ledger
from langchain_contextkit.agent.middleware import GateLike, OnGateFail, check_gate_options, gated
from langchain_contextkit.agent.plan import WindowAssembler, WindowAssembly, handed_down
from langchain_contextkit.agent.state import CALIBRATION_KEY, LEDGER_KEY, SUMMARY_KEY, SharedRecaps
from langchain_contextkit.agent.window_budget import (
    Calibration,
    WindowBudget,
    WindowBudgetConfig,
    learn_from_history,
)
from langchain_contextkit.compaction.compactor import (
    HistoryCompactor,
    RunningSummary,
)
from langchain_contextkit.errors import ConfigError, check_count
from langchain_contextkit.reducers.agent import _reduce_agent
from langchain_contextkit.reducers.base import (
    ReducerConfig,
    SummarizerLike,
    arun_steps,
    run_steps,
)
from langchain_contextkit.reducers.plan import _reduce_plan
from langchain_contextkit.reducers.reflection import _reduce_reflection
from langchain_contextkit.reducers.trajectories import PlanTrajectory, ReflectionTrajectory
from langchain_contextkit.tokens.count import (
    TokenCounter,
    count_fixed_tokens,
    count_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Generator, Mapping, Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig
    from langgraph.store.base import BaseStore

    from langchain_contextkit.agent.offload_stores import OffloadStore
    from langchain_contextkit.agent.tool_results import OffloadConfig
    from langchain_contextkit.notes import NoteStore
    from langchain_contextkit.retrieval.budget import ContextConfig
    from langchain_contextkit.retrieval.sources.base import ContextSource

__all__ = [
    "CompactionGraphState",
    "CompactionMode",
    "ContextGraphState",
    "Paradigm",
    "compaction_node",
    "context_node",
    "reducer_node",
]

CompactionMode = Literal["view", "replace"]
T = TypeVar("T")


class CompactionGraphState(MessagesState):
    """`MessagesState` plus the keys the compaction node writes (default names)."""

    llm_input_messages: NotRequired[list[AnyMessage]]
    contextkit_summary: NotRequired[dict[str, Any] | None]


def compaction_node(
    compactor: HistoryCompactor,
    *,
    mode: CompactionMode = "view",
    messages_key: str = "messages",
    output_key: str = "llm_input_messages",
    summary_key: str = SUMMARY_KEY,
    model: BaseChatModel | None = None,
    tools: Sequence[Any] = (),
    system_prompt: str | None = None,
    budget_config: WindowBudgetConfig | None = None,
    recap_store: BaseStore | None = None,
) -> RunnableLambda[Mapping[str, Any], dict[str, Any]]:
    """Build a compaction node (sync and async) for a `StateGraph`.

    Args:
        compactor: Does the compaction.
        mode: ``"view"`` (default) keeps `messages` whole and writes the compacted view to
            `output_key`; ``"replace"`` rewrites `messages` with `RemoveMessage`s after a
            successful summary (the recap then lives in `messages`).
        messages_key: The state key holding the conversation.
        output_key: Where ``"view"`` mode writes what the model should see.
        summary_key: Where ``"view"`` mode keeps the running summary (a dict).
        model: The chat model that will read the messages: its profile's window turns the
            trigger into a hard ceiling (window minus output reserve).
        tools: The tools bound to that model: their schemas count towards the trigger.
        system_prompt: A system prompt sent beside the messages (not in them): counted too.
        budget_config: The window ledger's knobs (output reserve).
        recap_store: Where recaps are shared by all workers (`RecapStore`); default the
            graph's own store (`compile(store=...)`) when it has one.

    Returns:
        A runnable node: ``builder.add_node("compact", compaction_node(compactor))``.

    Raises:
        ConfigError: On an unknown `mode`.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph

        from langchain_contextkit.compaction.compactor import HistoryCompactor
        from langchain_contextkit.agent.nodes import CompactionGraphState, compaction_node


        def respond(state: CompactionGraphState) -> dict:
            seen = len(state["llm_input_messages"])
            return {"messages": [AIMessage(f"I saw {seen} messages.")]}


        builder = StateGraph(CompactionGraphState)
        builder.add_node(
            "compact", compaction_node(HistoryCompactor(keep_recent=2, trigger_tokens=40))
        )
        builder.add_node("respond", respond)
        builder.add_edge(START, "compact")
        builder.add_edge("compact", "respond")
        graph = builder.compile(checkpointer=InMemorySaver())

        config = {"configurable": {"thread_id": "1"}}
        for turn in range(4):
            text = f"Ticket T-{turn}: printer on floor {turn} is offline again, please check."
            state = graph.invoke({"messages": [HumanMessage(text)]}, config)
        print(len(state["messages"]), len(state["llm_input_messages"]))
        # 8 4
        ```
    """
    if mode not in ("view", "replace"):
        msg = f"mode must be 'view' or 'replace', got {mode!r}."
        raise ConfigError(msg)
    assembler = WindowAssembler(compactor=compactor, budget_config=budget_config)
    system = SystemMessage(system_prompt) if system_prompt else None
    recaps = SharedRecaps(recap_store)

    def inputs(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        budget = assembler.budget_for(
            model=model, system_message=system, tools=tools, required=False
        )
        summary = RunningSummary.from_state(state.get(summary_key)) if mode == "view" else None
        return {
            "system_message": system,
            "tools": tools,
            "model": model,
            "budget": budget,
            "summary": summary,
            "reuse_recaps": not _in_thread(config),
            "recaps": recaps.for_node(config),
        }

    def update(assembly: WindowAssembly) -> dict[str, Any]:
        result = assembly.compaction
        if mode == "view":
            summary = None if assembly.summary is None else assembly.summary.to_dict()
            return {output_key: assembly.messages, summary_key: summary}
        if not result.compacted:
            return {}
        return {messages_key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *assembly.messages]}

    def compact(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return update(assembler.assemble(state[messages_key], **inputs(state, config)))

    async def acompact(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return update(await assembler.aassemble(state[messages_key], **inputs(state, config)))

    return RunnableLambda(compact, afunc=acompact, name="compact_history")


def _in_thread(config: RunnableConfig | None) -> bool:
    """Whether a node runs in a thread (a ``thread_id``): its state is its only memory."""
    configurable = (config or {}).get("configurable") or {}
    return configurable.get("thread_id") is not None


def _run_budget(
    model: BaseChatModel | None,
    tools: Sequence[Any],
    system_prompt: str | None,
    budget_config: WindowBudgetConfig | None,
    counter: TokenCounter,
) -> tuple[WindowBudget | None, int]:
    """A node's window ledger, and the tokens sent beside the messages.

    The ledger is None without a model that states its window.
    """
    system_message = SystemMessage(system_prompt) if system_prompt else None
    system, tool_tokens = count_fixed_tokens(system_message, tools, counter)
    budget = WindowBudget.for_run(
        llm=model,
        cfg=budget_config or WindowBudgetConfig(),
        system_tokens=system,
        tool_tokens=tool_tokens,
    )
    return budget, system + tool_tokens


Paradigm = Literal["agent", "plan", "reflection"]

_DEFAULT_STATE_KEYS: dict[str, str] = {
    "agent": "messages",
    "plan": "plan",
    "reflection": "reflection",
}
_DEFAULT_OUTPUT_KEYS: dict[str, str] = {
    "agent": "llm_input_messages",
    "plan": "plan_view",
    "reflection": "reflection_view",
}


def reducer_node(
    paradigm: Paradigm,
    *,
    state_key: str | None = None,
    output_key: str | None = None,
    budget: int | None = None,
    model: BaseChatModel | None = None,
    tools: Sequence[Any] = (),
    system_prompt: str | None = None,
    rag_in_scope: bool = False,
    budget_config: WindowBudgetConfig | None = None,
    summarize: SummarizerLike | None = None,
    token_counter: TokenCounter | None = None,
    config: ReducerConfig | None = None,
) -> RunnableLambda[Mapping[str, Any], dict[str, Any]]:
    """Build a trajectory-reducer node (sync and async) for one paradigm.

    The node reads the full trajectory from `state_key`, reduces it to the run's
    trajectory budget, and writes the view for the next model call to `output_key`; the
    full trajectory stays in state. For ``"agent"`` the view is a message list; for
    ``"plan"`` and ``"reflection"`` it is the reduced trajectory's rendered text (the
    state may hold the trajectory as a model or as its dict).

    The budget is `budget` when given; otherwise the model's window ledger:
    `WindowBudget.for_run(llm=model, ...)` with the measured system prompt and tool
    schemas, then `trajectory_budget(rag_in_scope=...)`.

    Args:
        paradigm: ``"agent"`` (tool loop), ``"plan"`` or ``"reflection"``.
        state_key: Where the trajectory is (default ``messages`` / ``plan`` /
            ``reflection``).
        output_key: Where the view goes (default ``llm_input_messages`` / ``plan_view`` /
            ``reflection_view``).
        budget: A fixed trajectory budget in tokens.
        model: The model that reads the view: its profile gives the window.
        tools: The tools bound to it (their schemas are deducted).
        system_prompt: A system prompt sent beside the trajectory (deducted).
        rag_in_scope: True when the trajectory already contains the retrieval block;
            False when the block is added beside it and keeps its own share.
        budget_config: The window ledger's knobs.
        summarize: The summariser (async or sync callback, or object); extractive when
            None.
        token_counter: Counts the tokens of one string (`count_tokens` by default), as
            in every other node and middleware.
        config: How much recent text stays verbatim (`ReducerConfig`).

    Returns:
        A runnable node.

    Raises:
        ConfigError: On an unknown paradigm, or when neither `budget` nor a model with a
            known window is given.

    Example:
        ```python
        from langchain_contextkit.agent.nodes import reducer_node
        from langchain_contextkit.reducers.trajectories import ReflectionRound

        node = reducer_node("reflection", budget=40)
        state = {
            "reflection": {
                "task": "Name the capital of Australia",
                "rounds": [
                    ReflectionRound(draft="Sydney. " * 30, critique=["Wrong city."]),
                    ReflectionRound(draft="Canberra."),
                ],
            }
        }
        print(node.invoke(state)["reflection_view"])
        # Task: Name the capital of Australia
        # Critique points so far:
        # - Wrong city.
        # Latest draft (round 2):
        # Canberra.
        ```
    """
    if paradigm not in _DEFAULT_STATE_KEYS:
        msg = f"paradigm must be one of {sorted(_DEFAULT_STATE_KEYS)}, got {paradigm!r}."
        raise ConfigError(msg)
    counter = token_counter or count_tokens
    source = state_key or _DEFAULT_STATE_KEYS[paradigm]
    target = output_key or _DEFAULT_OUTPUT_KEYS[paradigm]
    limit = _trajectory_budget(
        budget,
        model=model,
        tools=tools,
        system_prompt=system_prompt,
        rag_in_scope=rag_in_scope,
        budget_config=budget_config,
        counter=counter,
    )
    knobs = config or ReducerConfig()

    def reduction(state: Mapping[str, Any]) -> Generator[Any, Any, dict[str, Any]]:
        value = state[source]
        if paradigm == "agent":
            view: Any = yield from _reduce_agent(
                value,
                limit,
                summarize,
                counter=counter,
                keep_recent_steps=knobs.agent_keep_recent_steps,
                fidelity=knobs.fidelity,
            )
        elif paradigm == "plan":
            plan = yield from _reduce_plan(
                PlanTrajectory.model_validate(value),
                limit,
                summarize,
                counter=counter,
                keep_recent=knobs.plan_keep_recent,
                fidelity=knobs.fidelity,
            )
            view = plan.render()
        else:
            loop = yield from _reduce_reflection(
                ReflectionTrajectory.model_validate(value), limit, summarize, counter=counter
            )
            view = loop.render()
        return {target: view}

    def reduce_sync(state: Mapping[str, Any]) -> dict[str, Any]:
        return run_steps(reduction(state))

    async def reduce(state: Mapping[str, Any]) -> dict[str, Any]:
        return await arun_steps(reduction(state))

    return RunnableLambda(reduce_sync, afunc=reduce, name=f"reduce_{paradigm}")


def _trajectory_budget(
    budget: int | None,
    *,
    model: BaseChatModel | None,
    tools: Sequence[Any],
    system_prompt: str | None,
    rag_in_scope: bool,
    budget_config: WindowBudgetConfig | None,
    counter: TokenCounter,
) -> int:
    if budget is not None:
        check_count("budget", budget, minimum=0)
        return budget
    ledger, _ = _run_budget(model, tools, system_prompt, budget_config, counter)
    if ledger is None:
        msg = (
            "reducer_node needs a budget: pass budget=... or a model whose profile states "
            "its window (max_input_tokens)."
        )
        raise ConfigError(msg)
    return ledger.trajectory_budget(rag_in_scope=rag_in_scope)


class ContextGraphState(MessagesState):
    """`MessagesState` plus the keys `context_node` writes (default names)."""

    llm_input_messages: NotRequired[list[AnyMessage]]
    contextkit_summary: NotRequired[dict[str, Any] | None]
    contextkit_ledger: NotRequired[list[dict[str, Any]]]
    contextkit_calibration: NotRequired[dict[str, Any] | None]


def context_node(
    *,
    model: BaseChatModel | None = None,
    tools: Sequence[Any] = (),
    system_prompt: str | None = None,
    window: int | None = None,
    compactor: HistoryCompactor | None = None,
    sources: Sequence[ContextSource] = (),
    note_store: NoteStore | None = None,
    context_config: ContextConfig | None = None,
    budget_config: WindowBudgetConfig | None = None,
    reduce_trajectory: bool = True,
    keep_recent_steps: int = 3,
    ledger_size: int = 50,
    messages_key: str = "messages",
    output_key: str = "llm_input_messages",
    summary_key: str = SUMMARY_KEY,
    ledger_key: str = LEDGER_KEY,
    calibration_key: str = CALIBRATION_KEY,
    token_counter: TokenCounter | None = None,
    offload: OffloadConfig | OffloadStore | None = None,
    quality_gate: GateLike | None = None,
    on_gate_fail: OnGateFail = "log",
    assembler: WindowAssembler | None = None,
    recap_store: BaseStore | None = None,
) -> RunnableLambda[Mapping[str, Any], dict[str, Any]]:
    """`ContextKitMiddleware`'s behaviour as a node for your own `StateGraph`.

    Put it before the model node: it writes the full request for the next model call
    (system prompt first) to `output_key`, extends the running summary, and appends the
    call's `CallLedger` to `ledger_key` (the last `ledger_size`); `messages` stays whole.

    Args:
        model: The chat model that will read the request (its profile gives the window).
        tools: The tools bound to it (their schemas are measured).
        system_prompt: The system prompt, placed first in the request.
        window: The window, when the model's profile does not state it.
        compactor: Compacts old turns (default extractive).
        sources: Retrieval sources for the block.
        note_store: When given, a `NoteSource` over it joins the sources.
        context_config: MMR and per-source ratios of the block.
        budget_config: The ledger's knobs.
        reduce_trajectory: Reduce an overlong tool loop of the current turn.
        keep_recent_steps: Tool steps of the current turn kept verbatim.
        ledger_size: How many ledgers state keeps.
        messages_key: Where the conversation is.
        output_key: Where the request goes.
        summary_key: Where the running summary is kept.
        ledger_key: Where the ledgers go.
        calibration_key: Where the calibration is kept: the usage the model reports
            (on the AI message it returns) corrects the next call's ledger.
        token_counter: The one counter of every part of the ledger (default the
            compactor's, else `count_tokens`).
        offload: Large tool results shown as head + tail + a pointer (see
            `ContextKitMiddleware`); the reader tool must be among `tools`. Default off.
        quality_gate: A `QualityGate` checked on every request the node writes; its
            result goes into the call's ledger (``gate``).
        on_gate_fail: ``"log"`` (default), ``"warn"`` or ``"raise"``
            (`ContextQualityError`: the node writes nothing, so no model sees it).
        assembler: A built `WindowAssembler` (shared with a middleware, say) instead of
            its ten options.
        recap_store: Where recaps are shared by all workers (`RecapStore`); default the
            graph's own store (`compile(store=...)`) when it has one.

    Returns:
        A runnable node (sync and async).

    Raises:
        ConfigError: When `ledger_size` < 1, or `on_gate_fail` is not one of the three.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.graph import START, StateGraph

        from langchain_contextkit.agent.nodes import ContextGraphState, context_node
        from langchain_contextkit.testing import ScriptedChatModel

        model = ScriptedChatModel(responses=["Hi!"], profile={"max_input_tokens": 1000})


        def call_model(state: ContextGraphState) -> dict:
            return {"messages": [model.invoke(state["llm_input_messages"])]}


        builder = StateGraph(ContextGraphState)
        builder.add_node("context", context_node(model=model, system_prompt="Be kind."))
        builder.add_node("model", call_model)
        builder.add_edge(START, "context")
        builder.add_edge("context", "model")
        state = builder.compile().invoke({"messages": [HumanMessage("Hello")]})
        print([m.type for m in model.requests[0]], state["contextkit_ledger"][0]["window"])
        # ['system', 'human'] 1000
        ```
    """
    check_count("ledger_size", ledger_size, minimum=1)
    check_gate_options(quality_gate, on_gate_fail)
    options = {
        "window": window,
        "compactor": compactor,
        "sources": sources,
        "note_store": note_store,
        "context_config": context_config,
        "budget_config": budget_config,
        "reduce_trajectory": reduce_trajectory,
        "keep_recent_steps": keep_recent_steps,
        "token_counter": token_counter,
        "offload": offload,
    }
    assembler = handed_down(assembler, options)
    system = SystemMessage(system_prompt) if system_prompt else None
    recaps = SharedRecaps(recap_store)

    def learnt(state: Mapping[str, Any]) -> tuple[Calibration, list[Any]]:
        calibration = Calibration.from_state(state.get(calibration_key))
        if model is not None:  # a window a provider stated holds for its own model only
            calibration = calibration.for_model(model)
        return learn_from_history(calibration, state.get(ledger_key) or [], state[messages_key])

    def inputs(
        state: Mapping[str, Any],
        calibration: Calibration,
        ledgers: list[Any],
        config: RunnableConfig,
    ) -> dict[str, Any]:
        return {
            "reuse_recaps": not _in_thread(config),
            "recaps": recaps.for_node(config),
            "system_message": system,
            "tools": tools,
            "model": model,
            "summary": RunningSummary.from_state(state.get(summary_key)),
            "call": next_call_number(ledgers),
            "calibration": calibration,
        }

    def update(
        assembly: WindowAssembly, calibration: Calibration, ledgers: list[Any]
    ) -> dict[str, Any]:
        assembly = gated(assembly, quality_gate, on_gate_fail, system=system)
        summary = assembly.summary.to_dict() if assembly.summary is not None else None
        return {
            output_key: [*([system] if system else []), *assembly.messages],
            summary_key: summary,
            ledger_key: with_ledger(ledgers, assembly.ledger, ledger_size),
            calibration_key: calibration.to_dict(),
        }

    def assemble(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        calibration, ledgers = learnt(state)
        assembly = assembler.assemble(
            state[messages_key], **inputs(state, calibration, ledgers, config)
        )
        return update(assembly, calibration, ledgers)

    async def aassemble(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        calibration, ledgers = learnt(state)
        assembly = await assembler.aassemble(
            state[messages_key], **inputs(state, calibration, ledgers, config)
        )
        return update(assembly, calibration, ledgers)

    return RunnableLambda(assemble, afunc=aassemble, name="assemble_context")
