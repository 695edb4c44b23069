"""What a call finds around it: the state keys and schema, who it serves, its stores.

One module names every key, so the middleware, the graph nodes and the tests agree; the
agent's (or graph's) LangGraph store is found here too, and the `RecapStore` over it that
shares recaps between workers (`SharedRecaps`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from langchain.agents.middleware.types import (
    AgentState,
    ModelRequest,
    OmitFromInput,
    PrivateStateAttr,
)
from langchain_core.runnables import ensure_config
from langgraph.store.base import BaseStore
from typing_extensions import NotRequired

from langchain_contextkit.agent.window_budget import CALIBRATION_KEY
from langchain_contextkit.compaction.recap_store import RecapStore
from langchain_contextkit.retrieval.sources.base import Scope

if TYPE_CHECKING:
    from langchain_core.callbacks import Callbacks
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "CALIBRATION_KEY",
    "LEDGER_KEY",
    "MIDDLEWARE_NAME",
    "SUMMARY_KEY",
    "ContextKitState",
    "call_scope",
    "run_callbacks",
    "runs_in_thread",
    "thread_id",
]


SUMMARY_KEY = "contextkit_summary"
"""The agent-state key that holds the running summary (a `RunningSummary.to_dict()`)."""


MIDDLEWARE_NAME = "contextkit"
"""The name both middlewares go by in an agent (`AgentMiddleware.name`).

Sharing it is deliberate: each rewrites the request the model sees, so stacking the two
(or two of either) in one agent would compact twice; `create_agent` refuses duplicate
names when the agent is built ("Please remove duplicate middleware instances")."""


LEDGER_KEY = "contextkit_ledger"
"""The agent-state key that holds the recent calls' ledgers (`CallLedger.to_dict()`)."""


class ContextKitState(AgentState[Any]):
    """Agent state with the running summary, the per-call ledgers and the calibration."""

    contextkit_summary: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    contextkit_ledger: NotRequired[Annotated[list[dict[str, Any]], OmitFromInput]]
    contextkit_calibration: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


def runs_in_thread(request: ModelRequest[Any]) -> bool:
    """Whether the call runs in a thread (a ``thread_id``, as a checkpointer needs).

    Such a call's only memory is the thread's state, never this process's: any worker may
    serve its next turn, and must send the same request.
    """
    return thread_id(request) is not None


def thread_id(request: ModelRequest[Any]) -> str | None:
    """The call's ``thread_id``, when it runs in a thread."""
    runtime = getattr(request, "runtime", None)
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    return None if thread is None else str(thread)


def call_scope(request: ModelRequest[Any]) -> Scope:
    """Who the call serves, for the sources: its thread, and the run's user when stated.

    The user comes from the run's ``configurable`` (``user_id``, LangGraph's convention)
    or the runtime context's ``user_id`` attribute or key.
    """
    configurable = ensure_config().get("configurable") or {}
    user = configurable.get("user_id")
    context = getattr(getattr(request, "runtime", None), "context", None)
    if user is None and context is not None:
        stated = context.get("user_id") if isinstance(context, dict) else None
        user = stated if stated is not None else getattr(context, "user_id", None)
    return Scope(user=None if user is None else str(user), thread=thread_id(request))


def run_callbacks() -> Callbacks:
    """The callbacks of the run the model call belongs to (None outside a run)."""
    return ensure_config().get("callbacks")


_RUNTIME_KEY = "__pregel_runtime"  # where LangGraph puts a node's `Runtime` in its config


def agent_store(request: Any) -> BaseStore | None:  # noqa: ANN401 - a ModelRequest or a node's runtime holder
    """The agent's LangGraph store (`create_agent(store=...)`), when it has one."""
    store = getattr(getattr(request, "runtime", None), "store", None)
    return store if isinstance(store, BaseStore) else None


def graph_store(config: RunnableConfig | None) -> BaseStore | None:
    """The graph's LangGraph store (`compile(store=...)`) as a node's config carries it."""
    runtime = ((config or {}).get("configurable") or {}).get(_RUNTIME_KEY)
    store = getattr(runtime, "store", None)
    return store if isinstance(store, BaseStore) else None


class SharedRecaps:
    """Which `RecapStore` a call shares its recaps through: the configured one, else the agent's."""

    def __init__(self, configured: BaseStore | None) -> None:
        self._configured = None if configured is None else RecapStore(store=configured)
        self._agent: RecapStore | None = None

    def for_request(self, request: Any) -> RecapStore | None:  # noqa: ANN401 - see `agent_store`
        """The recaps for this call: `recap_store=`, else the agent's store, else None."""
        return self.for_store(agent_store(request))

    def for_node(self, config: RunnableConfig | None) -> RecapStore | None:
        """The recaps for a graph node's run: `recap_store=`, else the graph's store."""
        return self.for_store(graph_store(config))

    def for_store(self, store: BaseStore | None) -> RecapStore | None:
        """The recaps over `recap_store=` when set, else over `store` (None: no sharing)."""
        if self._configured is not None:
            return self._configured
        if store is None:
            return None
        if self._agent is None or self._agent.store is not store:
            self._agent = RecapStore(store=store)  # made once per store, not per call
        return self._agent
