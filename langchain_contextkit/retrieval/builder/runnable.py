"""`ContextBuilder`: gather -> MMR -> budget -> fixed layout, as a LangChain Runnable.

The builder asks every source for candidates (concurrently in async), de-duplicates each
source's candidates with MMR, shares the token budget between sources (two rounds, with
borrowing) and lays the kept candidates out in a fixed order: system prompt, memory, rag,
notes, history, tool, current question. It never reranks: the sources' ranking is the
baseline. Every decision is in a `ContextReport`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableSerializable
from pydantic import ConfigDict, Field

# pydantic needs typing_extensions.TypedDict below Python 3.12 to build the input schema.
from typing_extensions import NotRequired, TypedDict

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.prompts import PromptRegistry
from langchain_contextkit.retrieval.budget import ContextConfig
from langchain_contextkit.retrieval.builder._assembly import assemble
from langchain_contextkit.retrieval.builder.gather import Gathered, agather, gather
from langchain_contextkit.retrieval.sources.base import ContextSource, Scope
from langchain_contextkit.tokens.count import TokenCounter, count_tokens

if TYPE_CHECKING:
    from langchain_contextkit.retrieval.builder.report import ContextReport

__all__ = ["BuilderInput", "ContextBuilder"]

REPORT_EVENT = "contextkit_report"
"""Name of the custom callback event that carries a build's report (visible in traces)."""

_BLOCK_FENCED = frozenset({"rag", "tool"})


class BuilderInput(TypedDict):
    """The dict form of the builder's Runnable input."""

    query: str
    scope: NotRequired[Scope | None]
    system_prompt: NotRequired[str]


class ContextBuilder(RunnableSerializable[str | BuilderInput, str]):
    """Assemble a prompt from budgeted sources; a LangChain `Runnable`.

    As a Runnable, `invoke("question")` (or `invoke({"query": ..., "scope": ...})`)
    returns the flat prompt of `build`, so `builder | llm` works in LCEL; `as_block()`
    returns a Runnable of the dynamic block alone, for a prompt template's `{context}`.

    Example:
        ```python
        from langchain_core.language_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        from langchain_contextkit import CallableSource, ContextBuilder, ContextConfig

        builder = ContextBuilder(
            ContextConfig(max_tokens=2000),
            sources=[CallableSource("rag", lambda q: ["Meals are capped at 80 per day."])],
            system_prompt="You are a finance assistant.",
        )
        llm = GenericFakeChatModel(messages=iter([AIMessage("80 per day.")]))
        print((builder | llm).invoke("how much for meals?").content)
        # 80 per day.
        ```
    """

    config: ContextConfig = Field(default_factory=ContextConfig)
    """Budget knobs (ratios, MMR, borrowing)."""

    sources: Sequence[ContextSource] = ()
    """Default sources, used when a call passes none."""

    system_prompt: str = ""
    """Default system prompt of `build`."""

    prompts: PromptRegistry = Field(default_factory=PromptRegistry)
    """Headings and the data-boundary notice."""

    token_counter: TokenCounter = count_tokens
    """Counts the tokens of a string."""

    strict: bool = False
    """Raise when a source fails instead of building without it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def __init__(
        self,
        config: ContextConfig | None = None,
        *,
        sources: Sequence[ContextSource] = (),
        system_prompt: str = "",
        prompts: PromptRegistry | None = None,
        token_counter: TokenCounter = count_tokens,
        strict: bool = False,
        **kwargs: Any,  # noqa: ANN401 - Runnable fields such as name
    ) -> None:
        """Create a builder; sources are checked against the config here.

        Args:
            config: Budget knobs; the defaults when None (then every call needs
                `max_tokens` set or an explicit `budget`).
            sources: Default sources for calls that pass none.
            system_prompt: Default system prompt of `build`.
            prompts: Headings and notices; English defaults when None.
            token_counter: Counts tokens (`count_tokens` or a `tiktoken_counter`).
            strict: Raise when a source fails instead of building without it.
            **kwargs: Other Runnable fields.

        Raises:
            ConfigError: If a default source's name has no ratio or two share a name.
        """
        super().__init__(
            config=config or ContextConfig(),
            sources=tuple(sources),
            system_prompt=system_prompt,
            prompts=prompts or PromptRegistry(),
            token_counter=token_counter,
            strict=strict,
            **kwargs,
        )
        if self.sources:
            self._check_sources(self.sources)

    def _check_sources(self, sources: Sequence[ContextSource]) -> None:
        seen: set[str] = set()
        for source in sources:
            if not isinstance(source, ContextSource):  # for callers without a type checker
                msg = f"Sources must be ContextSource instances, got {type(source).__name__}."  # type: ignore[unreachable]
                raise ConfigError(msg)
            if source.name not in self.config.source_ratios:
                msg = (
                    f"Source {source.name!r} is not a key of source_ratios "
                    f"{sorted(self.config.source_ratios)}: it would get no quota and never appear."
                )
                raise ConfigError(msg)
            if source.name in seen:
                msg = f"Two sources are named {source.name!r}: one would overwrite the other."
                raise ConfigError(msg)
            seen.add(source.name)

    def _resolve(self, sources: Sequence[ContextSource] | None) -> Sequence[ContextSource]:
        chosen = self.sources if sources is None else tuple(sources)
        self._check_sources(chosen)
        return chosen

    def _block_budget(self, budget: int | None, system_prompt: str) -> int:
        if budget is not None:
            if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
                msg = f"budget must be an int >= 0, got {budget!r}."
                raise ConfigError(msg)
            return budget
        if self.config.max_tokens is None:
            msg = (
                "No budget: set ContextConfig.max_tokens (e.g. ContextConfig.for_window) "
                "or pass budget=."
            )
            raise ConfigError(msg)
        # The system prompt is fixed overhead; the output reserve covers the answer and question.
        return max(0, self.config.dynamic_tokens - self.token_counter(system_prompt))

    def _finish(
        self, gathered: Gathered, budget: int, query: str, system_prompt: str | None
    ) -> ContextReport:
        """Budget and lay out `gathered`: the block alone, or the flat prompt around it."""
        fenced = self.config.data_boundary_sections
        if fenced is None:
            fenced = _BLOCK_FENCED if system_prompt is None else frozenset()
        report = assemble(
            gathered,
            budget=budget,
            config=self.config,
            prompts=self.prompts,
            counter=self.token_counter,
            fenced=fenced,
        )
        if system_prompt is None:
            return report
        parts = [system_prompt] if system_prompt else []
        if report.text:
            parts.append(report.text)
        parts.append(f"{self.prompts.heading('question')}\n{query}")
        return dataclasses.replace(report, text="\n\n".join(parts))

    # --- public API -----------------------------------------------------------------------

    def gather(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        scope: Scope | None = None,
        callbacks: Callbacks = None,
    ) -> Gathered:
        """Fetch `query` from the sources without budgeting: pass it on as `gathered=`."""
        return gather(query, self._resolve(sources), scope, callbacks, strict=self.strict)

    async def agather(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        scope: Scope | None = None,
        callbacks: Callbacks = None,
    ) -> Gathered:
        """Async `gather`: every source fetched concurrently."""
        return await agather(query, self._resolve(sources), scope, callbacks, strict=self.strict)

    def build_report(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        system_prompt: str | None = None,
        scope: Scope | None = None,
        callbacks: Callbacks = None,
    ) -> ContextReport:
        """Build the flat prompt and report every decision.

        Args:
            query: The current question.
            sources: Sources for this call; the builder's own when None.
            system_prompt: System prompt for this call; the builder's own when None.
            scope: The run's session, passed to sources that take it.
            callbacks: Callbacks for the sources' own runs.

        Returns:
            The report; its `text` is the prompt.

        Raises:
            ConfigError: Before any fetch, for a source name missing from
                `source_ratios`, two sources with one name, or no budget.
        """
        system = self.system_prompt if system_prompt is None else system_prompt
        chosen = self._resolve(sources)
        budget = self._block_budget(None, system)
        gathered = gather(query, chosen, scope, callbacks, strict=self.strict)
        return self._finish(gathered, budget, query, system)

    async def abuild_report(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        system_prompt: str | None = None,
        scope: Scope | None = None,
        callbacks: Callbacks = None,
    ) -> ContextReport:
        """Async twin of `build_report`; fetches from all sources concurrently."""
        system = self.system_prompt if system_prompt is None else system_prompt
        chosen = self._resolve(sources)
        budget = self._block_budget(None, system)
        gathered = await agather(query, chosen, scope, callbacks, strict=self.strict)
        return self._finish(gathered, budget, query, system)

    def build_block_report(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        scope: Scope | None = None,
        budget: int | None = None,
        callbacks: Callbacks = None,
        gathered: Gathered | None = None,
    ) -> ContextReport:
        """Build the dynamic block alone and report every decision.

        Args:
            query: The current question.
            sources: Sources for this call; the builder's own when None.
            scope: The run's session.
            budget: The block's cap, e.g. `WindowBudget.rag_budget`; the config's dynamic
                region when None.
            callbacks: Callbacks for the sources' own runs.
            gathered: Candidates already fetched for `query` (`ContextBuilder.gather`):
                budgeted again instead of fetched again.

        Returns:
            The report; its `text` is the block and its `items` the kept candidates.
        """
        chosen = self._resolve(sources)
        block_budget = self._block_budget(budget, "")
        if gathered is None:
            gathered = gather(query, chosen, scope, callbacks, strict=self.strict)
        return self._finish(gathered, block_budget, query, None)

    async def abuild_block_report(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        scope: Scope | None = None,
        budget: int | None = None,
        callbacks: Callbacks = None,
        gathered: Gathered | None = None,
    ) -> ContextReport:
        """Async twin of `build_block_report`; fetches from all sources concurrently."""
        chosen = self._resolve(sources)
        block_budget = self._block_budget(budget, "")
        if gathered is None:
            gathered = await agather(query, chosen, scope, callbacks, strict=self.strict)
        return self._finish(gathered, block_budget, query, None)

    def build(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        system_prompt: str | None = None,
        scope: Scope | None = None,
    ) -> str:
        """Return the flat prompt: system prompt -> sections -> current question.

        For single-turn or RAG-style calls. See `build_report` for the arguments.
        """
        return self.build_report(
            query, sources=sources, system_prompt=system_prompt, scope=scope
        ).text

    async def abuild(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        system_prompt: str | None = None,
        scope: Scope | None = None,
    ) -> str:
        """Async twin of `build`."""
        report = await self.abuild_report(
            query, sources=sources, system_prompt=system_prompt, scope=scope
        )
        return report.text

    def build_block(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        scope: Scope | None = None,
        budget: int | None = None,
    ) -> str:
        """Return the dynamic block alone ("" when there are no candidates).

        For multi-turn use: inject the block as a message and pass the history as
        role-tagged messages, so user and assistant roles are not flattened. Retrieved
        (rag) and tool sections are fenced as data unless the config says otherwise.
        """
        return self.build_block_report(query, sources=sources, scope=scope, budget=budget).text

    async def abuild_block(
        self,
        query: str,
        *,
        sources: Sequence[ContextSource] | None = None,
        scope: Scope | None = None,
        budget: int | None = None,
    ) -> str:
        """Async twin of `build_block`; fans out over sources concurrently."""
        report = await self.abuild_block_report(query, sources=sources, scope=scope, budget=budget)
        return report.text

    # --- Runnable ---------------------------------------------------------------------------

    @staticmethod
    def _parse(value: str | BuilderInput) -> tuple[str, Scope | None, str | None]:
        if isinstance(value, str):
            return value, None, None
        if isinstance(value, Mapping) and isinstance(value.get("query"), str):
            return value["query"], value.get("scope"), value.get("system_prompt")
        msg = (
            "ContextBuilder expects a str or a dict with a 'query' str, "
            f"got {type(value).__name__}."
        )
        raise TypeError(msg)

    def _invoke(
        self,
        value: str | BuilderInput,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> str:
        query, scope, system = self._parse(value)
        report = self.build_report(
            query, system_prompt=system, scope=scope, callbacks=run_manager.get_child()
        )
        dispatch_custom_event(REPORT_EVENT, report.as_dict(), config=config)
        return report.text

    async def _ainvoke(
        self,
        value: str | BuilderInput,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> str:
        query, scope, system = self._parse(value)
        report = await self.abuild_report(
            query, system_prompt=system, scope=scope, callbacks=run_manager.get_child()
        )
        await adispatch_custom_event(REPORT_EVENT, report.as_dict(), config=config)
        return report.text

    def invoke(
        self,
        input: str | BuilderInput,  # noqa: A002 - the Runnable signature
        config: RunnableConfig | None = None,
        **kwargs: Any,  # noqa: ANN401
    ) -> str:
        """Return the flat prompt for a question (a str or a `BuilderInput` dict)."""
        return self._call_with_config(self._invoke, input, config, **kwargs)

    async def ainvoke(
        self,
        input: str | BuilderInput,  # noqa: A002 - the Runnable signature
        config: RunnableConfig | None = None,
        **kwargs: Any,  # noqa: ANN401
    ) -> str:
        """Async twin of `invoke`; fetches from all sources concurrently."""
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    def as_block(self, *, budget: int | None = None) -> Runnable[str | BuilderInput, str]:
        """A Runnable that returns the dynamic block alone, for a prompt's ``{context}``.

        Args:
            budget: The block's cap; the config's dynamic region when None.
        """

        def block(value: str | BuilderInput) -> str:
            query, scope, _ = self._parse(value)
            return self.build_block(query, scope=scope, budget=budget)

        async def ablock(value: str | BuilderInput) -> str:
            query, scope, _ = self._parse(value)
            return await self.abuild_block(query, scope=scope, budget=budget)

        return RunnableLambda(block, afunc=ablock, name="ContextBuilderBlock")
