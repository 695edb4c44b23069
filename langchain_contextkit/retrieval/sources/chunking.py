"""Chunk a text or markdown document into pieces measured in the budget's tokens.

Markdown is split first by headings (`MarkdownHeaderTextSplitter`, the heading path kept
with each chunk), then every section by paragraphs, lines and sentences
(`RecursiveCharacterTextSplitter`, Chinese sentence punctuation included), with sizes
measured by a `TokenCounter`, so a chunk's size is what the budget will charge for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.tokens.count import TokenCounter, count_tokens

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DEFAULT_CHUNK_TOKENS", "DocChunk", "split_document"]

DEFAULT_CHUNK_TOKENS = 200
"""Largest chunk, in tokens of the counter given (`count_tokens` by default)."""

_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})

_MARKDOWN_HEADINGS = [("#", "h1"), ("##", "h2"), ("###", "h3"), ("####", "h4")]

# Paragraphs, lines, then sentences and clauses (Chinese and Western punctuation), then words.
_SEPARATORS = ["\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ", "，", ", ", " ", ""]

_LABEL_JOIN = " › "


@dataclass(frozen=True, kw_only=True, slots=True)
class DocChunk:
    """One chunk of a document, with where it came from."""

    text: str
    """The chunk's text (markdown headings stripped: they are in `headings`)."""

    path: str
    """The document's path, relative to the folder it was loaded from, with `/`."""

    headings: tuple[str, ...] = ()
    """The markdown headings the chunk sits under, outermost first."""

    @property
    def label(self) -> str:
        """The path and headings, as in ``guide.md › Travel › Meals``."""
        return _LABEL_JOIN.join((self.path, *self.headings))

    def render(self) -> str:
        """The chunk as it enters a prompt: its label in brackets, then its text."""
        return f"[{self.label}]\n{self.text}"


def split_document(
    text: str,
    *,
    path: str,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    token_counter: TokenCounter = count_tokens,
) -> list[DocChunk]:
    r"""Chunk one document: markdown by headings, then everything by size.

    Args:
        text: The document.
        path: Its path; a ``.md`` or ``.markdown`` ending makes it markdown.
        chunk_tokens: Largest chunk, measured with `token_counter`.
        token_counter: Counts the tokens of a string.

    Returns:
        The non-empty chunks, in document order.

    Raises:
        ConfigError: If `chunk_tokens` is not an int >= 1.

    Example:
        ```python
        from langchain_contextkit.retrieval.sources.chunking import split_document

        text = "# Travel\n\n## Meals\n\nMeals are capped at 80 per day.\n"
        for chunk in split_document(text, path="policy.md"):
            print(chunk.headings, chunk.text)
        # ('Travel', 'Meals') Meals are capped at 80 per day.
        ```
    """
    _check_chunk_tokens(chunk_tokens)
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=chunk_tokens,
        chunk_overlap=0,  # overlapping chunks would spend the budget twice on one passage
        length_function=token_counter,
        separators=_SEPARATORS,
        keep_separator="end",  # a sentence keeps its full stop
    )
    if PurePosixPath(path).suffix.lower() in _MARKDOWN_SUFFIXES:
        splitter_by_heading = MarkdownHeaderTextSplitter(_MARKDOWN_HEADINGS, strip_headers=True)
        sections = [
            (_headings(doc.metadata), doc.page_content)
            for doc in splitter_by_heading.split_text(text)
        ]
    else:
        sections = [((), text)]
    return [
        DocChunk(text=piece.strip(), path=path, headings=headings)
        for headings, body in sections
        for piece in splitter.split_text(body)
        if piece.strip()
    ]


def _headings(metadata: Mapping[str, object]) -> tuple[str, ...]:
    """The heading path `MarkdownHeaderTextSplitter` put in a section's metadata."""
    return tuple(str(metadata[key]) for _, key in _MARKDOWN_HEADINGS if key in metadata)


def _check_chunk_tokens(chunk_tokens: int) -> None:
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        msg = f"chunk_tokens must be an int >= 1, got {chunk_tokens!r}."
        raise ConfigError(msg)
