"""A command line to what would run, for the SafetyGuard (guard.py) to judge.

The shell structure is taken apart the way a shell would: lists, pipelines, subshells, substitutions
(``$(...)``, backticks, ``<(...)``), ``sh -c`` scripts, and wrappers that run another program (``env``,
``timeout``, ``xargs``, ``find -exec``); what is left is each program's argv and the files its redirections
write. ``script_lines`` finds the commands a plan's diff adds to shell scripts and Makefiles, and
``script_commands`` those of a whole script a plan writes.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator

SEPARATORS = {";", "&&", "||", "&", "|", "(", ")", "\n"}
REDIRECTS = {">", ">>", "<", ">|", "&>", "<>"}
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"}
WRAPPERS = {"env", "nohup", "nice", "ionice", "time", "timeout", "stdbuf", "command", "exec", "builtin", "setsid",
            "chrt", "taskset", "unbuffer"}
SUBSTITUTION = re.compile(r"\$\(((?:[^()]|\([^()]*\))*)\)|`([^`]*)`|<\(((?:[^()]|\([^()]*\))*)\)")

Command = tuple[list[str], list[str]]  # (argv, redirection targets written)


def parse(line: str) -> Iterator[list[Command]]:
    """The pipelines of a command line, each a list of (argv, written redirection targets); substitutions
    (``$(...)``, backticks, ``<(...)``) and ``sh -c`` scripts come out as pipelines of their own."""
    for inner in SUBSTITUTION.finditer(line):
        yield from parse(next(g for g in inner.groups() if g is not None))
    lexer = shlex.shlex(line.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    tokens = list(lexer)
    pipeline: list[Command] = []
    argv: list[str] = []
    writes: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in REDIRECTS or (token.startswith((">", "<", "&>")) and set(token) <= set("<>&|")):
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if argv and argv[-1].isdigit() and len(argv[-1]) == 1:
                argv.pop()  # the 2 of 2>file
            if ">" in token and target and target not in SEPARATORS:
                writes.append(target)
            i += 2
            continue
        if token in SEPARATORS or set(token) <= set(";&|()"):
            if argv or writes:
                pipeline.append((argv, writes))
            argv, writes = [], []
            if token != "|":
                if pipeline:
                    yield from _expand(pipeline)
                pipeline = []
            i += 1
            continue
        argv.append(token)
        i += 1
    if argv or writes:
        pipeline.append((argv, writes))
    if pipeline:
        yield from _expand(pipeline)


def _expand(pipeline: list[Command]) -> Iterator[list[Command]]:
    """Unwrap each command (``env X=1 timeout 5 cmd`` is ``cmd``); ``sh -c``, ``xargs`` and ``find -exec``
    yield the commands they run as pipelines of their own."""
    unwrapped = []
    for argv, writes in pipeline:
        argv = unwrap(argv)
        name = program(argv)
        flag = next((i for i, a in enumerate(argv[1:], 1) if a.startswith("-") and not a.startswith("--")
                     and "c" in a[1:]), None)
        if name in SHELLS and flag is not None and flag + 1 < len(argv):
            yield from parse(argv[flag + 1])
        if name == "xargs":
            rest = argv[1:]
            while rest and rest[0].startswith("-"):
                rest = rest[1:]  # xargs's own options; what follows is the command it runs, options and all
            if rest:
                yield from _expand([(rest, [])])
        if name == "find" and "-exec" in argv:
            start = argv.index("-exec") + 1
            end = next((j for j in range(start, len(argv)) if argv[j] in (";", "+", "\\;")), len(argv))
            yield from _expand([(argv[start:end], [])])
        unwrapped.append((argv, writes))
    yield unwrapped


def unwrap(argv: list[str]) -> list[str]:
    """Drop leading ``VAR=value`` assignments and wrappers (with their options) to reach the real program.
    ``sudo`` and ``su`` are kept: they are risks of their own."""
    argv = list(argv)
    while argv:
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
            argv.pop(0)
            continue
        name = program(argv)
        if name not in WRAPPERS or len(argv) == 1:
            return argv
        if name == "env" and not any(not a.startswith("-") and "=" not in a for a in argv[1:]):
            return argv  # env alone prints the environment
        argv.pop(0)
        while argv and (argv[0].startswith("-") or (name in ("timeout", "nice", "ionice", "taskset", "chrt")
                                                     and re.match(r"^[0-9.]+[smhd]?$", argv[0]))):
            argv.pop(0)
    return argv


def program(argv: list[str]) -> str:
    """The program's basename: ``/usr/bin/rm`` is ``rm``, ``python3.11`` is ``python3.11``."""
    return os.path.basename(argv[0]) if argv else ""


def short_options(args: list[str]) -> set[str]:
    """Every letter of the short options: ``-rf``, ``-r -f`` and ``-fr`` all give {"r", "f"}."""
    return {c for a in args if a.startswith("-") and not a.startswith("--") and len(a) > 1 for c in a[1:]}


def is_python(name: str) -> bool:
    """A Python interpreter by its basename: ``python``, ``python3.11``, ``pypy3``."""
    return bool(re.match(r"^(python|pypy)[0-9.]*$", name))


def is_script(path: str, content: str = "") -> bool:
    """A file whose lines a shell or make runs: ``*.sh``, a Makefile, or a shell's ``#!`` line."""
    return bool(re.search(r"\.(sh|bash|zsh)$", path) or _is_makefile(path)
                or re.match(r"#!\s*\S*/(env\s+)?(ba|z|da|k)?sh\b", content))


def script_commands(path: str, content: str) -> Iterator[str]:
    """The command lines of a script a plan writes (``is_script``): a shell script's lines, continuations
    joined; a Makefile's recipe lines."""
    pending = ""
    for line in content.splitlines():
        command = _command_of(line, makefile=_is_makefile(path))
        if command is None:
            continue
        if command.endswith("\\"):
            pending += command[:-1] + " "
            continue
        yield pending + command
        pending = ""
    if pending.strip():
        yield pending.strip()


def script_lines(diff: str) -> Iterator[str]:
    """Added lines of shell scripts and Makefile recipes in a unified diff: commands that will run."""
    path = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip().removeprefix("b/")
            continue
        if not line.startswith("+") or line.startswith("+++"):
            continue
        if re.search(r"\.(sh|bash|zsh)$", path) or _is_makefile(path):
            command = _command_of(line[1:], makefile=_is_makefile(path))
            if command is not None:
                yield command


def _is_makefile(path: str) -> bool:
    return bool(re.search(r"(^|/)(Makefile|GNUmakefile|[^/]*\.mk)$", path))


def _command_of(line: str, *, makefile: bool) -> str | None:
    """The command a script's line runs, or None for a blank line, a comment or a Makefile's non-recipe line."""
    if makefile:
        return line.strip().lstrip("@-") if line.startswith("\t") and line.strip() else None
    return line.strip() if line.strip() and not line.lstrip().startswith("#") else None
