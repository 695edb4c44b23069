r"""A folder of text and markdown as a context source: chunked, then ranked with BM25.

`load_folder` reads every ``.md``, ``.markdown``, ``.txt`` and ``.rst`` file under a folder
(skipping hidden folders, files that are not UTF-8 text, anything that is not a regular
file, and symbolic links that lead out of the folder) and chunks it with
langchain-text-splitters: markdown first by headings (`MarkdownHeaderTextSplitter`, the
heading path kept with each chunk), then every section by paragraphs, lines and sentences
(`RecursiveCharacterTextSplitter`, Chinese sentence punctuation included), with chunk sizes
measured by a `TokenCounter`, so a chunk's size is what the budget will charge for it.

`DocsIndex` ranks chunks with BM25 (SQLite FTS5's `bm25()`, the same tokenisation as the
note search: Chinese text as characters and bigrams, identifiers such as
``KestrelConsumerLag`` or ``max_retry_count`` also as their parts, Porter stemming
elsewhere; headings and the file path weigh twice the body). `DocsSource` serves the best
chunks to a [`ContextBuilder`][langchain_contextkit.builder.runnable.ContextBuilder], each labelled
with its file and headings.

```python
import tempfile
from pathlib import Path

from langchain_contextkit.sources.docs import DocsSource

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

import os
import stat
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from langchain_core.runnables.config import run_in_executor
from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

from langchain_contextkit._fts import TOKENIZE, connect, index_text, match_expression
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval import RetrievalResult
from langchain_contextkit.sources.base import ContextSource, Scope
from langchain_contextkit.tokens import TokenCounter, count_tokens

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from langchain_core.callbacks import Callbacks

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_SUFFIXES",
    "DocChunk",
    "DocsIndex",
    "DocsSource",
    "LoadedFolder",
    "SkippedFile",
    "load_folder",
    "split_document",
]

DEFAULT_SUFFIXES: tuple[str, ...] = (".md", ".markdown", ".txt", ".rst")
"""File name endings `load_folder` reads (compared case-insensitively)."""

DEFAULT_CHUNK_TOKENS = 200
"""Largest chunk, in tokens of the counter given (`count_tokens` by default)."""

_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
_MARKDOWN_HEADINGS = [("#", "h1"), ("##", "h2"), ("###", "h3"), ("####", "h4")]
# Paragraphs, lines, then sentences and clauses (Chinese and Western punctuation), then words.
_SEPARATORS = ["\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ", "，", ", ", " ", ""]
_LABEL_JOIN = " › "
# BM25 column weights: a word in a heading or the file's path says more than one in the body.
_TITLE_WEIGHT = 2.0
_BODY_WEIGHT = 1.0
# Only constants are spliced in: the query and the limit are bound parameters.
_SEARCH = (
    f"SELECT rowid, bm25(fts, {_TITLE_WEIGHT}, {_BODY_WEIGHT}) AS rank "  # noqa: S608
    "FROM fts WHERE fts MATCH ? ORDER BY rank, rowid LIMIT ?"
)
# Bytes read to tell a binary file from text: a NUL byte there means binary.
_SNIFF_BYTES = 8192
# A document is opened without blocking (a FIFO would wait for a writer forever), without
# following a final symbolic link (unless asked to), and never inherited by a child.
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows would otherwise translate line ends
# A document still being read after this long (a stalled network or FUSE mount) is skipped.
_READ_SECONDS = 10.0
_READ_BLOCK = 1 << 16
_clock = time.monotonic  # a module attribute, so a test can make time pass
_LEAVES_FOLDER = "symlink leaves the folder"
_INTO_HIDDEN = "symlink points into a hidden file or folder"


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


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A document (or a linked folder) `load_folder` did not read, and why."""

    path: str
    """The file's path, relative to the folder."""

    reason: str
    """Why it was skipped: ``symlink leaves the folder``, ``symlink points into a hidden
    file or folder``, ``not a regular file (a FIFO)`` (or a socket, a device...), ``binary
    file``, ``not UTF-8 text (byte N)``, ``read did not finish within 10 s`` or
    ``cannot read: ...`` with the system's reason."""


@dataclass(frozen=True, slots=True)
class LoadedFolder:
    """What `load_folder` found: the chunks, the files read and the files skipped."""

    chunks: tuple[DocChunk, ...]
    files: tuple[str, ...]
    """Relative paths of the documents read, in walk order."""
    skipped: tuple[SkippedFile, ...]


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
        from langchain_contextkit.sources.docs import split_document

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


def load_folder(
    folder: str | os.PathLike[str],
    *,
    suffixes: Sequence[str] = DEFAULT_SUFFIXES,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    token_counter: TokenCounter = count_tokens,
    follow_symlinks: bool = False,
) -> LoadedFolder:
    """Read and chunk every document under `folder`, recursively.

    Hidden folders and files (names starting with ``.``) are not visited. A document that
    holds a NUL byte (binary) or is not UTF-8 (a BOM is allowed) or cannot be read is
    skipped and listed in `skipped`, with the reason.

    Only regular files are read. Each is opened without blocking and its type checked on
    the open descriptor, so a FIFO, socket or device named ``*.md`` is skipped (``not a
    regular file``) instead of hanging the load; a read still running after 10 seconds
    (a stalled network mount) is skipped too.

    By default the folder confines what is read, since its text goes into a prompt: every
    document's real path (all symbolic links resolved) must lie inside the folder's real
    path, so a link such as ``leak.md -> /etc/passwd`` is skipped (``symlink leaves the
    folder``), as is a link into a hidden file or folder inside it (``.git/config`` may
    hold credentials). A link to another document inside the folder is read. Linked
    folders are never entered: one that leaves the folder is listed in `skipped`, one
    inside it holds files that are read where they are. A link swapped in by someone
    writing to the folder *while* it is read is outside what this guards (the last step
    of the path is still opened with ``O_NOFOLLOW``).

    With `follow_symlinks` true, links to files and folders are followed wherever they
    lead (each folder is entered once, so a link to an ancestor cannot loop); use it only
    on a folder whose links you trust.

    Args:
        folder: The folder to read.
        suffixes: File name endings to read, compared case-insensitively.
        chunk_tokens: Largest chunk, measured with `token_counter`.
        token_counter: Counts the tokens of a string.
        follow_symlinks: Follow symbolic links that lead out of the folder (see above).

    Returns:
        The chunks of every document read, in a stable order (sorted names).

    Raises:
        FileNotFoundError: If `folder` does not exist.
        NotADirectoryError: If `folder` is not a folder.
        ConfigError: If `chunk_tokens` is not an int >= 1.
    """
    _check_chunk_tokens(chunk_tokens)
    root = Path(folder)
    if not root.exists():
        msg = f"no such folder: {root}"
        raise FileNotFoundError(msg)
    if not root.is_dir():
        msg = f"not a folder: {root}"
        raise NotADirectoryError(msg)
    wanted = {suffix.lower() for suffix in suffixes}
    real_root = os.path.realpath(root)
    chunks: list[DocChunk] = []
    files: list[str] = []
    skipped: list[SkippedFile] = []
    entered = {_identity(root)}
    for directory, subdirectories, names in os.walk(root, followlinks=follow_symlinks):
        subdirectories[:] = _folders_to_enter(
            Path(directory),
            subdirectories,
            root=root,
            real_root=real_root,
            entered=entered if follow_symlinks else None,
            skipped=skipped,
        )
        for name in sorted(names):
            if name.startswith(".") or Path(name).suffix.lower() not in wanted:
                continue
            path = Path(directory) / name
            relative = path.relative_to(root).as_posix()
            text, problem = _load_document(path, real_root, follow_symlinks=follow_symlinks)
            if text is None:
                skipped.append(SkippedFile(relative, problem))
                continue
            files.append(relative)
            chunks.extend(
                split_document(
                    text, path=relative, chunk_tokens=chunk_tokens, token_counter=token_counter
                )
            )
    return LoadedFolder(tuple(chunks), tuple(files), tuple(skipped))


class DocsIndex:
    """BM25 over chunks: an in-memory SQLite FTS5 index, built once. Thread-safe.

    Example:
        ```python
        from langchain_contextkit.sources.docs import DocChunk, DocsIndex

        index = DocsIndex(
            [
                DocChunk(text="Meals are capped at 80 per day.", path="a.md"),
                DocChunk(text="Hotels need a receipt.", path="b.md"),
            ]
        )
        print([chunk.path for chunk, score in index.search("hotel receipts")])
        # ['b.md']
        ```
    """

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
        from langchain_contextkit.sources.docs import DocChunk, DocsIndex, DocsSource

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
        """Return the best chunks for `query`, at most `k`.

        Args:
            query: The query.
            scope: Ignored: documents are not scoped.
            callbacks: Ignored: no runnable is called.
        """
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


def _headings(metadata: Mapping[str, object]) -> tuple[str, ...]:
    """The heading path `MarkdownHeaderTextSplitter` put in a section's metadata."""
    return tuple(str(metadata[key]) for _, key in _MARKDOWN_HEADINGS if key in metadata)


def _title(chunk: DocChunk) -> str:
    """The title column of a chunk: its path (without the ending) and headings."""
    path = str(PurePosixPath(chunk.path).with_suffix(""))
    return index_text(" ".join((path, *chunk.headings)))


def _folders_to_enter(
    directory: Path,
    names: Iterable[str],
    *,
    root: Path,
    real_root: str,
    entered: set[tuple[int, int] | None] | None,
    skipped: list[SkippedFile],
) -> list[str]:
    """The sub-folders of `directory` the walk goes on into, sorted, hidden ones left out.

    `entered` is None when links are not followed: then no linked folder is entered, and
    one that leads out of the folder is added to `skipped`. Otherwise it holds the folders
    entered so far, and a folder is entered only once, so a link back to an ancestor
    cannot make the walk go round for ever.
    """
    kept: list[str] = []
    for name in sorted(n for n in names if not n.startswith(".")):
        path = directory / name
        if entered is not None:
            identity = _identity(path)
            if identity is None or identity in entered:
                continue
            entered.add(identity)
        elif path.is_symlink():
            if not _within(os.path.realpath(path), real_root):
                skipped.append(SkippedFile(path.relative_to(root).as_posix(), _LEAVES_FOLDER))
            continue  # one inside the folder holds files the walk reads where they are
        kept.append(name)
    return kept


def _within(path: str, directory: str) -> bool:
    """Tell whether the real path `path` is `directory` (a real path) or inside it."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """The device and inode of what `path` leads to; None if it cannot be looked at."""
    try:
        info = Path(path).stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _load_document(path: Path, real_root: str, *, follow_symlinks: bool) -> tuple[str | None, str]:
    """A document's text, or None and why it is not read; confined unless links are followed."""
    if follow_symlinks:
        return _read_text(str(path), follow_final_link=True)
    real = os.path.realpath(path)
    if not _within(real, real_root):
        return None, _LEAVES_FOLDER
    # The walk never enters hidden folders; a link must not reach into one either.
    if any(part.startswith(".") for part in Path(os.path.relpath(real, real_root)).parts):
        return None, _INTO_HIDDEN
    # The real path has no link left in it: opening it refuses one swapped in meanwhile.
    return _read_text(real, follow_final_link=False)


def _not_regular(mode: int) -> str:
    """Why a file of this type is not read."""
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    )
    kind = next((name for test, name in kinds if test(mode)), "an unknown kind of file")
    return f"not a regular file ({kind})"


def _read_text(path: str, *, follow_final_link: bool) -> tuple[str | None, str]:
    """The file's text, or None and why it cannot be read as text."""
    data, problem = _read_regular_file(path, follow_final_link=follow_final_link)
    if data is None:
        return None, problem
    if b"\0" in data[:_SNIFF_BYTES]:
        return None, "binary file"
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start})"


def _read_regular_file(path: str, *, follow_final_link: bool) -> tuple[bytes | None, str]:
    """The bytes of a regular file, or None and why they cannot be had.

    The type is looked at first, so a device or FIFO is not even opened (opening some
    devices does something), then checked again on the open descriptor, which is what
    counts: the file may have been replaced between the two. The open does not block, so
    a FIFO swapped in meanwhile is refused rather than waited on.
    """
    try:
        if not stat.S_ISREG(mode := Path(path).stat().st_mode):
            return None, _not_regular(mode)
        flags = os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
        fd = os.open(path, flags if follow_final_link else flags | _O_NOFOLLOW)
    except OSError as exc:
        return None, _cannot_read(exc)
    try:
        if not stat.S_ISREG(mode := os.fstat(fd).st_mode):
            return None, _not_regular(mode)
        return _read_all(fd), ""
    except _SlowReadError:
        return None, f"read did not finish within {_READ_SECONDS:g} s"
    except OSError as exc:
        return None, _cannot_read(exc)
    finally:
        os.close(fd)


class _SlowReadError(Exception):
    """A document was still being read when its time ran out."""


def _cannot_read(exc: OSError) -> str:
    if isinstance(exc, BlockingIOError):  # nothing to read yet: waiting could take for ever
        return "read would block"
    return f"cannot read: {exc.strerror or exc}"


def _read_all(fd: int) -> bytes:
    """Everything left in `fd`, block by block.

    Raises:
        _SlowReadError: If the blocks are still coming after `_READ_SECONDS`.
    """
    deadline = _clock() + _READ_SECONDS
    blocks: list[bytes] = []
    while block := os.read(fd, _READ_BLOCK):
        blocks.append(block)
        if _clock() > deadline:
            raise _SlowReadError
    return b"".join(blocks)


def _check_chunk_tokens(chunk_tokens: int) -> None:
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        msg = f"chunk_tokens must be an int >= 1, got {chunk_tokens!r}."
        raise ConfigError(msg)
