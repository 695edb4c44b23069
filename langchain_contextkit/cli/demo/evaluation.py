"""The demo's evaluation: each planted fact asked, after the session, of a reader agent.

Offline, `reader_reply` answers with the fact exactly when it reached its request, so the
score measures the context, not a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit.agent.middleware import ContextKitMiddleware
from langchain_contextkit.agent.window_budget import WindowBudgetConfig
from langchain_contextkit.cli.demo.script import FACTS, SYSTEM_PROMPT, TURNS
from langchain_contextkit.compaction.compactor import HistoryCompactor
from langchain_contextkit.quality import EvalCase, evaluate
from langchain_contextkit.retrieval.sources.docs import DocsSource
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_contextkit.cli.demo.session import DemoSession
    from langchain_contextkit.quality import EvalResult

__all__ = [
    "DONT_KNOW",
    "QUESTIONS",
    "evaluate_session",
    "fact_cases",
    "reader_agent",
    "reader_reply",
    "transcript",
]

QUESTIONS: dict[str, str] = {
    "incident ticket": "Which incident ticket are we working on?",
    "change freeze": "On which date does the change freeze start?",
    "decision: replica cap": "How far did we decide to scale the normalizers?",
    "blocker ticket": "Which ticket blocked the failover?",
    "decision: dedupe window": "What did we set the dedupe window to for the replay?",
}
"""One question per planted fact (`FACTS`), by the fact's label."""

DONT_KNOW = "I don't know."
_NEEDLES = {QUESTIONS[fact.label]: fact.needle for fact in FACTS}
_RAG_RATIO = 0.3


def fact_cases(history: list[BaseMessage] | None = None, *, repeat: int = 1) -> list[EvalCase]:
    """One case per planted fact (each `repeat` times), after `history` (default: none).

    The case id is the fact's label (with ``#n`` from the second repeat on).
    """
    return [
        EvalCase(
            QUESTIONS[fact.label],
            fact.needle,
            tuple(history or ()),
            fact.label if n == 0 else f"{fact.label} #{n + 1}",
        )
        for n in range(repeat)
        for fact in FACTS
    ]


def transcript() -> list[BaseMessage]:
    """The session's user turns with the scripted agent's answers, without the tool calls.

    A conversation that states every planted fact, for evaluations that need no session.
    """
    messages: list[BaseMessage] = []
    for turn in TURNS:
        messages += [HumanMessage(turn.user), AIMessage(turn.answer)]
    return messages


def reader_reply(messages: list[BaseMessage]) -> AIMessage:
    """Answer the last question with its fact when the request carries the fact elsewhere."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    question = messages[last].text if last >= 0 else ""
    needle = _NEEDLES.get(question.strip())
    context = "\n".join(m.text for i, m in enumerate(messages) if i != last)
    if needle is not None and needle in context:
        return AIMessage(needle)
    return AIMessage(DONT_KNOW)


def reader_agent(
    project: Path,
    *,
    window: int,
    output_reserve: int = 1000,
    rag_ratio: float = _RAG_RATIO,
) -> Any:  # noqa: ANN401 - create_agent's compiled graph
    """An agent with the session's context policy and the scripted reader as its model.

    The middleware is the session's without the notes (they belong to a run): BM25 over
    the project's docs, the same compactor and budget, sized by `window`.
    """
    middleware = ContextKitMiddleware(
        window=window,
        sources=[DocsSource.from_folder(project, name="docs", k=6)],
        compactor=HistoryCompactor(
            keep_recent=2,
            trigger_tokens=window * 3 // 4,
            max_summary_tokens=max(200, window // 16),
        ),
        budget_config=WindowBudgetConfig(desired_output_tokens=output_reserve, rag_ratio=rag_ratio),
    )
    return create_agent(
        ScriptedChatModel(respond=reader_reply),
        system_prompt=SYSTEM_PROMPT,
        middleware=[middleware],
    )


def evaluate_session(session: DemoSession) -> EvalResult:
    """The planted facts stated so far, asked after the session's whole conversation.

    The reader agent has the session's window and output reserve; the facts of turns
    the session did not run are not asked.
    """
    settings = session.settings
    history = session.conversation()
    asked = {fact.label for fact in FACTS if fact.turn <= session.turns}
    cases = [case for case in fact_cases(history) if case.case_id in asked]
    agent = reader_agent(
        session.project, window=settings.window, output_reserve=settings.output_reserve
    )
    return evaluate(agent, cases, "exact")
