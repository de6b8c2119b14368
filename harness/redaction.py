"""The one redaction filter, and the environment children get.

Secrets are (a) the values of environment variables whose names look like credentials and (b) text in
the shape of well-known keys, wherever it came from. :func:`redact` turns each into
``[REDACTED:<VARIABLE>]`` or ``[REDACTED:<kind>-key]``. Every writer of records, reports, traces and
terminal lines calls it (docs/design.md, "Secrets").

A value shorter than :data:`MIN_SECRET_LENGTH` characters is not redacted by value: ``DEBUG_TOKEN=1``
would otherwise turn every "1" of every record into a redaction mark. Key shapes are long anyway.

:func:`child_environment` is what a command a user did not write gets: the allowlist below plus the
names the configuration declares, never the whole environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

# Parts of a variable name that say it holds a credential (matched between underscores or at the ends,
# so KEYBOARD_LAYOUT is not one but API_KEY, DB_PASS and GITHUB_TOKEN are).
CREDENTIAL_WORDS = ("KEY", "KEYS", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASS", "PASSWD", "PASSWORD",
                    "PASSPHRASE", "PWD", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "PRIVATE", "COOKIE",
                    "SESSION", "SIGNATURE", "CERT", "DSN")
# ...except these, which are paths or settings, not secrets.
NOT_SECRETS = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KEYTIMEOUT", "PASSWORD_STORE_DIR",
                         "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "CERT_PATH",
                         "XAUTHORITY", "SESSION_MANAGER", "DBUS_SESSION_BUS_ADDRESS", "XDG_SESSION_ID",
                         "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_SESSION_DESKTOP", "DESKTOP_SESSION"})
MIN_SECRET_LENGTH = 6

# Well-known key shapes, most specific first (an Anthropic key also looks like an OpenAI one).
KEY_SHAPES: tuple[tuple[str, str], ...] = (
    ("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{16,}"),
    ("openai-key", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("aws-access-key-id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("bearer-token", r"(?<=[Bb]earer )[A-Za-z0-9._~+/\-]{16,}=*"),
)

# What a child process needs to run, and nothing that could hold a credential.
ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM", "NO_COLOR",
    "TMPDIR", "VIRTUAL_ENV", "PYTHONIOENCODING", "PYTHONUTF8", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE", "SOURCE_DATE_EPOCH",
)
_ALLOWED_PREFIXES = ("LC_",)

_NAME_PATTERN = re.compile(r"(?:^|_)(?:" + "|".join(CREDENTIAL_WORDS) + r")(?:_|$)")
_SHAPES = re.compile("|".join(f"(?P<{kind.replace('-', '_')}>{pattern})" for kind, pattern in KEY_SHAPES))
_cache: dict[str, Any] = {"values": None, "pattern": None, "names": {}}


def is_credential_name(name: str) -> bool:
    upper = name.upper()
    return upper not in NOT_SECRETS and bool(_NAME_PATTERN.search(upper))


def secret_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret value -> the variable that holds it, from ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for name, value in environ.items():
        value = value.strip()
        if len(value) >= MIN_SECRET_LENGTH and is_credential_name(name) and value not in found:
            found[value] = name
    return found


def _pattern() -> tuple[re.Pattern[str], dict[str, str]]:
    """One compiled pattern for the current secret values and the key shapes, rebuilt only when the
    environment's secrets change (a test's monkeypatch, a key set after start-up)."""
    values = secret_values()
    if values != _cache["values"]:
        # longest first, so a value that contains another is replaced whole
        literals = sorted(values, key=len, reverse=True)
        alternatives = [f"(?P<v{i}>{re.escape(value)})" for i, value in enumerate(literals)]
        _cache["pattern"] = re.compile("|".join([*alternatives, _SHAPES.pattern]))
        _cache["names"] = {f"v{i}": values[value] for i, value in enumerate(literals)}
        _cache["values"] = values
    return _cache["pattern"], _cache["names"]


def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<NAME>]``."""
    if not text:
        return text
    pattern, names = _pattern()

    def mark(match: re.Match[str]) -> str:
        group = match.lastgroup or ""
        return f"[REDACTED:{names.get(group) or group.replace('_', '-')}]"

    return pattern.sub(mark, text)


def redact_json(value: Any) -> Any:
    """``value`` with every string inside it (dict keys too) redacted; other values unchanged."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_json(k): redact_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_json(v) for v in value)
    return value


def child_environment(declared: Iterable[str] = (), *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: the allowlist plus the ``declared`` names, taken from ``base``
    (default: this process's environment). A declared name passes even when it looks like a credential:
    declaring it is the user saying the command needs it."""
    base = os.environ if base is None else base
    wanted = set(declared)
    return {name: value for name, value in base.items()
            if name in wanted or name in ENV_ALLOWLIST or name.startswith(_ALLOWED_PREFIXES)}
