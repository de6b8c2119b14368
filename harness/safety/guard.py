"""SafetyGuard (seed 002, section 7): the early warning and the record, before anything runs.

Three entry points share one set of rules: ``check`` (one command line, as a model proposes it or a runner is
given it), ``check_plan`` (a tournament plan: its executor command, the commands its steps quote, the shell
scripts its diff adds) and ``check_actions`` (an agent pipeline's plan: the files it would create, edit and
read, the commands it would run, and its prose).

Two kinds of rule. Each command line is taken apart into what would run (shell.py) and matched by what runs: a
program's basename and its options in any spelling, pipelines (a download or a decoder feeding an
interpreter), the inside of git's and interpreters' arguments (programs.py), and paths judged as paths (an
argument that resolves outside the workspace). The design document's word patterns (patterns.py) add what
parsing cannot see, in command lines, in the content of files a plan writes, and in its prose, each row only
where its words mean a risk.

How bad a finding is depends on where it is. In what would run (a command line, a path written or read) it
blocks: the verdict is not ``safe`` and the action is in ``blockedActions``. In what a plan only says, or
writes into a file, it asks a person's approval (``requiresApproval``) and the plan stays ``safe`` unless
something else blocks: a guard that stops "add a password reset form" is a guard people switch off. A
script the plan writes and then runs is a command line again, and blocks.

The sandbox (harness/sandbox/) is the guarantee; a verdict here stops a plan until the user approves it,
and is recorded as seed 002's SafetyGuardOutput (``to_record``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.clock import utc_now
from harness.base.redaction import is_credential_name
from harness.safety.patterns import WORD_PATTERNS, Place, WordPattern, word_risks
from harness.safety.programs import git_risks, inline_code_risks
from harness.safety.shell import (
    SHELLS,
    SUBSTITUTION,
    Command,
    is_python,
    is_script,
    parse,
    program,
    script_commands,
    script_lines,
    short_options,
)

ACTION_TYPES = ("createFile", "editFile", "runCommand", "readFile")
WRITE_ACTIONS = ("createFile", "editFile")
INTERPRETERS = SHELLS | {"python", "perl", "ruby", "node", "nodejs", "php", "lua", "deno", "bun", "source", "."}
DOWNLOADERS = {"curl", "wget", "fetch", "aria2c"}
NETWORK_TOOLS = {"nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "ftp", "tftp", "rsh", "rlogin"}
ESCALATION = {"sudo", "su", "doas", "pkexec", "visudo", "runuser", "chroot"}
STOPS_MACHINE = {"shutdown", "reboot", "halt", "poweroff", "init", "telinit"}
WRITERS = {"rm", "rmdir", "mv", "cp", "tee", "touch", "mkdir", "ln", "install", "truncate", "chmod", "chown",
           "chgrp", "dd", "sed", "perl", "unlink", "shred", "rsync"}
CREDENTIAL_FILES = re.compile(r"(^|/)(\.ssh(/|$)|id_(rsa|dsa|ecdsa|ed25519)|\.aws(/|$)|\.netrc$|\.pgpass$|"
                              r"\.docker/config\.json$|\.kube/config$|\.npmrc$|\.pypirc$|\.git-credentials$|"
                              r"\.gnupg(/|$)|\.config/gcloud(/|$)|\.azure(/|$)|\.(bash|zsh)_history$|"
                              r"\.env(\.(?!example$|sample$|template$|dist$)[\w.-]+)?$)|^/proc/[^/]+/environ$|"
                              r"^/etc/(shadow|gshadow|sudoers|passwd|master\.passwd)$|\.(pem|key|p12|pfx)$|"
                              r"(^|/)[^/]*(api[_-]?key|apikey|secret[_-]?key|private[_-]?key|credentials|secrets|"
                              r"passwords?)[^/]*\.(txt|json|ya?ml|ini|cfg|conf|toml)$",
                              re.IGNORECASE)
# Read-only system places a command may name without leaving its workspace in any way that matters.
SYSTEM_PATHS = ("/usr/", "/bin/", "/sbin/", "/lib", "/opt/", "/etc/", "/proc/", "/sys/", "/dev/null", "/dev/zero",
                "/dev/urandom", "/dev/random", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/fd/", "/tmp/",
                "/var/tmp/")
# Writing anywhere else outside the workspace, /tmp included, leaves it: the sandbox's private /tmp is the
# guarantee that this does no harm, not a reason for a plan to write there.
HARMLESS_SINKS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/fd/")
SQL_DESTRUCTIVE = re.compile(r"\b(drop\s+(database|table|schema|user)|truncate\s+table|delete\s+from\s+\w+\s*(;|$))",
                             re.IGNORECASE)
SQL_CLIENTS = {"psql", "mysql", "sqlite3", "mariadb", "sqlcmd"}
FORK_BOMB = re.compile(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:")
VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
ASSIGNMENT = re.compile(r"(?:^|[\s;&|(])([A-Za-z_][A-Za-z0-9_]*)=[\"']?[^\s$\"'`]")
QUOTED_COMMAND = re.compile(r"`([^`\n]+)`")


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


@dataclass(frozen=True)
class Finding:
    """One risk and the action it was found in; it ``blocks`` the action, or only asks a person's approval."""

    risk: str
    action: str
    blocks: bool = True


def verdict_of(findings: Iterable[Finding]) -> SafetyVerdict:
    """Findings to one verdict: safe unless one blocks; approval wanted when there is any."""
    findings = list(findings)
    risks = list(dict.fromkeys(f.risk for f in findings))
    blocked = list(dict.fromkeys(f.action for f in findings if f.blocks))
    return SafetyVerdict(safe=not blocked, risks=risks, blocked_actions=blocked, requires_approval=bool(findings))


class SafetyGuard:
    """Checks commands and plans before they run; ``workspace`` is where paths may point (without one, paths
    are not judged by where they are, only by what they are: credential files, raw devices)."""

    def __init__(self, workspace: Path | None = None, *, patterns: Sequence[WordPattern] = WORD_PATTERNS):
        self.workspace = workspace.resolve() if workspace else None
        self.patterns = patterns

    # ------------------------------------------------------------------------------------------ entry points
    def check(self, command: str) -> SafetyVerdict:
        return verdict_of(Finding(risk, command) for risk in self.risks(command))

    def check_plan(self, plan: dict[str, Any], *, executor_command: str | None = None) -> SafetyVerdict:
        """Everything the plan would run, before any of it does: the executor command, the commands its
        steps quote in backticks, and the lines of shell scripts and Makefiles its diff adds."""
        commands = [executor_command] if executor_command else []
        for step in plan.get("steps") or []:
            commands += QUOTED_COMMAND.findall(str(step.get("change", "")) if isinstance(step, dict) else "")
        commands += list(script_lines(plan.get("diff") or ""))
        return verdict_of(Finding(risk, command) for command in commands for risk in self.risks(command))

    def check_actions(self, actions: Sequence[Mapping[str, Any]], *, prose: Iterable[str] = ()) -> SafetyVerdict:
        """An agent pipeline's whole plan, before any of it runs: ``actions`` (``type`` createFile, editFile,
        runCommand or readFile, with the ``path``, ``command`` and ``content`` each needs; a ``description``
        is read as prose) and ``prose`` (the plan's free text: task descriptions, steps). One verdict lists
        every risk, each saying what it saw and where, and every blocked action as ``type: command or path``."""
        written = {self._plan_path(str(a["path"])): str(a.get("content") or "") for a in actions
                   if a.get("type") in WRITE_ACTIONS and a.get("path")}
        findings = [f for action in actions for f in self._action_findings(action, written)]
        texts = [*prose, *(str(a["description"]) for a in actions if a.get("description"))]
        findings += [f for text in texts for f in self._prose_findings(str(text))]
        return verdict_of(findings)

    def risks(self, command: str) -> list[str]:
        """What is dangerous in one command line, each risk in words a user understands: what parsing finds in
        what would run, then the word patterns of each kind of risk parsing did not already name."""
        parsed = self._parsed_risks(command)
        return _with_words(parsed, word_risks(command, Place.COMMAND, self.patterns))

    # ------------------------------------------------------------------------------------------ plans
    def _action_findings(self, action: Mapping[str, Any], written: dict[str, str]) -> list[Finding]:
        kind = str(action.get("type") or "")
        needs = "command" if kind == "runCommand" else "path"
        target = str(action.get(needs) or "")
        label = _label(kind, target)
        if kind not in ACTION_TYPES:
            return [Finding(f"unknown action type {kind!r}: it cannot be checked ({', '.join(ACTION_TYPES)})", label)]
        if not target.strip():
            return [Finding(f"{kind} without a {needs}: it cannot be checked", label)]
        if kind == "runCommand":
            blocking = self.risks(target) + self._scripts_it_runs(target, written)
            return [Finding(f"{risk}, in {label}", label) for risk in dict.fromkeys(blocking)]
        if kind == "readFile":
            return [Finding(f"{risk}, in {label}", label) for risk in self.path_risk(target, writing=False)]
        asking = self._content_risks(target, str(action.get("content") or ""))
        return [Finding(f"{risk}, in {label}", label) for risk in self.path_risk(target, writing=True)] + \
               [Finding(f"{risk}, in the content of {label}", label, blocks=False) for risk in asking]

    def _content_risks(self, path: str, content: str) -> list[str]:
        """What a file would hold: a script's lines as the commands they are, and the word patterns of text."""
        lines = [risk for line in script_commands(path, content) for risk in self._parsed_risks(line)] \
            if is_script(path, content) else []
        return _with_words(lines, word_risks(content, Place.CONTENT, self.patterns))

    def _scripts_it_runs(self, command: str, written: dict[str, str]) -> list[str]:
        """The risks of the scripts a plan writes and this command runs (``bash x.sh``, ``./x.sh``, ``make``)."""
        try:
            pipelines = list(parse(command))
        except ValueError:
            return []
        risks: list[str] = []
        for argv, _ in [step for pipeline in pipelines for step in pipeline]:
            named = {self._plan_path(arg) for arg in argv if not arg.startswith("-")}
            if program(argv) == "make":
                named |= {"Makefile", "GNUmakefile", "makefile"}
            for path in sorted(named & written.keys()):
                if is_script(path, written[path]) or program(argv) in SHELLS:
                    risks += [f"{risk}, in {path}, which the command runs"
                              for line in script_commands(path, written[path]) for risk in self.risks(line)]
        return risks

    def _prose_findings(self, text: str) -> list[Finding]:
        """What a plan says: the commands it quotes in backticks, parsed, and the word patterns of sentences;
        none of it runs, so each asks a person's approval."""
        shown = " ".join(text.split())
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        quoted = [risk for span in QUOTED_COMMAND.findall(text) for risk in self._parsed_risks(span)]
        risks = _with_words(quoted, word_risks(text, Place.PROSE, self.patterns))
        return [Finding(f"{risk}, in the plan's text '{shown}'", f"plan text: {shown}", blocks=False)
                for risk in risks]

    def _plan_path(self, raw: str) -> str:
        """A path as the plan's actions name it, so that ``./x.sh`` and ``x.sh`` are one file."""
        path = os.path.expanduser(raw)
        if self.workspace and os.path.isabs(path) and _inside(Path(path), self.workspace):
            path = os.path.relpath(Path(path).resolve(), self.workspace)
        return os.path.normpath(path)

    # ------------------------------------------------------------------------------------------ command lines
    def _parsed_risks(self, command: str) -> list[str]:
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
            if set(fetched) & DOWNLOADERS and runs & (INTERPRETERS | {"eval"}) | {r for r in runs if is_python(r)}:
                found.append("remote code: a download run by an interpreter or eval")
        for name in ASSIGNMENT.findall(command):
            if is_credential_name(name):
                found.append(f"secret access: sets ${name} in the command's text, where logs and process lists "
                             "show it")
        for pipeline in pipelines:
            found += self._pipeline_risks(pipeline)
            for argv, writes in pipeline:
                found += self._command_risks(argv, writes)
        return list(dict.fromkeys(found))

    def _pipeline_risks(self, pipeline: list[Command]) -> list[str]:
        feeds = [program(argv) for argv, _ in pipeline]
        for i, (argv, _) in enumerate(pipeline[:-1]):
            source = feeds[i]
            decodes = (source == "base64" and ({"-d", "--decode", "-D"} & set(argv))) or \
                      (source == "xxd" and "-r" in argv) or (source == "openssl" and "-d" in argv)
            if (source in DOWNLOADERS or decodes) and any(f in INTERPRETERS or is_python(f) for f in feeds[i + 1:]):
                what = "a download" if source in DOWNLOADERS else "decoded data"
                return [f"remote code: {what} ({' '.join(argv)}) piped into an interpreter"]
        return []

    def _command_risks(self, argv: list[str], writes: list[str]) -> list[str]:
        risks: list[str] = []
        for target in writes:
            if re.match(r"/dev/(sd|nvme|hd|disk|mmcblk|vd)", target):
                risks.append(f"destructive: writes the raw device {target}")
            risks += self.path_risk(target, writing=True)
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
            risks += git_risks(args)
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
        risks += inline_code_risks(name, args, self)
        for arg in args:
            value = os.path.expanduser(arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg)
            if "://" not in value and CREDENTIAL_FILES.search(value):
                risks.append(f"secret access: a credential file ({arg})")
                continue
            for part in _path_parts(arg):
                risks += self.path_risk(part, writing=name in WRITERS)
        return risks

    def path_risk(self, raw: str, *, writing: bool) -> list[str]:
        """The risk of a path a command names (or writes, when ``writing``): a credential file, or a place outside
        the workspace."""
        expanded = os.path.expanduser(raw)
        if CREDENTIAL_FILES.search(expanded):
            return [f"secret access: a credential file ({raw})"]
        if writing and re.search(r"(^|/)\.git/hooks/", expanded):
            return [f"runs commands: a git hook ({raw}) runs at every git command, unasked"]
        if self.workspace is None:
            return []
        path = Path(expanded) if os.path.isabs(expanded) else self.workspace / expanded
        if _inside(path, self.workspace):
            return []
        if not os.path.isabs(expanded):
            return [f"path outside the workspace: {raw} (leaves the worktree upwards)"]
        if writing and not expanded.startswith(HARMLESS_SINKS):
            return [f"path outside the workspace: {raw} (written or deleted)"]
        if not writing and not (expanded + "/").startswith(SYSTEM_PATHS) and not _is_interpreter_path(expanded):
            return [f"path outside the workspace: {raw}"]
        return []


def _is_interpreter_path(path: str) -> bool:
    return bool(re.search(r"/(bin|Scripts)/(python|pypy|node|perl|ruby)[0-9.]*$", path))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder)
    except ValueError:
        return False
    return True


def _path_parts(arg: str) -> list[str]:
    """The parts of an argument that are paths: the value of ``of=/x`` or ``--out=/x``, or the argument; not a
    Windows command's switch (``del /f /q``)."""
    if "://" in arg or arg.startswith("-") and "=" not in arg or re.fullmatch(r"/[A-Za-z?]", arg):
        return []
    parts = [arg.split("=", 1)[1]] if "=" in arg else [arg]
    return [p for p in parts if p.startswith(("/", "~")) or p == ".." or p.startswith("../") or "/../" in p]


def _with_words(parsed: list[str], words: Iterable[tuple[str, str]]) -> list[str]:
    """``parsed`` and the word findings of each kind of risk it does not already name: ``sudo rm -rf /`` is
    not said twice, once parsed and once as words."""
    named = {risk.split(":", 1)[0] for risk in parsed}
    return list(dict.fromkeys(parsed + [risk for category, risk in words if category not in named]))


def _label(kind: str, target: str) -> str:
    """An action as ``blockedActions`` lists it: ``runCommand: rm -rf /``, ``createFile: /etc/cron.d/x``."""
    shown = " ".join(target.split())
    return f"{kind}: {shown if len(shown) <= 160 else shown[:157] + '...'}"
