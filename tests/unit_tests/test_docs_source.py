"""Chunking a folder (langchain-text-splitters) and BM25 over the chunks (SQLite FTS5)."""

from pathlib import Path

import pytest

from langchain_contextkit import ContextBuilder, ContextConfig
from langchain_contextkit.errors import ConfigError, SearchUnavailableError
from langchain_contextkit.notes import _search
from langchain_contextkit.notes._fts import connect, index_text, match_expression, query_terms
from langchain_contextkit.retrieval.sources.chunking import DocChunk, split_document
from langchain_contextkit.retrieval.sources.docs import DocsIndex, DocsSource
from langchain_contextkit.retrieval.sources.folder import load_folder
from langchain_contextkit.tokens.count import count_tokens

ENGLISH = " ".join(
    f"Sentence number {i} explains one rule of the travel policy in plain words." for i in range(60)
)
CHINESE = "".join(f"第{i}条：出差期间的餐费和住宿费按公司制度报销，须保留发票。" for i in range(60))


def test_markdown_is_split_by_headings_with_the_heading_path() -> None:
    text = (
        "# Guide\n\nIntro.\n\n## Meals\n\nMeals text.\n\n### Abroad\n\nAbroad text.\n\n"
        "## Hotels\n\nHotel text.\n"
    )
    chunks = split_document(text, path="guide.md")
    assert [(c.headings, c.text) for c in chunks] == [
        (("Guide",), "Intro."),
        (("Guide", "Meals"), "Meals text."),
        (("Guide", "Meals", "Abroad"), "Abroad text."),
        (("Guide", "Hotels"), "Hotel text."),
    ]
    assert chunks[2].label == "guide.md › Guide › Meals › Abroad"
    assert chunks[2].render() == "[guide.md › Guide › Meals › Abroad]\nAbroad text."


def test_plain_text_keeps_hash_lines_as_text() -> None:
    chunks = split_document("# not a heading\n\nbody\n", path="notes.txt")
    assert chunks == [DocChunk(text="# not a heading\n\nbody", path="notes.txt")]


@pytest.mark.parametrize("text", [ENGLISH, CHINESE, f"# Mixed\n\n{ENGLISH}\n\n{CHINESE}"])
def test_chunks_fit_the_token_size(text: str) -> None:
    chunks = split_document(text, path="a.md", chunk_tokens=50)
    assert len(chunks) > 5
    assert max(count_tokens(c.text) for c in chunks) <= 50
    # Nothing lost: every sentence is in some chunk.
    joined = "".join(c.text for c in chunks).replace(" ", "")
    assert joined == (text.split("\n\n", 1)[1] if text.startswith("#") else text).replace(
        "\n", ""
    ).replace(" ", "")


def test_chinese_chunks_end_at_a_full_stop() -> None:
    chunks = split_document(CHINESE, path="zh.txt", chunk_tokens=70)
    assert all(c.text.endswith("。") for c in chunks)


def test_chunk_size_is_checked() -> None:
    with pytest.raises(ConfigError, match="chunk_tokens"):
        split_document("text", path="a.md", chunk_tokens=0)


def test_load_folder_walks_sorted_and_skips(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "b" / "z.rst").write_text("Title\n=====\n\nrst body\n", encoding="utf-8")
    (tmp_path / "a.MD").write_text("\ufeff# A\n\nbody a\n", encoding="utf-8")  # BOM, upper case
    (tmp_path / ".hidden.md").write_text("hidden", encoding="utf-8")
    (tmp_path / ".git" / "x.md").write_text("git", encoding="utf-8")
    (tmp_path / "bin.txt").write_bytes(b"abc\x00def")
    (tmp_path / "gbk.txt").write_bytes("中文".encode("gbk"))
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    loaded = load_folder(tmp_path)
    assert loaded.files == ("a.MD", "b/z.rst")
    assert [(s.path, s.reason.split(" (")[0]) for s in loaded.skipped] == [
        ("bin.txt", "binary file"),
        ("gbk.txt", "not UTF-8 text"),
    ]
    assert [(c.path, c.headings, c.text) for c in loaded.chunks] == [
        ("a.MD", ("A",), "body a"),
        ("b/z.rst", (), "Title\n=====\n\nrst body"),
    ]


def test_load_folder_rejects_what_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_folder(tmp_path / "missing")
    (tmp_path / "file.md").write_text("x", encoding="utf-8")
    with pytest.raises(NotADirectoryError):
        load_folder(tmp_path / "file.md")


INDEX = DocsIndex(
    [
        DocChunk(text="Meals are capped at 80 per day.", path="expenses.md", headings=("Meals",)),
        DocChunk(text="Hotels need a receipt and a booking.", path="expenses.md"),
        DocChunk(text="出差期间餐费每天上限八十元。", path="zh/报销.md", headings=("餐费",)),
        DocChunk(text="住宿费每晚上限五百元。", path="zh/报销.md", headings=("住宿",)),
        DocChunk(text="Lunch is served at noon.", path="canteen.md", headings=("Meals",)),
    ]
)


def test_bm25_ranks_the_matching_chunk_first() -> None:
    assert INDEX.search("hotel receipts")[0][0].text.startswith("Hotels")  # stemmed
    assert INDEX.search("餐费上限")[0][0].headings == ("餐费",)
    assert INDEX.search("住宿")[0][0].headings == ("住宿",)


def test_headings_and_path_count_in_the_ranking() -> None:
    hits = INDEX.search("canteen meals")
    assert hits[0][0].path == "canteen.md"  # path and heading both match
    assert {c.path for c, _ in hits} == {"canteen.md", "expenses.md"}


def test_search_scores_are_positive_and_limited() -> None:
    hits = INDEX.search("meals hotels 餐费 住宿", limit=3)
    assert len(hits) == 3
    assert all(score > 0 for _, score in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


@pytest.mark.parametrize("query", ["", "???", '"OR NEAR(', "- * ^"])
def test_queries_without_words_or_with_fts_syntax_are_safe(query: str) -> None:
    assert INDEX.search(query) == [] or all(s > 0 for _, s in INDEX.search(query))


def test_fts_syntax_in_a_query_is_plain_text() -> None:
    assert INDEX.search('meals AND "hotels') == INDEX.search("meals and hotels")


def test_docs_source_fetch_and_retriever_interface() -> None:
    source = DocsSource("rag", INDEX, k=1)
    (result,) = source.fetch("hotel")
    assert result.source == "rag"
    assert result.content == "[expenses.md]\nHotels need a receipt and a booking."
    assert result.metadata == {"path": "expenses.md", "headings": []}
    docs = source.invoke("餐费上限", k=2)  # a per-call k above the source's own
    assert [d.metadata["headings"] for d in docs] == [["餐费"], ["住宿"]]
    assert set(docs[0].metadata) == {"path", "headings", "contextkit_score", "contextkit_source"}


async def test_docs_source_async_retriever() -> None:
    docs = await DocsSource("rag", INDEX, k=1).ainvoke("上限", k=2)
    assert len(docs) == 2
    assert all(d.metadata["path"] == "zh/报销.md" for d in docs)


async def test_docs_source_async_in_a_builder() -> None:
    builder = ContextBuilder(ContextConfig(max_tokens=2000), sources=[DocsSource("rag", INDEX)])
    report = await builder.abuild_report("how much for meals?")
    assert "[expenses.md › Meals]\nMeals are capped at 80 per day." in report.text
    assert report.sources[0].kept >= 1


def test_docs_source_needs_an_index() -> None:
    with pytest.raises(ConfigError, match="DocsIndex"):
        DocsSource("rag", None)
    with pytest.raises(ConfigError):
        DocsSource("", INDEX)


def test_from_folder(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Taxis\n\nTaxis are reimbursed at night.\n", "utf-8")
    source = DocsSource.from_folder(tmp_path, name="docs", k=3)
    assert source.name == "docs"
    assert len(source.index) == 1
    assert source.fetch("taxi")[0].metadata == {"path": "a.md", "headings": ["Taxis"]}


def test_shared_tokenisation_is_what_the_notes_use() -> None:
    assert _search.query_terms is query_terms
    assert _search.index_text is index_text
    assert _search.SearchUnavailableError is SearchUnavailableError
    assert query_terms("依赖冲突 locks") == ["依赖", "赖冲", "冲突", "locks"]
    assert match_expression("依赖") == '"依赖"'
    assert match_expression("!!") is None


def test_connect_without_the_module_says_so() -> None:
    with pytest.raises(SearchUnavailableError, match="document search needs SQLite's FTS5"):
        connect("CREATE VIRTUAL TABLE t USING no_such_module(a);", purpose="document search")
