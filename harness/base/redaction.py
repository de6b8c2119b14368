"""The one redaction filter, and the environment children get.

Secrets are (a) the values of environment variables whose names look like credentials and (b) text in
the shape of well-known keys, wherever it came from. :func:`redact` turns each into
``[REDACTED:<VARIABLE>]`` or ``[REDACTED:<kind>-key]``. Every writer of records, reports, traces and
terminal lines calls it (docs/design.md, "Secrets"), and pytest's own reports (a traceback, its locals, its
crash line) pass through :func:`redact_objects` on their way to the terminal and the JUnit XML.

A value shorter than :data:`MIN_SECRET_LENGTH` characters is not redacted by value: ``DEBUG_TOKEN=1``
would otherwise turn every "1" of every record into a redaction mark. Key shapes are long anyway.

:func:`child_environment` is what a command a user did not write gets: the allowlist below plus the
names the configuration declares, never the whole environment.
"""

from __future__ import annotations

import dataclasses
import functools
import json
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

# Every key shape starts with one of these (the bearer token follows "earer ").
SHAPE_MARKERS = ("sk-", "AKIA", "ASIA", "ABIA", "ACCA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                 "earer ")

# What a child process needs to run, and nothing that could hold a credential.
ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM", "NO_COLOR",
    "TMPDIR", "VIRTUAL_ENV", "PYTHONIOENCODING", "PYTHONUTF8", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE", "SOURCE_DATE_EPOCH",
)
_ALLOWED_PREFIXES = ("LC_",)

_NAME_PATTERN = re.compile(r"(?:^|_)(?:" + "|".join(CREDENTIAL_WORDS) + r")(?:_|$)")
_SHAPES = re.compile("|".join(f"(?P<{kind.replace('-', '_')}>{pattern})" for kind, pattern in KEY_SHAPES))
_cache: dict[str, Any] = {"signature": None, "known": set(), "credential_keys": (), "credential_values": None,
                         "values": {}, "needles": (),
                         "pattern": None, "names": {}}


@functools.lru_cache(maxsize=4096)
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
    """One compiled pattern for the current secret values and the key shapes, rebuilt only when a
    credential variable changes (a test's monkeypatch, a key set after start-up).

    This runs on every write, so the check is cheap: os.environ's own dict is read without decoding,
    the credential names are found again only when the set of names changes (its length, or its newest
    name), and then only their values are compared. pytest itself sets and removes PYTEST_CURRENT_TEST
    around every test, which must not rebuild anything.
    """
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        data = dict(os.environ)
    signature = (len(data), next(reversed(data), None))
    if signature != _cache["signature"]:
        _cache["signature"] = signature
        known, keys = _cache["known"], data.keys()
        added, removed = keys - known, known - keys  # set operations in C: a few microseconds
        _cache["known"] = set(keys)
        if any(is_credential_name(_text(k)) for k in added) or removed & set(_cache["credential_keys"]):
            _cache["credential_keys"] = tuple(k for k in keys if is_credential_name(_text(k)))
    current = tuple(data.get(k) for k in _cache["credential_keys"])
    if current != _cache["credential_values"] or _cache["pattern"] is None:
        _cache["credential_values"] = current
        values = secret_values()
        # longest first, so a value that contains another is replaced whole
        literals = sorted(values, key=len, reverse=True)
        alternatives = [f"(?P<v{i}>{re.escape(value)})" for i, value in enumerate(literals)]
        _cache["pattern"] = re.compile("|".join([*alternatives, _SHAPES.pattern]))
        _cache["names"] = {f"v{i}": values[value] for i, value in enumerate(literals)}
        _cache["values"] = values
        # a value as it reads inside JSON text too (quotes and backslashes escaped, and other than ASCII as \u
        # escapes, as json.dumps writes it by default), for scans of records
        escaped = [json.dumps(v, ensure_ascii=ascii_only)[1:-1] for v in literals for ascii_only in (False, True)]
        _cache["needles"] = tuple(dict.fromkeys([*literals, *escaped]))
    return _cache["pattern"], _cache["names"]


def _text(key: str | bytes) -> str:
    return key.decode("utf-8", "surrogateescape") if isinstance(key, bytes) else key


class Redactor:
    """Redacts text with the secrets of one moment: for a walk over many strings, one look at the
    environment instead of one per string."""

    def __init__(self) -> None:
        self.pattern, self.names = _pattern()
        self.values = _cache["needles"]

    def finds(self, text: str) -> bool:
        """Whether ``text`` may hold a secret. Substring tests run at memory speed, where the pattern's many
        alternatives cost ~0.1 ms per KB: the pattern runs only on text with a secret value or the start of
        a key shape."""
        return any(marker in text for marker in SHAPE_MARKERS) or any(v in text for v in self.values)

    def __call__(self, text: str) -> str:
        if not text or not self.finds(text):
            return text
        return self.pattern.sub(self._mark, text)

    def _mark(self, match: re.Match[str]) -> str:
        group = match.lastgroup or ""
        return f"[REDACTED:{self.names.get(group) or group.replace('_', '-')}]"


def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<NAME>]``."""
    return Redactor()(text) if text else text


def redact_json_text(text: str) -> str:
    """JSON text with every secret in its strings redacted, as :func:`redact_json` redacts data: a clean text (most
    are) is returned as it is after one scan; one that may hold a secret is parsed and walked, since a secret with a
    quote or a backslash in it is escaped in the text, where the pattern would miss it."""
    apply = Redactor()
    if not apply.finds(text):
        return text
    try:
        data = json.loads(text)
    except ValueError:
        return apply(text)
    return json.dumps(_walk(data, apply), ensure_ascii=False)


def redacted_json(value: Any, **options: Any) -> str:
    """``json.dumps(redact_json(value), **options)`` with one encoding for a value that holds no secret (most records
    are clean): the text is scanned, and only one that may hold a secret is walked and encoded again."""
    apply = Redactor()
    text = json.dumps(value, **options)
    if not apply.finds(text):
        return text
    return json.dumps(_walk(value, apply), **options)


def redact_json(value: Any, apply: Redactor | None = None) -> Any:
    """``value`` with every string inside it (dict keys too) redacted; other values unchanged.

    Records are mostly clean: their JSON text is scanned once, and only one that may hold a secret is
    walked string by string (a walk costs ~3 us a string, a scan a few for the whole record)."""
    apply = apply or Redactor()
    if isinstance(value, str):
        return apply(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    try:
        flat = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        flat = None
    if flat is not None and not apply.finds(flat):
        return value
    return _walk(value, apply)


def _walk(value: Any, apply: Redactor) -> Any:
    if isinstance(value, str):
        return apply(value)
    if isinstance(value, dict):
        return {_walk(k, apply): _walk(v, apply) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_walk(v, apply) for v in value)
    return value


def redact_objects(value: Any, apply: Redactor | None = None) -> Any:
    """``value`` with every string inside it redacted, dataclasses and lists changed in place (pytest's
    failure reports, their traceback entries and crash lines, are dataclasses of strings); other values
    unchanged. Returns the redacted value (a new one for a string or tuple)."""
    apply = apply or Redactor()
    return _redact_object(value, apply, set())


def _redact_object(value: Any, apply: Redactor, seen: set[int]) -> Any:
    if isinstance(value, str):
        return apply(value)
    if id(value) in seen:
        return value
    if isinstance(value, list):
        seen.add(id(value))
        value[:] = [_redact_object(item, apply, seen) for item in value]
    elif type(value) is tuple:
        return tuple(_redact_object(item, apply, seen) for item in value)
    elif isinstance(value, dict):
        seen.add(id(value))
        for key, item in list(value.items()):
            value[key] = _redact_object(item, apply, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        seen.add(id(value))
        for field in dataclasses.fields(value):
            item = getattr(value, field.name, None)
            clean = _redact_object(item, apply, seen)
            if clean is not item:
                object.__setattr__(value, field.name, clean)
    return value


def child_environment(declared: Iterable[str] = (), *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: the allowlist plus the ``declared`` names, taken from ``base``
    (default: this process's environment). A declared name passes even when it looks like a credential:
    declaring it is the user saying the command needs it."""
    base = os.environ if base is None else base
    wanted = set(declared)
    return {name: value for name, value in base.items()
            if name in wanted or name in ENV_ALLOWLIST or name.startswith(_ALLOWED_PREFIXES)}
