"""Risks read inside one program's arguments, where the arguments are a language of their own: git's
subcommands, and an interpreter's inline code (``python -c``, read through ``ast``; ``perl -e``, ``node -e``
and the like, read by pattern). A command the code runs is judged by the guard again: a literal
``subprocess.run("rm -rf /")`` is the same risk as the command itself.
"""

from __future__ import annotations

import ast
import re
import shlex
from typing import Protocol

from harness.safety.shell import is_python, short_options

# Python inline code: calls by what they do (module.function, or a method name on anything)
PY_DESTRUCTIVE = {"shutil.rmtree", "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.kill", "os.killpg",
                  "os.truncate", "os.chmod", "os.chown", "shutil.move"}
PY_RUNS = {"os.system", "os.popen", "os.execv", "os.execvp", "os.execl", "os.execlp", "os.spawnv", "os.spawnl",
           "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
           "subprocess.Popen", "pty.spawn"}
PY_NETWORK = ("socket", "urllib", "http.client", "requests", "httpx", "aiohttp", "ftplib", "smtplib", "paramiko")
CODE_FLAGS = {"python": "-c", "perl": "-e", "ruby": "-e", "node": "-e", "nodejs": "-e", "php": "-r"}


class CommandJudge(Protocol):
    """What the inline code readers ask of the guard: the risks of a command, and of a path."""

    def risks(self, command: str) -> list[str]: ...

    def path_risk(self, raw: str, *, writing: bool) -> list[str]: ...


def git_risks(args: list[str]) -> list[str]:
    """What a git command line does that cannot be undone or leaves the machine."""
    sub = next((a for a in args if not a.startswith("-")), "")
    rest = args[args.index(sub) + 1:] if sub else []
    if sub == "push":
        forced = {"--force", "--force-with-lease", "--mirror", "--delete"} & set(rest) or "f" in short_options(rest)
        return ["destructive: git push --force rewrites a remote's history" if forced
                else "network: git push publishes history"]
    if sub == "reset" and "--hard" in rest:
        return ["destructive: git reset --hard discards changes"]
    if sub == "clean" and ("f" in short_options(rest) or "--force" in rest):
        return ["destructive: git clean -f deletes untracked files"]
    if sub == "checkout" and "--" in rest and "." in rest:
        return ["destructive: git checkout -- . discards changes"]
    if sub == "branch" and ("-D" in rest or {"--delete", "--force"} <= set(rest)):
        return ["destructive: git branch -D deletes a branch"]
    if sub in {"worktree", "update-ref", "filter-branch", "filter-repo", "reflog", "gc", "replace"}:
        return [f"destructive: git {sub} rewrites the repository"]
    return []


def inline_code_risks(name: str, args: list[str], guard: CommandJudge) -> list[str]:
    """What the code an interpreter is given on its command line (``-c``, ``-e``, ``-r``) would do."""
    if name not in CODE_FLAGS and not is_python(name):
        return []
    flag = "-c" if is_python(name) else CODE_FLAGS.get(name, "-e")
    if flag not in args or args.index(flag) + 1 >= len(args):
        return []
    code = args[args.index(flag) + 1]
    if is_python(name):
        return _python_risks(code, guard)
    risks = []
    if re.search(r"process\.env|\$ENV\b|ENV\[|getenv", code):
        risks.append(f"secret access: {name} {flag} reads the environment")
    if re.search(r"rmSync|rmdirSync|unlinkSync|\brmtree\b|File\.delete|FileUtils\.rm|\bunlink\b|rm -r", code):
        risks.append(f"destructive: {name} {flag} deletes files")
    if re.search(r"child_process|\bsystem\(|\bexec\(|`[^`]+`|spawn", code):
        risks.append(f"runs commands: {name} {flag} starts other programs")
    if re.search(r"\bhttps?://|\bnet\.|\bsocket\b|fetch\(|Net::|LWP", code):
        risks.append(f"network: {name} {flag} opens connections")
    return risks


def _python_risks(code: str, guard: CommandJudge) -> list[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        # not Python we can read: the same names, searched for in the text
        names = sorted(n for n in PY_DESTRUCTIVE | PY_RUNS if n in code)
        names += ["os.environ"] if "environ" in code or "getenv" in code else []
        return [f"unreadable python -c code that mentions {n}" for n in names]
    risks = []
    # a process signalling itself (a test of how its exit is reported) harms nothing else
    own = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call) and _signals_itself(node)}
    for node in ast.walk(tree):
        dotted = _dotted(node.func) if isinstance(node, ast.Call) else _dotted(node) if isinstance(
            node, ast.Attribute) else ""
        if not dotted or id(node) in own or isinstance(node, ast.Call) and id(node.func) in own:
            continue
        if dotted in PY_DESTRUCTIVE or dotted.endswith((".rmtree", ".unlink", ".rmdir")):
            risks.append(f"destructive: python -c calls {dotted}")
        elif dotted in PY_RUNS and isinstance(node, ast.Call):
            literal = _literal_command(node)
            risks += guard.risks(literal) if literal else [f"runs commands: python -c calls {dotted}"]
        elif dotted in {"os.environ", "os.getenv", "os.environb"}:
            risks.append(f"secret access: python -c reads {dotted}")
        elif dotted.split(".")[0] in PY_NETWORK or dotted.startswith(PY_NETWORK):
            risks.append(f"network: python -c uses {dotted.split('.')[0]}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func) in {"open", "io.open"} and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            mode = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else "r"
            risks += guard.path_risk(node.args[0].value, writing=any(c in str(mode) for c in "wax+"))
    return list(dict.fromkeys(risks))


def _signals_itself(call: ast.Call) -> bool:
    """``os.kill(os.getpid(), ...)`` and the like: the signal goes to the process that sends it."""
    return _dotted(call.func) in {"os.kill", "os.killpg"} and bool(call.args) and isinstance(call.args[0], ast.Call) \
        and _dotted(call.args[0].func) in {"os.getpid", "os.getpgrp", "os.getpgid"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _literal_command(call: ast.Call) -> str | None:
    """The command a subprocess call runs, when it is written out as a literal."""
    if not call.args:
        return None
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                         for e in first.elts):
        return shlex.join(e.value for e in first.elts)  # type: ignore[attr-defined]
    return None
