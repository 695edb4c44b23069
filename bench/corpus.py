"""A token-counting corpus read from files already on this machine.

Nothing here is generated or copied into the repository: every document is read at
benchmark time from the Python installation, Debian's shared data (licences, gettext
catalogues, CA certificates) and the project's Chinese specification documents in
`../shared/seeds`. A category whose files are missing is reported empty, not faked.

Each category is a list of documents of roughly `_DOC_CHARS` characters, cut at line
boundaries, so per-document errors are measured on prompt-sized pieces of text.
"""

from __future__ import annotations

import ast
import gettext
import json
import re
import sys
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

_DOC_CHARS = 2_000
_MAX_DOCS = 60
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_NON_LATIN = re.compile(r"[\u0370-\u03ff\u0400-\u04ff]")
_URL = re.compile(r"https?://[^\s\"'<>()\[\]{}`\\,]+[^\s\"'<>()\[\]{}`\\,.;:]")
_SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
_LOCALE = Path("/usr/share/locale")


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _site_packages() -> list[Path]:
    return [Path(p) for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}]


def _chunks(text: str, size: int = _DOC_CHARS) -> Iterator[str]:
    """Cut text into pieces of about `size` characters at line boundaries."""
    piece: list[str] = []
    length = 0
    for line in text.splitlines(keepends=True):
        piece.append(line)
        length += len(line)
        if length >= size:
            yield "".join(piece)
            piece, length = [], 0
    if length >= size // 4:
        yield "".join(piece)


def _take(docs: Iterable[str], limit: int = _MAX_DOCS) -> list[str]:
    """Spread the selection over the whole input instead of taking its head."""
    pool = [d for d in docs if d.strip()]
    if len(pool) <= limit:
        return pool
    step = len(pool) / limit
    return [pool[int(i * step)] for i in range(limit)]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _share(text: str, script: re.Pattern[str]) -> float:
    visible = sum(1 for c in text if not c.isspace())
    return len(script.findall(text)) / visible if visible else 0.0


def _cjk_share(text: str) -> float:
    return _share(text, _CJK)


def _catalogue_texts(lang: str, script: re.Pattern[str] = _CJK) -> Iterator[str]:
    """Translated messages from the gettext catalogues of one language."""
    folder = _LOCALE / lang / "LC_MESSAGES"
    for mo in sorted(folder.glob("*.mo")) if folder.is_dir() else []:
        if mo.name.startswith("iso_"):  # lists of country and language names, not prose
            continue
        try:
            with mo.open("rb") as fh:
                catalogue = gettext.GNUTranslations(fh)
        except (OSError, UnicodeDecodeError, gettext.struct.error):  # type: ignore[attr-defined]
            continue
        messages = [v for k, v in catalogue._catalog.items() if k and isinstance(v, str)]  # noqa: SLF001
        yield "\n".join(m for m in messages if _share(m, script) > 0.3)


def english_prose() -> list[str]:
    licences = sorted(Path("/usr/share/common-licenses").glob("*"))
    docstrings: list[str] = []
    for path in sorted(_stdlib().glob("*.py")):
        try:
            tree = ast.parse(_read(path))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 600 and ">>>" not in doc:
                    docstrings.append(doc)
    texts = [_read(p) for p in licences if p.is_file()] + ["\n\n".join(docstrings)]
    return _take(c for t in texts for c in _chunks(t))


def chinese_prose() -> list[str]:
    paragraphs = [
        p
        for seed in sorted(_SEEDS.glob("0*.txt"))
        for p in _read(seed).split("\n\n")
        if _cjk_share(p) > 0.6
    ]
    catalogues = list(_catalogue_texts("zh_CN"))
    return _take(_chunks("\n\n".join(paragraphs))) + _take(
        (c for t in catalogues for c in _chunks(t)), limit=_MAX_DOCS // 2
    )


def mixed_technical() -> list[str]:
    texts = [_read(seed) for seed in sorted(_SEEDS.glob("0*.txt"))]
    return _take(
        c
        for t in texts
        for c in _chunks(t)
        if 0.1 < _cjk_share(c) < 0.6 and re.search(r"[(){}=]", c)
    )


def japanese_korean() -> list[str]:
    return _take(c for t in _catalogue_texts("ja") for c in _chunks(t)) + _take(
        c for t in _catalogue_texts("ko") for c in _chunks(t)
    )


def cyrillic_greek() -> list[str]:
    """Not one of the required categories: it pins the rate of two-byte letters."""
    return _take(
        c
        for lang in ("ru", "uk", "el")
        for t in _catalogue_texts(lang, _NON_LATIN)
        for c in _chunks(t)
    )


def python_source() -> list[str]:
    files = sorted(_stdlib().glob("*.py")) + sorted(_stdlib().glob("*/*.py"))
    return _take(c for p in files[::7] for c in _chunks(_read(p)))


def json_documents() -> list[str]:
    roots = [Path("/usr/share"), *_site_packages(), _stdlib()]
    texts: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.json"))[:400]:
            text = _read(path)
            try:
                json.loads(text)
            except ValueError:
                continue
            texts.append(text)
    return _take(c for t in texts for c in _chunks(t))


def base64_documents() -> list[str]:
    """PEM certificates: real base64 between the armour lines."""
    texts = []
    for pem in sorted(Path("/etc/ssl/certs").glob("*.pem")):
        body = [ln for ln in _read(pem).splitlines() if ln and not ln.startswith("-----")]
        texts.append("".join(body))
    return _take(texts)


def hex_digests() -> list[str]:
    """Not one of the required categories: hashes and ids fill tool output and logs."""
    texts = [_read(p) for p in sorted(Path("/var/lib/dpkg/info").glob("*.md5sums"))]
    return _take(c for t in texts for c in _chunks(t))


def urls() -> list[str]:
    found: dict[str, None] = {}
    for root in _site_packages():
        for meta in sorted(root.glob("*.dist-info/METADATA")):
            for url in _URL.findall(_read(meta)):
                found[url] = None
    for path in sorted(_stdlib().glob("*.py")):
        for url in _URL.findall(_read(path)):
            found[url] = None
    ordered = list(found)
    docs = ["\n".join(ordered[i : i + 25]) for i in range(0, len(ordered), 25)]
    return _take(docs)


CATEGORIES: dict[str, Callable[[], list[str]]] = {
    "english prose": english_prose,
    "chinese prose": chinese_prose,
    "mixed zh/en + code": mixed_technical,
    "japanese/korean": japanese_korean,
    "cyrillic/greek": cyrillic_greek,
    "python source": python_source,
    "json": json_documents,
    "base64": base64_documents,
    "urls": urls,
    "hex digests": hex_digests,
}


def load_corpus() -> dict[str, list[str]]:
    """Read every category from disk; a category with no files maps to an empty list."""
    return {name: loader() for name, loader in CATEGORIES.items()}


if __name__ == "__main__":
    for name, docs in load_corpus().items():
        sizes = [len(d) for d in docs]
        print(f"{name:22} {len(docs):4} docs {sum(sizes):>9,} chars", file=sys.stdout)
