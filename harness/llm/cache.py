"""The response cache: identical model requests answered from SQLite (``WORK/cache.db``), not the API.

The key is the SHA-256 of the canonical JSON (sorted keys, no spaces) of everything that decides the
answer; :mod:`harness.llm` builds that payload (model, system, messages, tools, tool_choice,
max_tokens, sampling parameters, the API endpoint and the caller's ``cache_extra``). Any change to
any of it is a different key, so a changed rubric or prompt never gets a stale answer.

The file is shared by every thread of a session and by every pytest-xdist worker: it runs in WAL mode
with a busy timeout, each write is one statement (its own SQLite transaction, so a reader sees the
whole entry or none), and the database is opened on first use only, so a session that never calls
a model creates no file.

Modes (:data:`CACHE_MODES`), decided per request by :func:`cache_access`:

========== ======= ======= ==============================================
mode       read    write
========== ======= ======= ==============================================
off        no      no
read       yes     no      replay only; a miss calls the API, stores nothing
write      no      yes     every request calls the API; new answers are added, existing kept
refresh    no      yes     every request calls the API; answers overwrite what was there
auto       t = 0   t = 0   read and write only for temperature 0 (default)
========== ======= ======= ==============================================
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from harness.base.redaction import redacted_json
from harness.records.database import LazyDatabase

__all__ = ["CACHE_MODES", "CacheMode", "ResponseCache", "cache_access", "cache_key", "canonical_json"]

CacheMode = Literal["off", "read", "write", "refresh", "auto"]
CACHE_MODES: tuple[str, ...] = ("off", "read", "write", "refresh", "auto")
CACHE_FILE = "cache.db"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
  key TEXT PRIMARY KEY,          -- sha256 of the canonical request JSON
  model TEXT NOT NULL,
  reply TEXT NOT NULL,           -- JSON: text, tool_input, usage, model, stop_reason, tool_use_id
  created_at REAL NOT NULL       -- unix time
)
"""


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace: equal data, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def cache_key(payload: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``payload``."""
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def cache_access(mode: str, temperature: float) -> tuple[bool, bool, bool]:
    """``(read, write, overwrite)`` for one request under ``mode``."""
    if mode == "auto":
        on = temperature == 0
        return on, on, on
    if mode == "read":
        return True, False, False
    if mode == "write":
        return False, True, False
    if mode == "refresh":
        return False, True, True
    if mode == "off":
        return False, False, False
    raise ValueError(f"unknown cache mode {mode!r}: use one of {', '.join(CACHE_MODES)}")


class ResponseCache:
    """A SQLite key/value store of model replies; thread-safe, process-safe, opened lazily."""

    def __init__(self, path: Path | str, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._database = LazyDatabase(self.path, [_SCHEMA], what="response cache",
                                      fix="delete the file, or run with --harness-cache off",
                                      busy_timeout_s=busy_timeout_s)

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply for ``key``, or None (a missing or unreadable entry is a miss)."""
        with self._database.existing() as conn:  # a lookup alone never creates the cache
            if conn is None:
                return None
            row = conn.execute("SELECT reply FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, reply: Mapping[str, Any], *, model: str = "", overwrite: bool = True) -> None:
        """Store ``reply`` under ``key`` in one transaction; ``overwrite=False`` keeps an existing entry."""
        verb = "INSERT OR REPLACE" if overwrite else "INSERT OR IGNORE"
        text = redacted_json(dict(reply), ensure_ascii=False, sort_keys=True)
        with self._database.connection() as conn:
            conn.execute(f"{verb} INTO responses (key, model, reply, created_at) VALUES (?, ?, ?, ?)",
                         (key, model, text, time.time()))

    def __len__(self) -> int:
        with self._database.existing() as conn:
            return 0 if conn is None else int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def clear(self) -> None:
        """Forget every entry."""
        with self._database.connection() as conn:
            conn.execute("DELETE FROM responses")

    def close(self) -> None:
        """Close the connection (a later use opens it again)."""
        self._database.close()
