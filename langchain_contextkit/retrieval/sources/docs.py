r"""A folder of text and markdown as a context source: chunked, then ranked with BM25.

[`load_folder`][langchain_contextkit.retrieval.sources.folder.load_folder] reads and chunks the
folder. `DocsIndex` ranks the chunks with SQLite FTS5's `bm25()` (the tokenisation of the note
search, `_fts`; headings and the file path weigh twice the body). `DocsSource` serves the
best chunks, each labelled with its file and headings.

```python
import tempfile
from pathlib import Path

from langchain_contextkit.retrieval.sources.docs import DocsSource

folder = Path(tempfile.mkdtemp())
(folder / "expenses.md").write_text(
    "# Expenses\n\n## Meals\n\nMeals are capped at 80 per day.\n\n"
    "## Hotels\n\nHotels are capped at 500 per night.\n",
    encoding="utf-8",
)
(folder / "报销.md").write_text("# 差旅\n\n餐费每天上限八十元，无需发票。\n", encoding="utf-8")
source = DocsSource.from_folder(folder, k=1)
print(source.fetch("how much for meals?")[0].content)
# [expenses.md › Expenses › Meals]
# Meals are capped at 80 per day.
print(source.fetch("餐费上限")[0].metadata)
# {'path': '报销.md', 'headings': ['差旅']}
```
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from langchain_core.runnables.config import run_in_executor

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.notes._fts import TOKENIZE, connect, index_text, match_expression
from langchain_contextkit.retrieval.result import RetrievalResult
from langchain_contextkit.retrieval.sources.base import ContextSource, Scope
from langchain_contextkit.retrieval.sources.chunking import DEFAULT_CHUNK_TOKENS, DocChunk
from langchain_contextkit.retrieval.sources.folder import load_folder
from langchain_contextkit.tokens.count import TokenCounter, count_tokens

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable

    from langchain_core.callbacks import Callbacks

__all__ = ["DocsIndex", "DocsSource"]


# BM25 column weights: a word in a heading or the file's path says more than one in the body.
_TITLE_WEIGHT = 2.0
_BODY_WEIGHT = 1.0
# Only constants are spliced in: the query and the limit are bound parameters.
_SEARCH = (
    f"SELECT rowid, bm25(fts, {_TITLE_WEIGHT}, {_BODY_WEIGHT}) AS rank "  # noqa: S608
    "FROM fts WHERE fts MATCH ? ORDER BY rank, rowid LIMIT ?"
)


class DocsIndex:
    """BM25 over chunks: an in-memory SQLite FTS5 index, built once. Thread-safe."""

    def __init__(self, chunks: Iterable[DocChunk]) -> None:
        """Index the chunks.

        Args:
            chunks: The chunks to search.

        Raises:
            SearchUnavailableError: If SQLite here was built without FTS5.
        """
        self._chunks = tuple(chunks)
        self._lock = threading.Lock()
        self._db = connect(
            f"CREATE VIRTUAL TABLE fts USING fts5(title, body, content='', tokenize='{TOKENIZE}');",
            purpose="document search",
        )
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO fts (rowid, title, body) VALUES (?, ?, ?)",
                [
                    (rowid, _title(chunk), index_text(chunk.text))
                    for rowid, chunk in enumerate(self._chunks)
                ],
            )

    def __len__(self) -> int:
        """Number of chunks indexed."""
        return len(self._chunks)

    @property
    def chunks(self) -> tuple[DocChunk, ...]:
        """Every chunk, in the order given."""
        return self._chunks

    def search(self, query: str, *, limit: int | None = None) -> list[tuple[DocChunk, float]]:
        """Rank chunks against `query`, best first (ties in document order).

        Args:
            query: Free text; its words and CJK bigrams are OR-ed.
            limit: Maximum number of results; all matching chunks when None.

        Returns:
            `(chunk, score)` pairs, score > 0. Empty when the query has no searchable word.
        """
        match = match_expression(query)
        if match is None:
            return []
        with self._lock:
            rows = self._db.execute(_SEARCH, (match, -1 if limit is None else limit)).fetchall()
        # bm25() is negative, lower is better; report it as a positive score.
        return [(self._chunks[rowid], -rank) for rowid, rank in rows]


class DocsSource(ContextSource):
    """A context source over a `DocsIndex`: the best BM25 chunks for the query.

    Each result's content is the chunk rendered with its label (``[path › heading]`` then
    the text); its metadata holds the `path` and `headings`. `DocsSource.from_folder` loads,
    chunks and indexes a folder in one call (see the module docstring).

    Example:
        ```python
        from langchain_contextkit import ContextBuilder, ContextConfig
        from langchain_contextkit.retrieval.sources.docs import DocsIndex, DocsSource
        from langchain_contextkit.retrieval.sources.chunking import DocChunk

        index = DocsIndex(
            [
                DocChunk(
                    text="Meals are capped at 80 per day.", path="policy.md", headings=("Meals",)
                ),
                DocChunk(text="The office opens at 8.", path="office.md"),
            ]
        )
        builder = ContextBuilder(ContextConfig(max_tokens=2000), sources=[DocsSource("rag", index)])
        print(builder.build("meals cap"))
        # [Knowledge]
        # - [policy.md › Meals]
        # Meals are capped at 80 per day.
        #
        # [Current question]
        # meals cap
        ```
    """

    index: DocsIndex
    """The chunks to search."""

    def __init__(
        self,
        name: str = "rag",
        index: DocsIndex | None = None,
        *,
        k: int | None = 10,
        **kwargs: Any,  # noqa: ANN401 - other retriever fields (tags, metadata)
    ) -> None:
        """Serve `index` as the source `name`.

        Args:
            name: The budget quota this source draws from.
            index: The chunks to search (required).
            k: Maximum number of chunks per fetch; `None` for every matching chunk.
            **kwargs: Other retriever fields (`tags`, `metadata`).

        Raises:
            ConfigError: If `index` is missing, `name` is empty or `k` is not an integer
                >= 1.
        """
        if not isinstance(index, DocsIndex):
            msg = f"DocsSource needs a DocsIndex, got {type(index).__name__}."
            raise ConfigError(msg)
        super().__init__(name=name, index=index, k=k, **kwargs)

    @classmethod
    def from_folder(
        cls,
        folder: str | os.PathLike[str],
        *,
        name: str = "rag",
        k: int | None = 10,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        token_counter: TokenCounter = count_tokens,
        follow_symlinks: bool = False,
    ) -> DocsSource:
        """Load, chunk and index a folder (see `load_folder`), skipping what is not text.

        Args:
            folder: The folder to read.
            name: The budget quota this source draws from.
            k: Maximum number of chunks per fetch.
            chunk_tokens: Largest chunk, measured with `token_counter`.
            token_counter: Counts the tokens of a string.
            follow_symlinks: Follow symbolic links that lead out of the folder; by default
                they are skipped (see `load_folder`).
        """
        loaded = load_folder(
            folder,
            chunk_tokens=chunk_tokens,
            token_counter=token_counter,
            follow_symlinks=follow_symlinks,
        )
        return cls(name, DocsIndex(loaded.chunks), k=k)

    def fetch(
        self,
        query: str,
        scope: Scope | None = None,  # noqa: ARG002 - documents are not scoped
        *,
        callbacks: Callbacks = None,  # noqa: ARG002 - no runnable is called
    ) -> list[RetrievalResult]:
        """Return the best chunks for `query`, at most `k` (scope and callbacks unused)."""
        return self._fetch_capped(query, None, limit=self.k, callbacks=None)

    def _fetch_capped(
        self,
        query: str,
        scope: Scope | None,  # noqa: ARG002 - documents are not scoped
        *,
        limit: int | None,
        callbacks: Callbacks,  # noqa: ARG002 - no runnable is called
    ) -> list[RetrievalResult]:
        """Search with `limit` itself, so a per-call `k` can raise the cap as well."""
        return [
            RetrievalResult(
                content=chunk.render(),
                score=score,
                source=self.name,
                metadata={"path": chunk.path, "headings": list(chunk.headings)},
            )
            for chunk, score in self.index.search(query, limit=limit)
        ]

    async def _afetch_capped(
        self, query: str, scope: Scope | None, *, limit: int | None, callbacks: Callbacks
    ) -> list[RetrievalResult]:
        """Async twin of `_fetch_capped`: the search runs in an executor."""
        return await run_in_executor(
            None, partial(self._fetch_capped, limit=limit, callbacks=callbacks), query, scope
        )


def _title(chunk: DocChunk) -> str:
    """The title column of a chunk: its path (without the ending) and headings."""
    path = str(PurePosixPath(chunk.path).with_suffix(""))
    return index_text(" ".join((path, *chunk.headings)))
