"""Adversarial suite: escape attempts against TerminalTool, in both sandbox modes.

Every attempt runs with canaries that prove it failed: the secret token outside the
root never appears in the output, no file is created or changed anywhere under the test
directory, no process is left with its directory in the workspace, and the call
returns within its timeout. Attempts marked REFUSED must also come back as an error
message (the argument policy caught them before anything ran).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from terminal_world import HAS_GAWK, MODES, World, build_world, processes_in, snapshot

from langchain_contextkit.tools import TerminalTool

TIMEOUT = 2.0
REFUSED, ANY = "refused", "any"


@dataclass(frozen=True)
class Attempt:
    id: str
    commands: tuple[str, ...]
    expect: str = REFUSED


def a(id_: str, *commands: str, expect: str = REFUSED) -> Attempt:
    return Attempt(id_, commands, expect)


S = "../outside/secret.txt"

ATTEMPTS = [
    # Shell syntax: sequencing, redirection, substitution, expansion.
    a("semicolon", f"ls; cat {S}"),
    a("and", f"ls && cat {S}"),
    a("or", f"ls || cat {S}"),
    a("background", f"ls & cat {S}"),
    a("redirect-in", f"cat < {S}"),
    a("redirect-out", "ls > out.txt"),
    a("redirect-append", "ls >> out.txt"),
    a("redirect-fd", "ls 2>out.txt"),
    a("redirect-both", "ls &>out.txt"),
    a("cmd-subst", f"echo $(cat {S})"),
    a("backticks", f"echo `cat {S}`"),
    a("cmd-subst-in-dquotes", f'echo "$(cat {S})"'),
    a("backticks-in-dquotes", f'echo "`cat {S}`"'),
    a("var", "echo $HOME"),
    a("var-braces", "echo ${HOME}"),
    a("var-path", "cat $PWD/../outside/secret.txt"),
    a("var-in-dquotes", 'echo "$CONTEXTKIT_CANARY"'),
    a("ansi-c-quote", "cat $'\\x2e\\x2e/outside/secret.txt'"),
    a("newline", f"ls\ncat {S}"),
    a("carriage-return", f"ls\rcat {S}"),
    a("heredoc", "cat <<EOF\nx\nEOF"),
    a("subshell", f"(cat {S})"),
    a("pipe-stderr", f"ls |& cat {S}"),
    a("tilde", "ls ~"),
    a("tilde-user", "cat ~root/.bashrc"),
    a("comment", f"ls # ; cat {S}"),
    a("lone-backslash", "ls \\"),
    a("unterminated-quote", f"cat '{S}"),
    # Not whitelisted: shells, interpreters, writers, wrappers.
    a("bash", f"bash -c 'cat {S}'"),
    a("sh", "sh -c id"),
    a("python", f"python3 -c 'print(open(\"{S}\").read())'"),
    a("absolute-cat", f"/bin/cat {S}"),
    a("relative-cat", f"./cat {S}"),
    a("env-wrapper", f"env cat {S}"),
    a("xargs", f"echo {S} | xargs cat"),
    a("pipe-to-sh", f"echo 'cat {S}' | sh"),
    a("glob-command-name", f"ca* {S}"),
    a("escaped-command-name", f"c\\at {S}"),
    a("quoted-command-name", f"'cat' {S}"),
    a("tee", "ls | tee out.txt"),
    a("cp", f"cp {S} stolen.txt"),
    a("sed-not-enabled", f"sed -n p {S}"),
    a("awk-not-enabled", f"awk 1 {S}"),
    # Paths out of the root.
    a("dotdot", f"cat {S}"),
    a("dot-dotdot", f"cat ./{S}"),
    a("inner-dotdot", f"cat docs/../{S}"),
    a("missing-dir-dotdot", "cat nope/../../outside/secret.txt"),
    a("quoted-dotdot", f"cat '{S}'"),
    a("dquoted-dotdot", f'cat "{S}"'),
    a("escaped-slash", "cat ..\\/outside/secret.txt"),
    a("etc-passwd", "cat /etc/passwd"),
    a("double-slashes", "cat //etc//passwd"),
    a("proc-environ", "cat /proc/self/environ"),
    a("proc-1-environ", "cat /proc/1/environ"),
    a("proc-cwd", f"cat /proc/self/cwd/{S}"),
    a("proc-root", "cat /proc/self/root/etc/passwd"),
    a("dev-stdin", "cat /dev/stdin"),
    a("dev-fd", "cat /dev/fd/0"),
    a("dev-zero", "cat /dev/zero"),
    a("dev-urandom", "head -c 100 /dev/urandom"),
    a("sys", "cat /sys/kernel/hostname"),
    a("ls-root", "ls /"),
    a("ls-parent", "ls .."),
    a("ls-recursive-root", "ls -R /"),
    a("stat-outside", f"stat {S}"),
    a("tree-outside", "tree ../outside"),
    a("du-outside", "du ../outside"),
    a("file-outside", f"file {S}"),
    a("wc-outside", f"wc -l {S}"),
    # Symlinks inside the root pointing out.
    a("symlink-file", "cat escape_link"),
    a("symlink-absolute", "cat escape_abs"),
    a("symlink-dir", "cat escape_dir/secret.txt"),
    a("symlink-dir-ls", "ls escape_dir"),
    a("symlink-etc", "cat etc_link/passwd"),
    a("symlink-grep-operand", "grep -r CANARY escape_dir"),
    a("grep-r-skips-links", "grep -r CANARY .", expect=ANY),
    a("grep-R", "grep -R CANARY ."),
    a("grep-dereference-recursive", "grep --dereference-recursive CANARY ."),
    a("find-L", "find -L . -name secret.txt"),
    a("find-follow", "find . -follow -name secret.txt"),
    a("find-through-link", "find escape_dir"),
    a("ls-L", "ls -L escape_dir"),
    a("du-L", "du -L ."),
    a("tree-l", "tree -l"),
    a("head-link-glob", "head trap_link/*"),
    a("cd-symlink-dir", "cd escape_dir", "cat secret.txt"),
    a("cd-symlink-etc", "cd etc_link", "cat passwd"),
    # find's actions.
    a("find-root", "find / -name secret.txt"),
    a("find-parent", "find .. -name secret.txt"),
    a("find-exec", "find . -name README.md -exec cat ../outside/secret.txt +"),
    a("find-execdir", "find . -execdir cat {} +"),
    a("find-ok", "find . -ok cat {} +"),
    a("find-okdir", "find . -okdir cat {} +"),
    a("find-delete", "find . -name README.md -delete"),
    a("find-fprint", "find . -fprint out.txt"),
    a("find-fprint0", "find . -fprint0 out.txt"),
    a("find-fprintf", "find . -fprintf out.txt %p"),
    a("find-fls", "find . -fls out.txt"),
    a("find-newer-outside", f"find . -newer {S}"),
    a("find-samefile-link", "find . -samefile escape_link"),
    a("find-files0-from", "find -files0-from lists/names0"),
    a("find-unknown-primary", "find . -frobnicate"),
    # Options whose values are paths, or that read names from elsewhere.
    a("grep-f", f"grep -f {S} docs"),
    a("grep-f-attached", f"grep -f{S} docs"),
    a("grep-file", f"grep --file={S} docs"),
    a("grep-file-separate", f"grep --file {S} docs"),
    a("grep-file-abbrev", f"grep --fil={S} docs"),
    a("grep-exclude-from", f"grep --exclude-from={S} x ."),
    a("wc-files0-from", "wc --files0-from=lists/names0"),
    a("wc-files0-from-stdin", f"echo {S} | wc --files0-from=-"),
    a("du-files0-from", "du --files0-from=lists/names0"),
    a("sort-files0-from", "sort --files0-from=lists/names0"),
    a("file-f", "file -f lists/names.txt"),
    a("file-f-stdin", f"echo {S} | file -f -"),
    a("file-m", f"file -m {S} README.md"),
    a("file-m-list", f"file -m README.md:{S} README.md"),
    a("file-compile", "file -C -m README.md"),
    a("file-uncompress", "file -z README.md"),
    a("file-special", "file -s fifo"),
    a("sort-random-source", f"sort -R --random-source={S} README.md"),
    a("tree-fromfile", "tree --fromfile lists/names.txt"),
    a("option-injection-glob", "cd trap_opt", "wc *", expect=ANY),
    a("option-after-dashdash", "cat -- --files0-from=lists/names0", expect=ANY),
    a("grep-pattern-after-dashdash", f"grep -- -f {S} docs"),
    a("dashdash-path", f"cat -- {S}"),
    # Output operands and writers.
    a("sort-o", "sort -o out.txt README.md"),
    a("sort-o-attached", "sort -oout.txt README.md"),
    a("sort-o-cluster", "sort -uo out.txt README.md"),
    a("sort-output", "sort --output=out.txt README.md"),
    a("sort-output-abbrev", "sort --out=out.txt README.md"),
    a("sort-compress-program", "sort --compress-program=sh README.md"),
    a("sort-temporary-directory", "sort -T . README.md"),
    a("uniq-output", "uniq README.md out.txt"),
    a("tree-o", "tree -o out.txt"),
    a("tree-R", "tree -R -L 1 -H x"),
    a("tree-L-attached", "tree -Lo out.txt"),
    a("tail-follow", "tail -f README.md"),
    a("tail-follow-long", "tail --follow=name README.md"),
    # Globs that reach out.
    a("glob-parent", "cat ../outside/*"),
    a("glob-absolute", "cat /etc/pass*"),
    a("glob-parent-star", "cat ../*/secret.txt"),
    a("glob-link-dir", "cat escape_dir/*"),
    a("glob-cd", "cd ../*"),
    # Blocking and huge inputs.
    a("fifo-cat", "cat fifo"),
    a("fifo-head", "head -n 1 fifo"),
    a("fifo-grep-operand", "grep x fifo"),
    a("fifo-recursive-read", "grep -r -D read x .", expect=ANY),
    a("stdin-cat", "cat", expect=ANY),
    a("stdin-sort", "sort", expect=ANY),
    a("stdin-grep", "grep x", expect=ANY),
    a("huge-file", "cat data/big.bin", expect=ANY),
    a("huge-sort", "sort data/big.bin", expect=ANY),
    # cd games.
    a("cd-parent", "cd .."),
    a("cd-root", "cd /"),
    a("cd-tmp", "cd /tmp"),
    a("cd-dotdot-deep", "cd src", "cd ../.."),
    a("cd-then-escape", "cd src/shop", f"cat ../../{S}"),
    a("cd-pipeline", "cd .. | ls"),
    a("pwd-pipeline", "pwd | cat"),
    # Unicode and NUL tricks.
    a("nul", f"cat README.md\0{S}"),
    a("escape-sequence", "cat \x1b[2J"),
    a("unicode-two-dot-leader", "cat \u2025/outside/secret.txt", expect=ANY),
    a("fullwidth-dots", "cat \uff0e\uff0e/outside/secret.txt", expect=ANY),
    a("fullwidth-slash", "cat ..\uff0foutside\uff0fsecret.txt", expect=ANY),
    a("fullwidth-semicolon", f"ls\uff1bcat {S}"),
    a("unicode-dash-option", "find . \u2212exec cat {} +", expect=ANY),
    a("zero-width-space", f"cat \u200b{S}", expect=ANY),
    a("rtl-override", "cat \u202e../outside/secret.txt", expect=ANY),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory.mktemp("escapes"))


def _run(tool: TerminalTool, command: str, call_id: int) -> ToolMessage:
    message = tool.invoke(
        {"type": "tool_call", "name": tool.name, "args": {"command": command}, "id": str(call_id)}
    )
    assert isinstance(message, ToolMessage)
    return message


def _assert_no_escape(world: World, outputs: list[str], before: dict[str, tuple[int, int]]):
    for text in outputs:
        assert world.secret not in text
        assert "root:x:0:0" not in text  # /etc/passwd
        assert "CONTEXTKIT_CANARY" not in text or "$" in text  # only ever echoed refusals
    assert snapshot(world) == before, "a file was created or changed"
    assert not Path("out.txt").exists()
    assert not Path("stolen.txt").exists()
    assert processes_in(world.root) == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[x.id for x in ATTEMPTS])
def test_escape_attempt_fails(world: World, mode: str, attempt: Attempt) -> None:
    tool = TerminalTool(world.root, sandbox=mode, timeout=TIMEOUT)
    before = snapshot(world)
    outputs, statuses = [], []
    for i, command in enumerate(attempt.commands):
        start = time.monotonic()
        message = _run(tool, command, i)
        assert time.monotonic() - start < TIMEOUT + 2.0
        outputs.append(str(message.content))
        statuses.append(message.status)
    _assert_no_escape(world, outputs, before)
    if attempt.expect == REFUSED:
        assert "error" in statuses, outputs
    assert not tool.cwd.startswith("..")


def test_the_suite_is_large_enough() -> None:
    assert len(ATTEMPTS) >= 80
    assert len({x.id for x in ATTEMPTS}) == len(ATTEMPTS)


# sed and awk are off by default; enabled, they run in their sandboxed forms.
SCRIPT_ATTEMPTS = [
    a("sed-operand", f"sed -n p {S}"),
    a("sed-r", f"sed 'r {S}' README.md", expect=ANY),
    a("sed-R", f"sed 'R {S}' README.md", expect=ANY),
    a("sed-w", "sed 'w out.txt' README.md", expect=ANY),
    a("sed-s-w", "sed 's/S/X/w out.txt' README.md", expect=ANY),
    a("sed-e-command", f"sed '1e cat {S}' README.md", expect=ANY),
    a("sed-s-e-flag", f"sed 's/.*/cat {S}/e' README.md", expect=ANY),
    a("sed-in-place", "sed -i s/Shop/Pwned/ README.md"),
    a("sed-in-place-long", "sed --in-place=.bak s/Shop/Pwned/ README.md"),
    a("sed-in-place-cluster", "sed -ni s/Shop/Pwned/ README.md"),
    a("sed-script-file", f"sed -f {S} README.md"),
    a("sed-follow-symlinks", "sed --follow-symlinks -n p escape_link"),
    a("awk-operand", f"awk 1 {S}"),
    a("awk-system", f"awk 'BEGIN {{ system(\"cat {S}\") }}'", expect=ANY),
    a("awk-getline", f"awk 'BEGIN {{ while ((getline l < \"{S}\") > 0) print l }}'", expect=ANY),
    a(
        "awk-argv",
        f"awk 'BEGIN {{ ARGV[1] = \"{S}\"; ARGC = 2 }} {{ print }}' README.md",
        expect=ANY,
    ),
    a("awk-print-redirect", "awk '{ print > \"out.txt\" }' README.md", expect=ANY),
    a("awk-pipe", "awk '{ print | \"sh\" }' README.md", expect=ANY),
    a("awk-include", f"awk '@include \"{S}\"'"),
    a("awk-include-e", f"awk -e '@include \"{S}\"' README.md"),
    a("awk-load", "awk '@load \"filefuncs\"' README.md"),
    a("awk-program-file", f"awk -f {S}"),
    a("awk-no-permute", f"awk 1 -v x=1 {S}"),
    a("awk-exec", f"awk -E {S}"),
    a("awk-inplace", "awk -i inplace 1 README.md"),
    a("awk-W", "awk -W exec=x 1 README.md"),
    a("awk-dump", "awk -d out.txt 1 README.md"),
]


@pytest.mark.skipif(not HAS_GAWK, reason="gawk is not installed (awk runs only as gawk)")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("attempt", SCRIPT_ATTEMPTS, ids=[x.id for x in SCRIPT_ATTEMPTS])
def test_sed_and_awk_escapes_fail(world: World, mode: str, attempt: Attempt) -> None:
    tool = TerminalTool(
        world.root,
        sandbox=mode,
        timeout=TIMEOUT,
        allowed_commands={"sed", "awk", "cat", "ls"},
    )
    before = snapshot(world)
    messages = [_run(tool, command, i) for i, command in enumerate(attempt.commands)]
    _assert_no_escape(world, [str(m.content) for m in messages], before)
    if attempt.expect == REFUSED:
        assert any(m.status == "error" for m in messages)
