"""SafetyGuard (seed 002, section 7): a pre-flight blocklist for every command a model proposes.

Blocks destructive commands, privilege escalation, secret access and paths outside the workspace.
The verdict has the seed's fields: ``safe``, ``risks``, ``blocked_actions``, ``requires_approval``.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

# (pattern, risk) - case-insensitive, matched against the whole command line.
BLOCKED_PATTERNS: tuple[tuple[str, str], ...] = (
    # destructive
    (r"\brm\s+(-[a-z]*r[a-z]*f|-[a-z]*f[a-z]*r|--recursive\s+--force|--force\s+--recursive)\b", "destructive: rm -rf"),
    (r"\brm\s+-[a-z]*r[a-z]*\s+(/|~|\*|\.)(\s|$)", "destructive: recursive delete of a root, home or everything"),
    (r"\bmkfs(\.\w+)?\b", "destructive: formats a file system"),
    (r"\bdd\s+[^|]*\bof=/dev/", "destructive: writes a raw device"),
    (r">\s*/dev/(sd|nvme|hd|disk)", "destructive: overwrites a disk"),
    (r"\bshred\b", "destructive: shred"),
    (r"\bwipefs\b", "destructive: wipefs"),
    (r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:", "destructive: fork bomb"),
    (r"\b(shutdown|reboot|halt|poweroff)\b", "destructive: stops the machine"),
    (r"\bkill\s+-9\s+(-1|1)\b", "destructive: kills every process"),
    (r"\b(killall|pkill)\b", "destructive: kills processes by name"),
    (r"\bchmod\s+(-R\s+)?0?777\b", "destructive: world-writable permissions"),
    (r"\bfind\b.*\s-delete\b", "destructive: find -delete"),
    (r"\bgit\s+push\b.*(--force|-f\b)", "destructive: force push"),
    (r"\bgit\s+(reset\s+--hard|clean\s+-[a-z]*f|checkout\s+--\s+\.|branch\s+-D|push\b|worktree\b|update-ref\b)",
     "destructive: git command that rewrites or publishes history"),
    (r"\bdrop\s+(database|table|schema)\b", "destructive: drop database/table"),
    (r"\btruncate\s+table\b", "destructive: truncate table"),
    (r"\bdelete\s+from\s+\w+\s*;?\s*$", "destructive: delete without where"),
    (r"\bformat\s+[a-z]:", "destructive: format a drive"),
    (r"\bdel\s+/[fsq]", "destructive: del /f /s"),
    # privilege escalation
    (r"(^|[;&|]\s*|\s)sudo\b", "privilege escalation: sudo"),
    (r"(^|[;&|]\s*)su(\s+-|\s+root|\s*$)", "privilege escalation: su"),
    (r"\b(doas|pkexec|visudo)\b", "privilege escalation"),
    (r"\bchmod\s+[ugoa]*\+s\b|\bchmod\s+[0-7]?[4-7][0-7]{3}\b", "privilege escalation: setuid bit"),
    (r"\bchown\s+(-R\s+)?root\b", "privilege escalation: chown root"),
    (r"/etc/(sudoers|shadow|passwd)\b", "privilege escalation: system accounts"),
    # secret access
    (r"process\.env", "secret access: process.env"),
    (r"os\.environ|\bgetenv\b|\bprintenv\b|^\s*env\s*$|^\s*set\s*$|\bexport\s+-p\b", "secret access: environment"),
    (r"api[_-]?key|apikey", "secret access: api_key"),
    (r"\bpass(word|wd)\b", "secret access: password"),
    (r"\bsecret", "secret access: secret"),
    (r"\b(access|auth|bearer)[_-]?token\b|\btoken\s*=", "secret access: token"),
    (r"anthropic_|openai_|aws_(secret|access)|gh_token|github_token", "secret access: credential variable"),
    (r"\.ssh\b|id_rsa|id_ed25519|\.aws/|\.netrc|\.pgpass|\.docker/config|\.kube/config|\.npmrc|\.pypirc",
     "secret access: credential file"),
    (r"/proc/[^ ]*/environ", "secret access: process environment"),
    (r"\bcredential", "secret access: credentials"),
    # network exfiltration / remote code
    (r"\b(curl|wget)\b[^|]*\|\s*(ba|z|k)?sh\b", "remote code: pipes a download into a shell"),
    (r"\b(nc|ncat|netcat|telnet|scp|rsync|ssh|ftp)\b", "network: remote access tool"),
    (r"\b(curl|wget)\b.*(-d\b|--data|--upload-file|-T\b|-F\b)", "network: uploads data"),
)
_COMPILED = tuple((re.compile(p, re.IGNORECASE), risk) for p, risk in BLOCKED_PATTERNS)


@dataclass(frozen=True)
class SafetyVerdict:
    """SafetyGuardOutput from seed 002 (without ``agent`` and ``timestamp``, added when recorded)."""

    safe: bool
    risks: list[str] = field(default_factory=list)
    blocked_actions: list[str] = field(default_factory=list)
    requires_approval: bool = False

    def reason(self) -> str:
        return "; ".join(self.risks)

    def to_record(self) -> dict[str, object]:
        """SafetyGuardOutput as seed 002 names its fields."""
        from harness.clock import utc_now

        return {"agent": "SafetyGuard", "safe": self.safe, "risks": list(self.risks),
                "blockedActions": list(self.blocked_actions), "requiresApproval": self.requires_approval,
                "timestamp": utc_now("milliseconds")}


class SafetyGuard:
    """Checks commands before they run; ``workspace`` confines paths (absolute paths and ``..`` outside it)."""

    def __init__(self, workspace: Path | None = None):
        self.workspace = workspace.resolve() if workspace else None

    def check(self, command: str) -> SafetyVerdict:
        risks = [risk for pattern, risk in _COMPILED if pattern.search(command)]
        if self.workspace is not None:
            risks.extend(self._path_risks(command))
        risks = list(dict.fromkeys(risks))
        if risks:
            return SafetyVerdict(safe=False, risks=risks, blocked_actions=[command], requires_approval=True)
        return SafetyVerdict(safe=True)

    def check_plan(self, plan: dict, *, executor_command: str | None = None) -> SafetyVerdict:
        """The whole plan before it runs: the executor command and the commands its steps quote."""
        commands = [executor_command] if executor_command else []
        for step in plan.get("steps", []):
            commands += re.findall(r"`([^`]+)`", str(step.get("change", "")))
        verdicts = [self.check(c) for c in commands]
        risks = list(dict.fromkeys(r for v in verdicts for r in v.risks))
        blocked = [a for v in verdicts for a in v.blocked_actions]
        return SafetyVerdict(safe=not risks, risks=risks, blocked_actions=blocked, requires_approval=bool(risks))

    def _path_risks(self, command: str) -> list[str]:
        assert self.workspace is not None
        try:
            words = shlex.split(command)
        except ValueError:
            return ["unparseable command line (unbalanced quotes)"]
        risks = []
        if words and os.path.isabs(words[0]) and os.access(words[0], os.X_OK) and not os.path.isdir(words[0]):
            words = words[1:]  # running a program by its full path (an interpreter) is not a path access
        for word in words:
            for part in re.split(r"[=:,]", word):
                if not part or part.startswith("-"):
                    continue
                if part.startswith("//"):
                    continue  # the rest of a URL after its scheme
                if part.startswith(("/", "~")) and not self._inside(Path(part).expanduser()):
                    if part in ("/dev/null",):
                        continue
                    risks.append(f"path outside the workspace: {part}")
                elif ".." in Path(part).parts and not self._inside(self.workspace / part):
                    risks.append(f"path outside the workspace: {part}")
        return risks

    def _inside(self, path: Path) -> bool:
        assert self.workspace is not None
        try:
            path.resolve().relative_to(self.workspace)
        except ValueError:
            return False
        return True
