"""The design document's word patterns (seed 002, section 7: "30+ dangerous patterns including rm -rf, sudo,
drop database, process.env, api_key, password"), as a table: what to look for, what it means in words a user
understands, its kind of risk, and the places where it counts.

The parser (shell.py) reads what a command line would run; words reach where no parser does: the sentences of
a plan and the content of the files it would write. Where a word counts is part of its row, because the same
word means different things in different places: ``password`` in a command line is a secret on its way
somewhere, while in a plan's sentence ("add a password reset form") it is a feature, and in a file's code
(``def check_password``) it is a name. A row matches case-insensitively; each regex draws its own word
boundaries, since ``\\b`` treats ``_`` as a letter (``password_hint`` is not ``password``) but a secret's name
is often spelled with underscores around it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

DESTRUCTIVE = "destructive"
PRIVILEGE = "privilege escalation"
SECRETS = "secret access"
NETWORK = "network"
REMOTE_CODE = "remote code"
OUTSIDE = "path outside the workspace"
CATEGORIES = (DESTRUCTIVE, PRIVILEGE, SECRETS, NETWORK, REMOTE_CODE, OUTSIDE)


class Place(str, Enum):
    """Where a text comes from, which decides what a word found in it means."""

    COMMAND = "command"  # a command line: what would run
    CONTENT = "content"  # what a file the plan writes would hold
    PROSE = "prose"  # what the plan says: task descriptions, steps


EVERYWHERE = frozenset(Place)
# Code and configuration name these words all the time (``def shutdown``, ``token=None``); only running them counts.
ONLY_RUN = frozenset({Place.COMMAND})
# Words a sentence uses for a feature ("the password reset form", "API key rotation") but a file's text for a secret.
RUN_OR_WRITTEN = frozenset({Place.COMMAND, Place.CONTENT})
ONLY_WRITTEN = frozenset({Place.CONTENT})  # a literal secret in code or configuration
NOT_RUN = frozenset({Place.CONTENT, Place.PROSE})  # the parser judges commands: ``printenv HOME`` is harmless


@dataclass(frozen=True)
class WordPattern:
    """One row of the table: a regex, what it means, its kind of risk, where it counts."""

    regex: re.Pattern[str]
    meaning: str
    category: str
    places: frozenset[Place]

    def risk(self, matched: str) -> str:
        shown = " ".join(matched.split())
        return f"{self.category}: {self.meaning} ('{shown[:60]}{'...' if len(shown) > 60 else ''}')"


def word(pattern: str, meaning: str, category: str, places: frozenset[Place] = EVERYWHERE) -> WordPattern:
    if category not in CATEGORIES:
        raise ValueError(f"{category!r} is not one of {CATEGORIES}")
    return WordPattern(re.compile(pattern, re.IGNORECASE), meaning, category, places)


_SHELL = r"(?:sudo\s+)?(?:ba|z|da|k)?sh\b|python[0-9.]*\b|perl\b|ruby\b|node\b"
_SECRET_NAME = (r"(?:api[_-]?key|apikey|secret(?:[_-]?key)?|access[_-]?key|private[_-]?key|(?:auth[_-]?)?token|"
                r"passw(?:or)?d)")
# A secret's name as a word of its own: an option (--password), a value, a search; not part of a longer name
# (password_hint) or of a file's path (docs/api-key-rotation.md): credential files are judged as paths (guard.py).
_ALONE = r"(?:(?<=--)|(?<![\w./-]))"
_END = r"(?![\w./-])"
_DOTENV_READERS = r"\b(?:cat|less|more|head|tail|bat|strings|source|grep|awk|xxd|od|base64|type)\b"

WORD_PATTERNS: tuple[WordPattern, ...] = (
    # destructive
    word(r"\brm\s+(?:-[a-z]*r[a-z]*f[a-z]*|-[a-z]*f[a-z]*r[a-z]*|-r\s+-f|-f\s+-r|--recursive\s+--force|"
         r"--force\s+--recursive)(?![\w-])", "deletes files recursively, without asking", DESTRUCTIVE),
    word(r"\bdrop\s+(?:database|schema)\b", "deletes a whole database", DESTRUCTIVE),
    word(r"\bdrop\s+table\b", "deletes a table and every row in it", DESTRUCTIVE),
    word(r"\btruncate\s+table\b", "empties a table", DESTRUCTIVE),
    word(r"\bdelete\s+from\s+\w+\s*(?:;|$)", "deletes every row of a table (no WHERE)", DESTRUCTIVE),
    word(r"\bmkfs(?:\.\w+)?\b", "formats a disk", DESTRUCTIVE),
    word(r"\bdd\s+if=", "copies raw disk blocks, which can overwrite a disk", DESTRUCTIVE),
    word(r"\bformat\s+[a-z]:", "formats a Windows drive", DESTRUCTIVE),
    word(r"\bdel\s+/[fsq]\b", "deletes files on Windows without asking", DESTRUCTIVE),
    word(r"\b(?:rd|rmdir)\s+/s\b", "deletes a folder tree on Windows", DESTRUCTIVE),
    word(r"\bshred\b", "overwrites files so they cannot be recovered", DESTRUCTIVE, RUN_OR_WRITTEN),
    word(r"\b(?:shutdown|reboot|poweroff|halt)\b", "stops or restarts the machine", DESTRUCTIVE, ONLY_RUN),
    word(r"\bkill\s+-(?:9|kill|sigkill)\b", "kills processes without letting them clean up", DESTRUCTIVE),
    word(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:", "a fork bomb: starts processes until the machine stops",
         DESTRUCTIVE),
    word(r"\bgit\s+push\b[^\n;&|]*\s(?:--force(?:-with-lease)?|-f|--mirror|--delete)(?![\w-])",
         "rewrites or deletes a remote's history", DESTRUCTIVE),
    word(r"\bgit\s+reset\s+--hard\b", "discards uncommitted work", DESTRUCTIVE),
    word(r"\bgit\s+clean\s+-[a-z]*f", "deletes untracked files", DESTRUCTIVE),
    # privilege escalation
    word(r"\bsudo\b", "runs as root", PRIVILEGE),
    word(r"\b(?:doas|pkexec)\b", "runs as root", PRIVILEGE, RUN_OR_WRITTEN),
    word(r"\bchmod\s+(?:-\w+\s+)*0?777\b", "makes files writable by everyone", PRIVILEGE),
    word(r"\bchmod\s+(?:-\w+\s+)*[ugoa]*\+s\b", "sets the setuid bit (runs as the file's owner)", PRIVILEGE),
    word(r"\bchown\s+(?:-\w+\s+)*root\b", "gives files to root", PRIVILEGE),
    word(r"\bsystemctl\s+(?:enable|disable|start|stop|restart|mask)\b", "changes the machine's services",
         PRIVILEGE),
    # secret access: the specific rows first, so that /etc/passwd is a file of accounts rather than a password
    word(r"\bprocess\.env\b", "reads the environment, where API keys are kept", SECRETS),
    word(r"\bos\.(?:environ|getenv)\b", "reads the environment, where API keys are kept", SECRETS),
    word(r"/etc/(?:passwd|shadow|gshadow|sudoers|master\.passwd)\b", "the machine's accounts and password hashes",
         SECRETS),
    word(r"(?:~|\$home|\$\{home\})/\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b", "SSH keys", SECRETS),
    word(r"\bssh-keygen\b", "makes or replaces SSH keys", SECRETS),
    word(r"\.aws/credentials\b|\.git-credentials\b|\.netrc\b|\.pgpass\b", "a file of stored credentials", SECRETS),
    word(r"(?:~|\$home)/\.(?:bash|zsh)_history\b", "the shell history, where typed secrets stay", SECRETS),
    word(_DOTENV_READERS + r"[^\n;&|]*?(?<![\w.-])(?:[\w.-]*/)?\.env(?:\.(?!example\b|sample\b|template\b|dist\b)"
         r"[\w-]+)?(?![\w./-])", "reads a .env file, where secrets are kept", SECRETS),
    word(r"(?:^|[;&|(]\s*)\.\s+(?:[\w.-]*/)?\.env\b", "reads a .env file, where secrets are kept", SECRETS),
    word(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----", "a private key written out", SECRETS),
    word(r"\bauthorization:\s*bearer\s+[\w.~+/=-]{8,}", "a bearer token written out", SECRETS, NOT_RUN),
    word(r"\bauthorization:\s*bearer\b", "a bearer token sent with a request", SECRETS, ONLY_RUN),
    word(r"\baws_secret_access_key\b", "an AWS secret key", SECRETS, RUN_OR_WRITTEN),
    word(r"(?<![\w-])[\w-]*" + _SECRET_NAME + r"[\w-]*[\"']?\s*[:=]\s*[\"'][^\"'\s]{4,}[\"']",
         "a secret written into the file as a literal", SECRETS, ONLY_WRITTEN),
    word(_ALONE + r"(?:api[_-]?key|apikey)" + _END, "an API key", SECRETS, ONLY_RUN),
    word(_ALONE + r"passw(?:or)?d" + _END, "a password", SECRETS, ONLY_RUN),
    word(_ALONE + r"secret[_-]?key" + _END, "a secret key", SECRETS, ONLY_RUN),
    word(_ALONE + r"private[_ -]key" + _END, "a private key", SECRETS, ONLY_RUN),
    word(r"(?<![a-z0-9])token=", "a token given in the command's text", SECRETS, ONLY_RUN),
    word(r"\bprintenv\b", "prints the environment, where API keys are kept", SECRETS, NOT_RUN),
    word(r"\$\{?(?:[a-z0-9]+_)*(?:api_?key|secret(?:_key)?|access_key|token|passw(?:or)?d)(?:_[a-z0-9]+)*\}?"
         r"(?![a-z0-9_])", "reads a secret from the environment", SECRETS, NOT_RUN),
    # network
    word(r"(?<![\w.-])(?:nc|ncat|netcat)\s+(?:[^\n;&|]*\s)?-[a-z]*[ec]\b",
         "a reverse shell: netcat hands a shell to a remote host", NETWORK),
    word(r"/dev/(?:tcp|udp)/", "a raw network connection from the shell", NETWORK),
    word(r"\b(?:npm\s+publish|twine\s+upload|cargo\s+publish|gem\s+push|poetry\s+publish)\b",
         "publishes a package to a public registry", NETWORK),
    # remote code
    word(r"\b(?:curl|wget|fetch)\b[^\n;&]*\|\s*(?:" + _SHELL + ")", "runs a script downloaded from the internet",
         REMOTE_CODE),
    word(r"\b(?:ba|z)?sh\s+<\(\s*(?:curl|wget)\b", "runs a script downloaded from the internet", REMOTE_CODE),
    word(r"\beval\s+[\"']?\$\(\s*(?:curl|wget)\b", "runs a script downloaded from the internet", REMOTE_CODE),
    word(r"\bbase64\s+(?:-\w+\s+)*(?:-d|--decode|-D)\b", "decodes hidden data, often a hidden command",
         REMOTE_CODE),
    word(r"(?<![\w.])eval\s*\(", "evaluates text as code", REMOTE_CODE),
    word(r"(?<![\w.])exec\s*\(", "runs text as code", REMOTE_CODE),
    word(r"\bpip[0-9.]*\s+install\b[^\n;&|]*(?:\s(?:git\+)?https?://|--(?:extra-)?index-url[=\s]+http://|"
         r"--trusted-host)", "installs a package from an arbitrary address", REMOTE_CODE),
    word(r"\biex\s*\(|\binvoke-expression\b|\bpowershell(?:\.exe)?\s[^\n]*-e(?:nc|ncodedcommand)?\s",
         "runs hidden PowerShell code", REMOTE_CODE, RUN_OR_WRITTEN),
    # paths outside the workspace
    word(r"(?:~|\$home)/\.(?:bashrc|bash_profile|profile|zshrc|zprofile)\b",
         "a shell startup file outside the workspace: it runs at every login", OUTSIDE),
    word(r"/etc/cron|\bcrontab\s+(?!-l\b)", "schedules commands outside the workspace", OUTSIDE),
    word(r">>?\s*/etc/", "writes into the machine's configuration", OUTSIDE),
)


def word_risks(text: str, place: Place, patterns: Sequence[WordPattern] = WORD_PATTERNS) -> Iterator[tuple[str, str]]:
    """(category, risk) for each row that counts in ``place`` and matches ``text``; a piece of text another row
    of the same kind already matched (``passwd`` inside ``/etc/passwd``) is one finding, not two."""
    taken: list[tuple[str, int, int]] = []
    for pattern in patterns:
        if place not in pattern.places:
            continue
        for found in pattern.regex.finditer(text):
            start, end = found.span()
            if any(kind == pattern.category and start < t_end and t_start < end for kind, t_start, t_end in taken):
                continue
            taken.append((pattern.category, start, end))
            yield pattern.category, pattern.risk(found.group(0))
            break
