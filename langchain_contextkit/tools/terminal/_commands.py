"""What each command the terminal knows may be given: its options and its operands.

Only a command with a spec here can run. Options are an allowlist per command (which
also catches GNU's abbreviated long options); options that write, run programs, follow
symlinks out or read unchecked file names are refused with their reason. Values and
operands carry a kind telling the policy which are paths. The specs follow GNU coreutils
9, findutils 4.9, grep 3, GNU sed 4.8, gawk 5 and tree 2 (Debian 12).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["COMMANDS", "FIND_PRIMARIES", "FIND_REFUSED", "CommandSpec", "Kind", "Operands"]


class Kind(enum.Enum):
    """What an option value or operand is, for the policy."""

    TEXT = "text"
    """Not a path (a pattern, a number, a format)."""
    PATH = "path"
    """A path whose metadata is read (`find -newer`): confined, any file type."""
    INPUT = "input"
    """A file whose content is read: confined, and not a FIFO, device or socket."""
    INPUT_LIST = "input-list"
    """Colon-separated INPUTs (`file -m a:b`)."""
    NAMES0 = "names0"
    """A file of NUL-separated file names (`--files0-from`): it and every name confined."""
    NAMES_NL = "names-nl"
    """A file of newline-separated file names (`file -f`): it and every name confined."""


class Operands(enum.Enum):
    """How a command's operands are read."""

    PATHS = "paths"
    """Every operand is a path."""
    SCRIPT_THEN_PATHS = "script-then-paths"
    """The first operand is a pattern or program unless one came from an option."""
    TEXT = "text"
    """Operands are text (`echo`)."""


_R_WRITES = "it writes files, and this terminal is read-only"
_R_RUNS = "it runs other programs"
_R_FOLLOWS = "it follows symlinks, which can lead out of the workspace"
_R_HANGS = "it waits for more input forever; use tail -n N instead"
_R_AWK_FILES = (
    "awk programs are given inline, without @-directives: @include and program files "
    "could read files outside the workspace"
)
_R_STDIN_NAMES = "it reads file names from a list the tool cannot vet"


def _longs(names: str) -> frozenset[str]:
    return frozenset(f"--{n}" for n in names.split())


def _kinds(names: str, kind: Kind) -> dict[str, Kind]:
    return {f"--{n}": kind for n in names.split()}


def _refused(reason: str, options: str) -> dict[str, str]:
    return dict.fromkeys(options.split(), reason)


@dataclass(frozen=True, kw_only=True)
class CommandSpec:
    """The options and operands one command accepts."""

    flags: str = ""
    """Short options without a value (`"alR"`)."""
    short_values: Mapping[str, Kind] = field(default_factory=dict)
    """Short options that take a value, and its kind."""
    long_flags: frozenset[str] = frozenset()
    """Long options without a value (`--all`)."""
    long_values: Mapping[str, Kind] = field(default_factory=dict)
    """Long options that take a value (`--file=F` or `--file F`)."""
    long_optional: Mapping[str, Kind] = field(default_factory=dict)
    """Long options whose value is optional: only `--color=never` gives one."""
    refused: Mapping[str, str] = field(default_factory=dict)
    """Options refused outright, with the reason shown to the model."""
    operands: Operands = Operands.PATHS
    reads: bool = True
    """Whether path operands are read for content (so FIFOs and devices are refused)."""
    max_operands: int | None = None
    """Cap on operands (`uniq IN OUT` would write OUT)."""
    max_operands_reason: str = ""
    script_options: frozenset[str] = frozenset()
    """Options that supply the pattern or program (`grep -e`), freeing the first operand."""
    numeric_option: bool = False
    """Whether `-NUM` is an option (`head -5`, `grep -3`)."""
    attached_values: bool = True
    """Whether a short option's value may follow it in the same word (`-n5`)."""
    permute: bool = True
    """Whether options may follow operands (GNU getopt); if not, the first operand ends them."""
    inject: tuple[str, ...] = ()
    """Options the tool always adds (`--sandbox`)."""
    script_refused: tuple[re.Pattern[str], str] | None = None
    """A pattern no inline script may contain, and why (gawk's `@include`)."""
    binary: str | None = None
    """The executable to run, when it is not the command's own name (`awk` runs `gawk`)."""
    note: str = ""
    """Shown in the tool description when the command is allowed."""


_HELP = "help version"

_LS = CommandSpec(
    flags="aAbBcCdDfFgGhHiklmnNopqQrRsStuUvxXZ1",
    short_values={"I": Kind.TEXT, "T": Kind.TEXT, "w": Kind.TEXT},
    long_flags=_longs(
        "all almost-all author escape ignore-backups directory dired file-type full-time "
        "group-directories-first no-group human-readable si dereference-command-line "
        "dereference-command-line-symlink-to-dir inode kibibytes literal numeric-uid-gid "
        "quote-name recursive reverse size context zero hide-control-chars "
        f"show-control-chars {_HELP}"
    ),
    long_values=_kinds(
        "block-size format hide indicator-style ignore quoting-style sort time time-style "
        "tabsize width",
        Kind.TEXT,
    ),
    long_optional=_kinds("classify color colour hyperlink", Kind.TEXT),
    refused=_refused(_R_FOLLOWS, "-L --dereference"),
    reads=False,
)

_CAT = CommandSpec(
    flags="AbeEnstTuv",
    long_flags=_longs(
        "show-all number-nonblank show-ends number squeeze-blank show-tabs "
        f"show-nonprinting {_HELP}"
    ),
)

_HEAD = CommandSpec(
    flags="qvz",
    short_values={"c": Kind.TEXT, "n": Kind.TEXT},
    long_flags=_longs(f"quiet silent verbose zero-terminated {_HELP}"),
    long_values=_kinds("bytes lines", Kind.TEXT),
    numeric_option=True,
)

_TAIL = CommandSpec(
    flags="qvz",
    short_values={"c": Kind.TEXT, "n": Kind.TEXT},
    long_flags=_longs(f"quiet silent verbose zero-terminated {_HELP}"),
    long_values=_kinds("bytes lines", Kind.TEXT),
    refused=_refused(
        _R_HANGS, "-f -F -s --follow --retry --pid --sleep-interval --max-unchanged-stats"
    ),
    numeric_option=True,
)

_WC = CommandSpec(
    flags="cmlLw",
    long_flags=_longs(f"bytes chars lines words max-line-length {_HELP}"),
    long_values={"--files0-from": Kind.NAMES0, "--total": Kind.TEXT},
)

_GREP = CommandSpec(
    flags="EFGPiyvwxclLoqsbHhnTZzraIU",
    short_values={
        "e": Kind.TEXT,
        "f": Kind.INPUT,
        "m": Kind.TEXT,
        "A": Kind.TEXT,
        "B": Kind.TEXT,
        "C": Kind.TEXT,
        "d": Kind.TEXT,
        "D": Kind.TEXT,
    },
    long_flags=_longs(
        "extended-regexp fixed-strings basic-regexp perl-regexp ignore-case no-ignore-case "
        "invert-match word-regexp line-regexp count files-with-matches "
        "files-without-match only-matching quiet silent no-messages byte-offset "
        "with-filename no-filename line-number initial-tab null null-data text recursive "
        f"line-buffered no-group-separator {_HELP}"
    ),
    long_values={
        **_kinds(
            "regexp max-count after-context before-context context label include exclude "
            "exclude-dir directories devices binary-files group-separator",
            Kind.TEXT,
        ),
        "--file": Kind.INPUT,
        "--exclude-from": Kind.INPUT,
    },
    long_optional=_kinds("color colour", Kind.TEXT),
    refused=_refused(_R_FOLLOWS, "-R --dereference-recursive"),
    operands=Operands.SCRIPT_THEN_PATHS,
    script_options=frozenset({"-e", "-f", "--regexp", "--file"}),
    numeric_option=True,
)

_TREE = CommandSpec(
    flags="adfxqNQpugshDFvtcUriASnCXJ",
    short_values={"L": Kind.TEXT, "P": Kind.TEXT, "I": Kind.TEXT, "H": Kind.TEXT, "T": Kind.TEXT},
    long_flags=_longs(
        "gitignore matchdirs metafirst ignore-case nolinks inodes device dirsfirst "
        f"filesfirst si du prune info noreport {_HELP}"
    ),
    long_values={
        **_kinds("sort filelimit charset timefmt", Kind.TEXT),
        **_kinds("gitfile infofile hintro houtro", Kind.INPUT),
    },
    refused={
        **_refused(_R_FOLLOWS, "-l"),
        **_refused(_R_WRITES, "-o -R"),
        **_refused(_R_STDIN_NAMES, "--fromfile --fflinks"),
    },
    reads=False,
    # tree parses its own arguments: `-L3` is not `-L 3`, so values come as the next word.
    attached_values=False,
)

_STAT = CommandSpec(
    flags="Lft",
    short_values={"c": Kind.TEXT},
    long_flags=_longs(f"dereference file-system terse {_HELP}"),
    long_values=_kinds("format printf cached", Kind.TEXT),
    reads=False,
)

_FILE = CommandSpec(
    flags="bcdEhiklLnN0rv",
    short_values={
        "e": Kind.TEXT,
        "F": Kind.TEXT,
        "P": Kind.TEXT,
        "m": Kind.INPUT_LIST,
        "f": Kind.NAMES_NL,
    },
    long_flags=_longs(
        "brief checking-printout debug mime mime-type mime-encoding apple extension "
        f"keep-going list dereference no-dereference no-buffer no-pad print0 raw {_HELP}"
    ),
    long_values={
        **_kinds("exclude exclude-quiet separator parameter", Kind.TEXT),
        "--magic-file": Kind.INPUT_LIST,
        "--files-from": Kind.NAMES_NL,
    },
    refused={
        **_refused(_R_WRITES, "-C --compile -p --preserve-date"),
        **_refused(_R_RUNS, "-z -Z --uncompress --uncompress-noreport"),
        **_refused("it reads device files", "-s --special-files"),
        **_refused("it turns off file's own system-call sandbox", "-S --no-sandbox"),
    },
    reads=False,
)

_DU = CommandSpec(
    flags="0abcDHhklmPsSx",
    short_values={"d": Kind.TEXT, "t": Kind.TEXT, "B": Kind.TEXT, "X": Kind.INPUT},
    long_flags=_longs(
        "null all apparent-size bytes total dereference-args count-links separate-dirs "
        f"summarize one-file-system human-readable si inodes no-dereference {_HELP}"
    ),
    long_values={
        **_kinds("block-size max-depth threshold time-style exclude", Kind.TEXT),
        "--exclude-from": Kind.INPUT,
        "--files0-from": Kind.NAMES0,
    },
    long_optional=_kinds("time", Kind.TEXT),
    refused=_refused(_R_FOLLOWS, "-L --dereference"),
    reads=False,
)

_SORT = CommandSpec(
    flags="bdfghiMnRrVcCmsuz",
    short_values={"k": Kind.TEXT, "t": Kind.TEXT, "S": Kind.TEXT},
    long_flags=_longs(
        "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort "
        "ignore-nonprinting month-sort human-numeric-sort numeric-sort random-sort reverse "
        f"version-sort merge stable unique zero-terminated debug {_HELP}"
    ),
    long_values={
        **_kinds("key field-separator buffer-size parallel sort batch-size", Kind.TEXT),
        "--random-source": Kind.INPUT,
        "--files0-from": Kind.NAMES0,
    },
    long_optional=_kinds("check", Kind.TEXT),
    refused={
        **_refused(_R_WRITES, "-o --output -T --temporary-directory"),
        **_refused(_R_RUNS, "--compress-program"),
    },
)

_UNIQ = CommandSpec(
    flags="cdDiuz",
    short_values={"f": Kind.TEXT, "s": Kind.TEXT, "w": Kind.TEXT},
    long_flags=_longs(f"count repeated unique ignore-case zero-terminated {_HELP}"),
    long_values=_kinds("skip-fields skip-chars check-chars", Kind.TEXT),
    long_optional=_kinds("all-repeated group", Kind.TEXT),
    max_operands=1,
    max_operands_reason="uniq's second operand is an output file, and this terminal is read-only",
)

_CUT = CommandSpec(
    flags="nsz",
    short_values={"b": Kind.TEXT, "c": Kind.TEXT, "f": Kind.TEXT, "d": Kind.TEXT},
    long_flags=_longs(f"complement only-delimited zero-terminated {_HELP}"),
    long_values=_kinds("bytes characters fields delimiter output-delimiter", Kind.TEXT),
)

# echo prints its words; none of them is a path, and it opens nothing.
_ECHO = CommandSpec(operands=Operands.TEXT, reads=False)

# find is parsed by the policy itself (an expression, not options); this spec only
# marks it as known.
_FIND = CommandSpec(reads=False)

_SED = CommandSpec(
    flags="nErsuz",
    short_values={"e": Kind.TEXT, "f": Kind.INPUT, "l": Kind.TEXT},
    long_flags=_longs(
        f"quiet silent regexp-extended separate unbuffered null-data posix debug sandbox {_HELP}"
    ),
    long_values={**_kinds("expression line-length", Kind.TEXT), "--file": Kind.INPUT},
    refused={
        **_refused(_R_WRITES, "-i --in-place"),
        **_refused(_R_FOLLOWS, "--follow-symlinks"),
    },
    operands=Operands.SCRIPT_THEN_PATHS,
    script_options=frozenset({"-e", "-f", "--expression", "--file"}),
    # GNU sed's sandbox refuses the e, r, R, w and W commands (run, read, write files).
    inject=("--sandbox",),
    note="sed runs as `sed --sandbox` (no e/r/w commands), never in place",
)

_AWK = CommandSpec(
    flags="bcCMnNOPrsStV",
    short_values={"e": Kind.TEXT, "F": Kind.TEXT, "v": Kind.TEXT},
    long_flags=_longs(
        "characters-as-bytes traditional copyright bignum use-lc-numeric non-decimal-data "
        f"optimize posix re-interval no-optimize sandbox lint-old {_HELP}"
    ),
    long_values=_kinds("source field-separator assign", Kind.TEXT),
    refused={
        **_refused(_R_WRITES, "-d -o -p --dump-variables --pretty-print --profile"),
        **_refused(_R_RUNS, "-E --exec -i --include -l --load"),
        **_refused("it is interactive", "-D --debug"),
        **_refused("use the --long spelling instead", "-W"),
        **_refused("lint output is not needed here", "-L --lint"),
        **_refused(_R_AWK_FILES, "-f --file"),
    },
    operands=Operands.SCRIPT_THEN_PATHS,
    script_options=frozenset({"-e", "--source"}),
    # @include and @load read files at parse time, sandbox or not (parse errors would
    # echo their lines); @ followed by a name covers every directive.
    script_refused=(re.compile(r"@\s*[A-Za-z_]"), _R_AWK_FILES),
    # gawk's getopt string starts with '+': options end at the first operand.
    permute=False,
    # gawk's sandbox refuses system(), pipes, redirections and new files added to ARGV.
    inject=("--sandbox",),
    binary="gawk",
    note="awk runs as `gawk --sandbox` (no system(), pipes or redirections)",
)

COMMANDS: Mapping[str, CommandSpec] = MappingProxyType(
    {
        "cat": _CAT,
        "cut": _CUT,
        "du": _DU,
        "echo": _ECHO,
        "file": _FILE,
        "find": _FIND,
        "grep": _GREP,
        "head": _HEAD,
        "ls": _LS,
        "sort": _SORT,
        "stat": _STAT,
        "tail": _TAIL,
        "tree": _TREE,
        "uniq": _UNIQ,
        "wc": _WC,
        "sed": _SED,
        "awk": _AWK,
    }
)
"""Every command the tool can run (besides `cd` and `pwd`, which it handles itself)."""


def _primaries(names: str, arity: int | Kind) -> dict[str, int | Kind]:
    return dict.fromkeys(names.split(), arity)


FIND_PRIMARIES: Mapping[str, int | Kind] = MappingProxyType(
    {
        # Tests, actions and options without an argument.
        **_primaries(
            "-empty -executable -false -nogroup -nouser -readable -true -writable -print "
            "-print0 -ls -prune -quit -depth -d -mount -xdev -noleaf -ignore_readdir_race "
            "-noignore_readdir_race -daystart -warn -nowarn -not -a -and -o -or -help "
            "--help -version --version ! ( ) ,",
            0,
        ),
        # Tests, actions and options whose argument is text.
        **_primaries(
            "-amin -atime -cmin -ctime -mmin -mtime -used -fstype -gid -group -ilname "
            "-iname -inum -ipath -iregex -iwholename -links -lname -name -path -perm -regex "
            "-size -type -uid -user -wholename -xtype -context -printf -regextype "
            "-maxdepth -mindepth",
            Kind.TEXT,
        ),
        # Tests whose argument is a file whose metadata is compared.
        **_primaries("-anewer -cnewer -newer -samefile", Kind.PATH),
        "-files0-from": Kind.NAMES0,
    }
)
"""find's expression words: how many text arguments they take, or their argument's kind."""

FIND_REFUSED: Mapping[str, str] = MappingProxyType(
    {
        **_refused(_R_RUNS, "-exec -execdir -ok -okdir"),
        **_refused(_R_WRITES, "-delete -fprint -fprint0 -fprintf -fls"),
        **_refused(_R_FOLLOWS, "-follow -L"),
    }
)
"""find's refused words and why."""
