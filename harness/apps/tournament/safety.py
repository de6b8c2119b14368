"""SafetyGuard (seed 002, section 7): the early warning and the record, before anything runs.

It reads the whole plan before an executor starts (``check_plan``: the executor command, the commands
the plan's steps quote, the shell scripts its diff adds) and each command a model proposes while it
works (``check``). Each command line is taken apart into what would run (shell_commands.py) and the
rules here match that: a program's basename and its options in any spelling, pipelines (a download or
a decoder feeding an interpreter), the inside of git's and interpreters' arguments (program_risks.py),
and paths judged as paths (an argument that resolves outside the workspace), never words found
somewhere in the text.

The sandbox (harness/sandbox/) is the guarantee; a verdict here stops a plan until the user approves it,
and is recorded as seed 002's SafetyGuardOutput (``to_record``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.apps.tournament.program_risks import git_risks, inline_code_risks
from harness.apps.tournament.shell_commands import (
    SHELLS,
    SUBSTITUTION,
    Command,
    is_python,
    parse,
    program,
    script_lines,
    short_options,
)
from harness.base.clock import utc_now
from harness.base.redaction import is_credential_name

INTERPRETERS = SHELLS | {"python", "perl", "ruby", "node", "nodejs", "php", "lua", "deno", "bun", "source", "."}
DOWNLOADERS = {"curl", "wget", "fetch", "aria2c"}
NETWORK_TOOLS = {"nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "ftp", "tftp", "rsh", "rlogin"}
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
VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


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
        commands += list(script_lines(plan.get("diff") or ""))
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
            if set(fetched) & DOWNLOADERS and runs & (INTERPRETERS | {"eval"}) | {r for r in runs if is_python(r)}:
                found.append("remote code: a download run by an interpreter or eval")
        for pipeline in pipelines:
            found += self._pipeline_risks(pipeline)
            for argv, writes in pipeline:
                found += self._command_risks(argv, writes)
        return list(dict.fromkeys(found))

    # ------------------------------------------------------------------------------------------ rules
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
