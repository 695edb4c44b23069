"""A token-counting corpus read from files already on this machine.

Besides prose, source and data, it holds what tools print and users paste: man pages
rendered by groff with their layout (`rendered_man_pages`), the translated messages of
dozens of languages and scripts (`catalogue`, from the .mo files under /usr/share/locale),
C, shell, Perl and JavaScript source, YAML, CSV, `hexdump -C` output, base64 of compressed
and of zero-filled data, and chat lines with emoji. Every loader is deterministic: sorted
paths, fixed strides. `fit_sample` and `judged_sample` split each category in two, so the
weights are fitted on one half and judged on the other.

Nothing here is generated or copied into the repository: every document is read at
benchmark time from the Python installation, Debian's shared data (licences, gettext
catalogues, CA certificates, man pages, package documentation, the package manager's logs
in /var/log) and the project's Chinese
specification documents in `../shared/seeds`. A category whose files are missing is
reported empty, not faked.

Man pages come in two forms, because users paste both: one category per language holds
their text as a reader sees it (`_roff_text` drops the markup: control lines, font
escapes, comments), so each category measures the language itself rather than the ASCII
markup around it; one more category holds the raw roff sources of every language.

Each category is a list of documents of roughly `_DOC_CHARS` characters, cut at line
boundaries, so per-document errors are measured on prompt-sized pieces of text.
"""

from __future__ import annotations

import ast
import base64
import gettext
import gzip
import json
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import unicodedata
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
_MAN = Path("/usr/share/man")
_DOC = Path("/usr/share/doc")
MAN_LANGUAGES = (
    *("cs", "da", "de", "es", "fi", "fr", "hr", "hu", "id", "it", "ja", "ko", "nl"),
    *("pl", "pt", "pt_BR", "ro", "ru", "sl", "sr", "sv", "tr", "uk", "zh_CN", "zh_TW"),
)
"""The translated man-page folders of Debian's packages, one category each."""


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
        except (OSError, UnicodeDecodeError, struct.error):
            continue
        messages = [v for k, v in catalogue._catalog.items() if k and isinstance(v, str)]  # noqa: SLF001
        yield "\n".join(m for m in messages if _share(m, script) > 0.3)


def _gunzip(path: Path) -> str:
    try:
        return gzip.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError):
        return ""


def _man_sources(folder: Path, limit: int | None = None) -> list[str]:
    """The roff sources under `folder`/man*/, without symlinks and `.so` redirections.

    With `limit`, a sample of about that many files spread over the sorted list (the
    English folders hold thousands of pages).
    """
    paths = sorted(p for p in folder.glob("man*/*.gz") if p.is_file() and not p.is_symlink())
    if limit is not None and len(paths) > limit:
        paths = paths[:: len(paths) // limit]
    sources = (_gunzip(p) for p in paths)
    return [s for s in sources if s.strip() and not s.lstrip().startswith(".so ")]


# One roff escape: a font, size, register or string (`\fB`, `\s-1`, `\n(.g`, `\*(Aq`), a
# named glyph (`\(em`, `\[aq]`), a comment to the end of the line, or a one-character one.
_ROFF_ESCAPE = re.compile(
    r'\\(?:([fsn*])(?:\[([^\]]*)\]|\(([^\s]{2})|([+-]?\d|.))|\(([^\s]{2})|\[([^\]]*)\]|"[^\n]*|(.))'
)
_ROFF_GLYPHS = {
    "aq": "'",
    "Aq": "'",
    "dq": '"',
    "em": "—",
    "en": "–",
    "hy": "-",
    "bu": "•",
    "lq": "“",
    "rq": "”",
    "oq": "‘",
    "cq": "’",
    "ga": "`",
    "ha": "^",
    "ti": "~",
    "rs": "\\",
    "mi": "-",
    "pl": "+",
    "mu": "×",
    "de": "°",
    "co": "©",
    "R": "®",
    "ra": "→",
    "la": "←",
    "<=": "≤",
    ">=": "≥",
    "Fo": "«",
    "Fc": "»",
    "Tm": "™",
}
_ROFF_SIMPLE = {"e": "\\", " ": " ", "~": " ", "0": " ", "t": "\t"}
_ROFF_SILENT = set("&|^c%:{}),/!")
_ROFF_ARGUMENT = re.compile(r'"([^"]*)"?|(\S+)')
_ROFF_FONT_MACROS = {"B", "I", "BR", "BI", "IB", "RB", "IR", "RI", "SM", "SB", "SH", "SS"}
_ROFF_CONDITION = re.compile(r"^[.'](?:if|ie)\s+\S+\s+(.*)$|^[.']el\s+(.*)$")


# groff's accented letters (`\(:u` is ü, `\('e` is é) and Unicode glyphs (`\[u00FC]`,
# `\[u0075_0308]`): German, French, Polish... man pages write most of their letters so.
_ROFF_ACCENTS = {
    ":": "\u0308",
    "'": "\u0301",
    "`": "\u0300",
    "^": "\u0302",
    "~": "\u0303",
    ",": "\u0327",
    "v": "\u030c",
    "o": "\u030a",
}
_ROFF_LETTERS = {
    "ss": "ß",
    "ae": "æ",
    "AE": "Æ",
    "oe": "œ",
    "OE": "Œ",
    "/o": "ø",
    "/O": "Ø",
    "/l": "ł",
    "/L": "Ł",
    "-D": "Đ",
    "Sd": "ð",
    "TP": "Þ",
    "Tp": "þ",
}


def _roff_glyph(name: str) -> str:
    """The character a named roff glyph stands for ("" for one this corpus does not know)."""
    if name in _ROFF_GLYPHS:
        return _ROFF_GLYPHS[name]
    if name in _ROFF_LETTERS:
        return _ROFF_LETTERS[name]
    if len(name) == 2 and name[0] in _ROFF_ACCENTS and name[1].isalpha():
        return unicodedata.normalize("NFC", name[1] + _ROFF_ACCENTS[name[0]])
    if re.fullmatch(r"u[0-9A-F]{4,6}(?:_[0-9A-F]{4,6})*", name):
        return unicodedata.normalize("NFC", "".join(chr(int(h, 16)) for h in name[1:].split("_")))
    return ""


def _roff_escape(match: re.Match[str]) -> str:
    kind, long_name, short_name, tail, glyph_short, glyph_long, char = match.groups()
    if kind == "*":  # an interpolated string: the few that stand for a character
        return _ROFF_GLYPHS.get(long_name or short_name or tail or "", "")
    if kind:  # font, size or register: invisible
        return ""
    if glyph_short or glyph_long:
        return _roff_glyph(glyph_short or glyph_long)
    if char is None or char in _ROFF_SILENT:  # a comment or a zero-width escape
        return ""
    return _ROFF_SIMPLE.get(char, char)  # \- \. \' and the like stand for themselves


def _roff_line(line: str) -> str | None:
    """The visible text of one roff line, or None for a line a reader does not see."""
    condition = _ROFF_CONDITION.match(line)
    if condition:  # `.if COND .BR x y` shows `x y` (po4a's `!'po4a'hide'` guard holds)
        line = condition.group(1) or condition.group(2) or ""
        if line.startswith("\\{"):
            return None
    if not line.startswith((".", "'")):
        return line
    macro, _, rest = line[1:].strip().partition(" ")
    if macro not in _ROFF_FONT_MACROS and macro not in {"IP", "TQ"}:
        return None  # layout requests (.PP, .TP 5, .br, .nf, .de ...) and comments
    words = [quoted or bare for quoted, bare in _ROFF_ARGUMENT.findall(rest)]
    if macro == "IP":
        return words[0] if words else None
    # .BR a b: alternating fonts join their arguments; .B a b keeps the spaces.
    alternating = len(macro) == 2 and macro not in {"SH", "SS", "SM", "SB"}
    return ("" if alternating else " ").join(words)


def _roff_text(source: str) -> str:
    """The text of a man page as a reader sees it, without the terminal's layout."""
    lines = (_roff_line(line) for line in source.splitlines())
    text = _ROFF_ESCAPE.sub(_roff_escape, "\n".join(ln for ln in lines if ln is not None))
    return re.sub(r"\n{3,}", "\n\n", text)


def man_pages(lang: str) -> Callable[[], list[str]]:
    """A loader for one language's man pages, as text."""

    def load() -> list[str]:
        texts = [_roff_text(s) for s in _man_sources(_MAN / lang)]
        return _take(c for t in texts for c in _chunks(t))

    load.__name__ = f"man_pages_{lang}"
    return load


def english_man_pages() -> list[str]:
    texts = [_roff_text(s) for s in _man_sources(_MAN, limit=200)]
    return _take(c for t in texts for c in _chunks(t))


def man_roff_sources() -> list[str]:
    """Raw roff, as pasted from a source tree: a few pages of every language."""
    folders = [_MAN, *(_MAN / lang for lang in MAN_LANGUAGES)]
    texts = [s for folder in folders for s in _man_sources(folder, limit=4)[:4]]
    return _take(c for t in texts for c in _chunks(t))


def debian_docs() -> list[str]:
    """Package documentation: copyright files, changelogs, READMEs and NEWS."""
    texts: list[str] = []
    for package in sorted(_DOC.iterdir()) if _DOC.is_dir() else []:
        for name in ("copyright", "changelog.Debian.gz", "README.Debian", "NEWS.Debian.gz"):
            path = package / name
            if path.is_file():
                texts.append(_gunzip(path) if name.endswith(".gz") else _read(path))
    return _take(c for t in texts[::5] for c in _chunks(t))


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


_LOGS = Path("/var/log")


def system_logs() -> list[str]:
    """Not one of the required categories: the package manager's logs, as pasted.

    dpkg, apt and update-alternatives logs. Short numbered lines are what cl100k
    prices dearest per character: every number and every space before one is a token.
    Read where the machine has them (rotated or compressed copies too), else empty.
    """
    paths = [
        p
        for pattern in ("dpkg.log*", "alternatives.log*", "apt/history.log*", "apt/term.log*")
        for p in sorted(_LOGS.glob(pattern))
        if p.is_file()
    ]
    texts = [_gunzip(p) if p.suffix == ".gz" else _read(p) for p in paths]
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


# --- The wider corpus: what users paste and tools print, in every script --------------------

_GROFF = ("groff", "-Tutf8", "-mandoc", "-K", "utf8", "-P", "-cbou", "-rLL=78n")
_RENDER_PAGES = 24
CATALOGUE_LANGUAGES = (
    *("th", "hi", "ar", "vi", "he", "fa", "ka", "am", "bn", "ta", "km", "my", "si", "ml"),
    *("te", "kn", "gu", "pa", "mr", "ne", "hy", "kk", "be", "bg", "cy", "el", "uk", "sr"),
    *("mk", "ug", "yi", "de", "pl", "tr", "hu", "fr", "es", "ru", "zh_TW", "ja", "ko"),
)
"""Languages whose gettext catalogues (/usr/share/locale/<lang>) form one category each."""
_CATALOGUE_DOCS = 16


def _render(source: str) -> str:
    """A man page as `man` shows it: groff's terminal output, layout kept, no overstrike."""
    groff = shutil.which(_GROFF[0])
    if groff is None:
        return ""
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argument list, no shell
            [groff, *_GROFF[1:]],
            input=source.encode("utf-8"),
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""


def rendered_man_pages(lang: str | None) -> Callable[[], list[str]]:
    """A loader for one language's man pages rendered with their layout (None: English)."""

    def load() -> list[str]:
        folder = _MAN if lang is None else _MAN / lang
        sources = _man_sources(folder, limit=_RENDER_PAGES)[:_RENDER_PAGES]
        return _take(c for s in sources for c in _chunks(_render(s)))

    load.__name__ = f"rendered_man_pages_{lang or 'en'}"
    return load


def _all_messages(lang: str) -> str:
    """Every translated message of one language's catalogues, in a fixed order."""
    folder = _LOCALE / lang / "LC_MESSAGES"
    out: list[str] = []
    for mo in sorted(folder.glob("*.mo")) if folder.is_dir() else []:
        if mo.name.startswith("iso_"):
            continue
        try:
            with mo.open("rb") as fh:
                catalogue = gettext.GNUTranslations(fh)
        except (OSError, UnicodeDecodeError, struct.error):
            continue
        out += [v for k, v in catalogue._catalog.items() if k and isinstance(v, str)]  # noqa: SLF001
    return "\n".join(out)


def catalogue(lang: str) -> Callable[[], list[str]]:
    """A loader for one language's translated messages (the .mo files Debian installs)."""

    def load() -> list[str]:
        return _take(_chunks(_all_messages(lang)), limit=_CATALOGUE_DOCS)

    load.__name__ = f"catalogue_{lang}"
    return load


def _files(roots: Iterable[Path], patterns: tuple[str, ...], limit: int) -> list[Path]:
    found = sorted(
        {p for root in roots if root.is_dir() for pat in patterns for p in root.rglob(pat)}
    )
    found = [p for p in found if p.is_file() and not p.is_symlink()]
    return found[:: max(1, len(found) // limit)][:limit]


def c_source() -> list[str]:
    paths = _files([Path("/usr/include")], ("*.h",), 120)
    return _take(c for p in paths for c in _chunks(_read(p)))


def shell_and_perl() -> list[str]:
    roots = [Path("/usr/share/perl5"), Path("/usr/share/perl"), Path("/etc")]
    paths = _files(roots, ("*.pm", "*.sh"), 120)
    return _take(c for p in paths for c in _chunks(_read(p)))


def javascript_source() -> list[str]:
    paths = _files([Path("/usr/share"), *_site_packages()], ("*.js",), 60)
    return _take(c for p in paths if not p.name.endswith(".min.js") for c in _chunks(_read(p)))


def yaml_documents() -> list[str]:
    roots = [Path("/usr/share"), Path("/etc"), *_site_packages()]
    paths = _files(roots, ("*.yaml", "*.yml"), 200)
    return _take(c for p in paths for c in _chunks(_read(p)))


def csv_documents() -> list[str]:
    roots = [Path("/usr/share"), *_site_packages()]
    paths = _files(roots, ("*.csv",), 60)
    return _take(c for p in paths for c in _chunks(_read(p)))


def _binaries(limit: int) -> list[bytes]:
    paths = _files([Path("/usr/bin")], ("*",), limit)
    return [data for data in map(_read_head, paths) if data]


def _read_head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(65536)
    except OSError:
        return b""


def _hexdump(data: bytes, offset: int) -> str:
    """`hexdump -C` of `data`, as a terminal prints it."""
    lines = []
    for at in range(0, len(data), 16):
        row = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in row[:8]) + "  " + " ".join(f"{b:02x}" for b in row[8:])
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{offset + at:08x}  {hexes:<48}  |{text}|")
    return "\n".join(lines) + "\n"


def hexdumps() -> list[str]:
    docs = []
    for data in _binaries(60):
        at = (len(data) // 3) & ~15
        docs.append(_hexdump(data[at : at + 512], at))
    return _take(docs)


def base64_compressed() -> list[str]:
    """base64 of compressed files (man pages' .gz), wrapped at 76 as MIME does."""
    paths = sorted(p for p in _MAN.glob("man1/*.gz") if p.is_file() and not p.is_symlink())
    docs = []
    for p in paths[:: max(1, len(paths) // 60)][:60]:
        encoded = base64.b64encode(p.read_bytes()[:1500]).decode()
        docs.append("\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76)))
    return _take(docs)


def base64_sparse() -> list[str]:
    """base64 of sparse data: the zero-filled headers of the machine's executables."""
    docs = []
    for data in _binaries(60):
        encoded = base64.b64encode(data[:1500]).decode()
        docs.append("\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76)))
    return _take(docs)


_EMOJI = (
    *("\U0001f600", "\U0001f602", "\U0001f44d", "\U0001f44d\U0001f3fd", "\u2764\ufe0f"),
    *("\U0001f389", "\U0001f680", "\U0001f914", "\U0001f64f\U0001f3fb", "\u2705", "\U0001f525"),
    *("\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1e9\U0001f1ea", "\U0001f60d"),
    *("\U0001f469\U0001f3fe\u200d\U0001f4bb", "\U0001f62d", "\u2728", "\U0001f440", "\U0001f4a1"),
)
"""Emoji as chat writes them: with skin tones, ZWJ families, flags, variation selectors."""


def emoji_chat() -> list[str]:
    """Chat lines (English catalogue messages) with emoji, mixed as people write them."""
    messages = [m for m in _all_messages("en_GB").splitlines() if 10 < len(m) < 120]
    if len(messages) < 200:
        messages = [m for m in _all_messages("de").splitlines() if 10 < len(m) < 120]
    lines = []
    for i, message in enumerate(messages[:: max(1, len(messages) // 1500)]):
        emoji = "".join(_EMOJI[(i * 7 + k) % len(_EMOJI)] for k in range(1 + i % 4))
        speaker = ("alice", "bob", "carol")[i % 3]
        lines.append(f"{speaker}: {message} {emoji}" if i % 2 else f"{speaker}: {emoji} {message}")
    return _take(_chunks("\n".join(lines)))


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
    "system logs": system_logs,
    "debian docs": debian_docs,
    "man en": rendered_man_pages(None),
    **{f"man {lang}": rendered_man_pages(lang) for lang in MAN_LANGUAGES},
    "man roff sources": man_roff_sources,
    **{f"mo {lang}": catalogue(lang) for lang in CATALOGUE_LANGUAGES},
    "c source": c_source,
    "shell/perl": shell_and_perl,
    "javascript": javascript_source,
    "yaml": yaml_documents,
    "csv": csv_documents,
    "hexdump": hexdumps,
    "base64 compressed": base64_compressed,
    "base64 sparse": base64_sparse,
    "emoji chat": emoji_chat,
}


def load_corpus() -> dict[str, list[str]]:
    """Read every category from disk; a category with no files maps to an empty list."""
    return {name: loader() for name, loader in CATEGORIES.items()}


def fit_sample(docs: list[str]) -> list[str]:
    """The documents `fit_token_weights.py` fits on: every other one, from the first."""
    return docs[0::2]


def judged_sample(docs: list[str]) -> list[str]:
    """The documents `bench_tokens.py` judges: the others, never seen by the fit."""
    return docs[1::2]


if __name__ == "__main__":
    for name, docs in load_corpus().items():
        sizes = [len(d) for d in docs]
        print(f"{name:22} {len(docs):4} docs {sum(sizes):>9,} chars", file=sys.stdout)
