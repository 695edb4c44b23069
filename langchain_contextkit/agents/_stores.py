"""The agent's LangGraph store, as a call finds it, and the shared recaps over it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.store.base import BaseStore

from langchain_contextkit.compaction.recap_store import RecapStore

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

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
