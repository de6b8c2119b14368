"""SafetyGuard (seed 002, section 7): the early warning and the record, before anything runs.

It reads the whole plan before an executor starts (``check_plan``: the executor command, the commands
the plan's steps quote, the shell scripts its diff adds) and each command a model proposes while it
works (``check``). A command line is parsed into its shell structure first (lists, pipelines,
subshells, ``$(...)``, ``sh -c``, wrappers such as ``env``, ``timeout``, ``xargs`` and ``find -exec``)
and the rules match what would run: a program's basename and its options in any spelling, pipelines
(a download or a decoder feeding an interpreter), an interpreter's inline code (Python's through
``ast``), and paths judged as paths (an argument that resolves outside the workspace), never words
found somewhere in the text.

The sandbox (harness/sandbox/) is the guarantee; a verdict here stops a plan until the user approves it,
and is recorded as seed 002's SafetyGuardOutput (``to_record``).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.clock import utc_now
from harness.redaction import is_credential_name

SEPARATORS = {";", "&&", "||", "&", "|", "(", ")", "\n"}
REDIRECTS = {">", ">>", "<", ">|", "&>", "<>"}
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"}
INTERPRETERS = SHELLS | {"python", "perl", "ruby", "node", "nodejs", "php", "lua", "deno", "bun", "source", "."}
DOWNLOADERS = {"curl", "wget", "fetch", "aria2c"}
NETWORK_TOOLS = {"nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "ftp", "tftp", "rsh", "rlogin"}
WRAPPERS = {"env", "nohup", "nice", "ionice", "time", "timeout", "stdbuf", "command", "exec", "builtin", "setsid",
            "chrt", "taskset", "unbuffer"}
ESCALATION = {"sudo", "su", "doas", "pkexec", "visudo", "runuser", "chroot"}
STOPS_MACHINE = {"shutdown", "reboot", "halt", "poweroff", "init", "telinit"}
WRITERS = {"rm", "rmdir", "mv", "cp", "tee", "touch", "mkdir", "ln", "install", "truncate", "chmod", "chown",
           "chgrp", "dd", "sed", "perl", "unlink", "shred", "rsync"}
CREDENTIAL_FILES = re.compile(r"(^|/)(\.ssh(/|$)|id_(rsa|dsa|ecdsa|ed25519)|\.aws(/|$)|\.netrc$|\.pgpass$|"
                              r"\.docker/config\.json$|\.kube/config$|\.npmrc$|\.pypirc$|\.git-credentials$|"
                              r"\.gnupg(/|$)|\.config/gcloud(/|$)|\.azure(/|$))|^/proc/[^/]+/environ$|"
                              r"^/etc/(shadow|gshadow|sudoers)")
# Read-only system places a command may name without leaving its workspace in any way that matters.
SYSTEM_PATHS = ("/usr/", "/bin/", "/sbin/", "/lib", "/opt/", "/etc/", "/proc/", "/sys/", "/dev/null", "/dev/zero",
                "/dev/urandom", "/dev/random", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/fd/", "/tmp/",
                "/var/tmp/")
SQL_DESTRUCTIVE = re.compile(r"\b(drop\s+(database|table|schema|user)|truncate\s+table|delete\s+from\s+\w+\s*(;|$))",
                             re.IGNORECASE)
SQL_CLIENTS = {"psql", "mysql", "sqlite3", "mariadb", "sqlcmd"}
FORK_BOMB = re.compile(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:")
SUBSTITUTION = re.compile(r"\$\(((?:[^()]|\([^()]*\))*)\)|`([^`]*)`|<\(((?:[^()]|\([^()]*\))*)\)")
VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
# Python inline code: calls by what they do (module.function, or a method name on anything)
PY_DESTRUCTIVE = {"shutil.rmtree", "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.kill", "os.killpg",
                  "os.truncate", "os.chmod", "os.chown", "shutil.move"}
PY_RUNS = {"os.system", "os.popen", "os.execv", "os.execvp", "os.execl", "os.execlp", "os.spawnv", "os.spawnl",
           "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
           "subprocess.Popen", "pty.spawn"}
PY_NETWORK = ("socket", "urllib", "http.client", "requests", "httpx", "aiohttp", "ftplib", "smtplib", "paramiko")
CODE_FLAGS = {"python": "-c", "perl": "-e", "ruby": "-e", "node": "-e", "nodejs": "-e", "php": "-r"}


@dataclass(frozen=True)
class SafetyVerdict:
    """SafetyGuardOutput from seed 002; ``to_record`` adds ``agent`` and ``timestamp``."""

    safe: bool
    risks: list[str] = field(default_factory=list)
    blocked_actions: list[str] = field(default_factory=list)
    requires_approval: bool = False

    def reason(self) -> str:
        return "; ".join(self.risks)

    def to_record(self) -> dict[str, Any]:
        """Seed 002's SafetyGuardOutput, its field names as the seed writes them."""
        return {"agent": "SafetyGuard", "safe": self.safe, "risks": list(self.risks),
                "blockedActions": list(self.blocked_actions), "requiresApproval": self.requires_approval,
                "timestamp": utc_now("milliseconds")}


def verdict_of(findings: list[tuple[str, str]]) -> SafetyVerdict:
    """(risk, the command it is in) pairs to a verdict."""
    risks = list(dict.fromkeys(risk for risk, _ in findings))
    actions = list(dict.fromkeys(action for _, action in findings))
    return SafetyVerdict(safe=not risks, risks=risks, blocked_actions=actions, requires_approval=bool(risks))


class SafetyGuard:
    """Checks commands and plans before they run; ``workspace`` is where paths may point."""

    def __init__(self, workspace: Path | None = None):
        self.workspace = workspace.resolve() if workspace else None

    # ------------------------------------------------------------------------------------------ entry points
    def check(self, command: str) -> SafetyVerdict:
        return verdict_of([(risk, command) for risk in self.risks(command)])

    def check_plan(self, plan: dict[str, Any], *, executor_command: str | None = None) -> SafetyVerdict:
        """Everything the plan would run, before any of it does: the executor command, the commands its
        steps quote in backticks, and the lines of shell scripts and Makefiles its diff adds."""
        commands = [executor_command] if executor_command else []
        for step in plan.get("steps") or []:
            commands += re.findall(r"`([^`\n]+)`", str(step.get("change", "")) if isinstance(step, dict) else "")
        commands += list(_script_lines(plan.get("diff") or ""))
        return verdict_of([(risk, command) for command in commands for risk in self.risks(command)])

    def risks(self, command: str) -> list[str]:
        """What is dangerous in one command line, each risk in words a user understands."""
        found: list[str] = []
        if FORK_BOMB.search(command):
            found.append("destructive: a fork bomb")
        try:
            pipelines = list(parse(command))
        except ValueError:
            return ["unparseable command line (unbalanced quotes): it cannot be checked"]
        for inner in SUBSTITUTION.finditer(command):
            fetched = [program(argv) for p in parse(next(g for g in inner.groups() if g is not None)) for argv, _ in p]
            runs = {program(argv) for p in pipelines for argv, _ in p} - set(fetched)
            if set(fetched) & DOWNLOADERS and runs & (INTERPRETERS | {"eval"}) | {r for r in runs if _is_python(r)}:
                found.append("remote code: a download run by an interpreter or eval")
        for pipeline in pipelines:
            found += self._pipeline_risks(pipeline)
            for argv, writes in pipeline:
                found += self._command_risks(argv, writes)
        return list(dict.fromkeys(found))

    # ------------------------------------------------------------------------------------------ rules
    def _pipeline_risks(self, pipeline: list[tuple[list[str], list[str]]]) -> list[str]:
        feeds = [program(argv) for argv, _ in pipeline]
        for i, (argv, _) in enumerate(pipeline[:-1]):
            source = feeds[i]
            decodes = (source == "base64" and ({"-d", "--decode", "-D"} & set(argv))) or \
                      (source == "xxd" and "-r" in argv) or (source == "openssl" and "-d" in argv)
            if (source in DOWNLOADERS or decodes) and any(f in INTERPRETERS or _is_python(f) for f in feeds[i + 1:]):
                what = "a download" if source in DOWNLOADERS else "decoded data"
                return [f"remote code: {what} ({' '.join(argv)}) piped into an interpreter"]
        return []

    def _command_risks(self, argv: list[str], writes: list[str]) -> list[str]:
        risks: list[str] = []
        for target in writes:
            if re.match(r"/dev/(sd|nvme|hd|disk|mmcblk|vd)", target):
                risks.append(f"destructive: writes the raw device {target}")
            risks += self._path_risk(target, writing=True)
        if not argv:
            return risks
        name, args = program(argv), argv[1:]
        options = short_options(args)
        joined = " ".join(args)
        if name in ESCALATION:
            risks.append(f"privilege escalation: {name}")
        if name == "rm" and ({"r", "R"} & options or "--recursive" in args):
            targets = " ".join(a for a in args if not a.startswith("-")) or "the files it is given"
            forced = "f" in options or "--force" in args
            risks.append(f"destructive: rm {'-r -f' if forced else '-r'} on {targets} (recursive delete)")
        if name in {"shred", "wipefs"} or name.startswith("mkfs"):
            risks.append(f"destructive: {name} destroys data")
        if name == "dd" and any(a.startswith("of=/dev/") for a in args):
            risks.append("destructive: dd writes a raw device")
        if name in STOPS_MACHINE:
            risks.append(f"destructive: {name} stops the machine")
        if name in {"killall", "pkill"} or (name == "kill" and {"-1", "1"} & set(args)):
            risks.append(f"destructive: {name} kills processes it does not own")
        if name == "find" and "-delete" in args:
            risks.append("destructive: find -delete")
        if name == "chmod" and re.search(r"(^|\s)0?777(\s|$)", joined):
            risks.append("privilege escalation: chmod 777 makes files world-writable")
        elif name == "chmod" and re.search(r"\+s|\b[2467][0-7]{3}\b", joined):
            risks.append("privilege escalation: setuid bit")
        if name in {"chown", "chgrp"} and any(a.split(":")[0] == "root" for a in args):
            risks.append("privilege escalation: chown root")
        if name == "git":
            risks += _git_risks(args)
        statement = SQL_DESTRUCTIVE.search(joined) if name in SQL_CLIENTS else None
        if statement:
            risks.append(f"destructive: {name} runs {statement.group(0).strip()}")
        if name in NETWORK_TOOLS:
            risks.append(f"network: {name} opens a remote connection")
        if name == "rsync" and any(re.match(r"^[\w.-]+@?[\w.-]*:", a) for a in args if not a.startswith("-")):
            risks.append("network: rsync to a remote host")
        if name in DOWNLOADERS and (options & {"d", "T", "F"} or any(a.startswith(("--data", "--upload-file", "--form",
                                                                                      "--post-")) for a in args)):
            risks.append(f"network: {name} uploads data")
        if name in {"env", "printenv"} and not [a for a in args if not a.startswith("-")] or \
                (name == "set" and not args) or (name == "export" and "-p" in args) or \
                (name == "declare" and {"x", "p"} & options):
            risks.append("secret access: prints the environment")
        for variable in VARIABLE.findall(joined):
            if is_credential_name(variable):
                risks.append(f"secret access: reads ${variable}")
        if name in CODE_FLAGS or _is_python(name):
            risks += _inline_code_risks(name, args, self)
        for arg in args:
            value = os.path.expanduser(arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg)
            if "://" not in value and CREDENTIAL_FILES.search(value):
                risks.append(f"secret access: a credential file ({arg})")
                continue
            for part in _path_parts(arg):
                risks += self._path_risk(part, writing=name in WRITERS)
        return risks

    def _path_risk(self, raw: str, *, writing: bool) -> list[str]:
        expanded = os.path.expanduser(raw)
        if CREDENTIAL_FILES.search(expanded):
            return [f"secret access: a credential file ({raw})"]
        if self.workspace is None:
            return []
        path = Path(expanded) if os.path.isabs(expanded) else self.workspace / expanded
        if _inside(path, self.workspace):
            return []
        if not os.path.isabs(expanded):
            return [f"path outside the workspace: {raw} (leaves the worktree upwards)"]
        if writing and not expanded.startswith(("/dev/null", "/dev/stdout", "/dev/stderr", "/tmp/", "/var/tmp/")):
            return [f"path outside the workspace: {raw} (written or deleted)"]
        if not writing and not (expanded + "/").startswith(SYSTEM_PATHS) and not _is_interpreter_path(expanded):
            return [f"path outside the workspace: {raw}"]
        return []


# ---------------------------------------------------------------------------------------------- parsing
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


def _is_python(name: str) -> bool:
    return bool(re.match(r"^(python|pypy)[0-9.]*$", name))


def _is_interpreter_path(path: str) -> bool:
    return bool(re.search(r"/(bin|Scripts)/(python|pypy|node|perl|ruby)[0-9.]*$", path))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder)
    except ValueError:
        return False
    return True


def _path_parts(arg: str) -> list[str]:
    """The parts of an argument that are paths: the value of ``of=/x`` or ``--out=/x``, or the argument."""
    if "://" in arg or arg.startswith("-") and "=" not in arg:
        return []
    parts = [arg.split("=", 1)[1]] if "=" in arg else [arg]
    return [p for p in parts if p.startswith(("/", "~")) or p == ".." or p.startswith("../") or "/../" in p]


def _git_risks(args: list[str]) -> list[str]:
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


def _inline_code_risks(name: str, args: list[str], guard: SafetyGuard) -> list[str]:
    flag = "-c" if _is_python(name) else CODE_FLAGS.get(name, "-e")
    if flag not in args or args.index(flag) + 1 >= len(args):
        return []
    code = args[args.index(flag) + 1]
    if _is_python(name):
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


def _python_risks(code: str, guard: SafetyGuard) -> list[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        # not Python we can read: the same names, searched for in the text
        names = sorted(n for n in PY_DESTRUCTIVE | PY_RUNS if n in code)
        names += ["os.environ"] if "environ" in code or "getenv" in code else []
        return [f"unreadable python -c code that mentions {n}" for n in names]
    risks = []
    for node in ast.walk(tree):
        dotted = _dotted(node.func) if isinstance(node, ast.Call) else _dotted(node) if isinstance(
            node, ast.Attribute) else ""
        if not dotted:
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
            risks += guard._path_risk(node.args[0].value, writing=any(c in str(mode) for c in "wax+"))
    return list(dict.fromkeys(risks))


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


def _script_lines(diff: str) -> Iterator[str]:
    """Added lines of shell scripts and Makefile recipes in a unified diff: commands that will run."""
    path = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip().removeprefix("b/")
            continue
        if not line.startswith("+") or line.startswith("+++"):
            continue
        body = line[1:]
        if re.search(r"\.(sh|bash|zsh)$", path) and body.strip() and not body.lstrip().startswith("#"):
            yield body.strip()
        elif re.search(r"(^|/)(Makefile|GNUmakefile|[^/]*\.mk)$", path) and body.startswith("\t"):
            yield body.strip().lstrip("@-")
