"""History compaction: summarise an old conversation, keep recent turns verbatim.

- [`HistoryCompactor`][langchain_contextkit.compaction.HistoryCompactor]: `compact` /
  `acompact` (the seed's API) and `compact_view` / `acompact_view` (incremental, sized by
  the window in an agent), configured by a serialisable `CompactionConfig`.
- `CompactionResult` and `RunningSummary`: a compaction's view and the recap carried
  between turns.
- `ExtractiveSummarizer` (no LLM, deterministic) and `summarizer_from_llm`: who writes the
  recap.
"""

from langchain_contextkit.compaction.compactor import (
    CompactionConfig,
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
)
from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer, summarizer_from_llm

__all__ = [
    "CompactionConfig",
    "CompactionResult",
    "ExtractiveSummarizer",
    "HistoryCompactor",
    "RunningSummary",
    "summarizer_from_llm",
]
