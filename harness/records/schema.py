"""The tables of ``harness.db``: their DDL, the migrations of older work folders, and the attempt_details row.

``agent_runs`` is seed 000 section 1 verbatim, a contract column for column; ``attempt_details`` holds what
it has no column for (docs/design.md, docs/contracts.md); ``loop_results`` the loop result of each item.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from harness.base.attempts import AttemptDetails
from harness.base.redaction import redact_json, redacted_json

# Seed 000 section 1, verbatim: the columns, CHECK and indexes are a contract.
AGENT_RUNS_SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  cycle_id TEXT NOT NULL,
  agent_name TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 1,
  status TEXT NOT NULL CHECK (status IN ('running', 'passed', 'failed', 'escalated')),
  overall_score REAL,
  dimension_scores TEXT,
  feedback TEXT,
  suggested_fixes TEXT,
  artifact_path TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  duration_ms INTEGER,
  rubric_version TEXT
);
CREATE INDEX IF NOT EXISTS idx_agent_runs_cycle ON agent_runs(cycle_id);
CREATE INDEX IF NOT EXISTS idx_agent_runs_agent ON agent_runs(agent_name);
CREATE INDEX IF NOT EXISTS idx_agent_runs_status ON agent_runs(status);
"""

# What the seed has no column for (docs/design.md): one row per agent_runs row.
ATTEMPT_DETAILS_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempt_details (
  run_id INTEGER PRIMARY KEY REFERENCES agent_runs(id),
  nodeid TEXT NOT NULL,
  case_id TEXT NOT NULL,
  rubric_name TEXT NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN
    ('running', 'passed', 'failed', 'escalated', 'indeterminate', 'error', 'validation_failed', 'interrupted')),
  exit_code INTEGER NOT NULL DEFAULT 0,
  threshold REAL NOT NULL,
  model TEXT,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd REAL NOT NULL DEFAULT 0,
  dimensions TEXT NOT NULL DEFAULT '{}',
  samples TEXT,
  cached_answers INTEGER NOT NULL DEFAULT 0,
  verdict TEXT,  -- pytest's word for the item, on its final attempt: passed|failed|skipped|xfailed|xpassed
  model_usage TEXT,  -- JSON {"provider/model": {calls, input_tokens, ..., cost_usd}}; NULL: not recorded
  cost_known INTEGER,  -- 1: cost_usd is the whole cost; 0: some model had no price; NULL (older rows): 1
  commands TEXT,  -- JSON [{role, confined, network, exit_code, seconds, limits_hit, leftovers}]; NULL: none ran
  variant TEXT  -- the agent's variant the attempt ran (agents.yaml `variants:`); NULL: the agent has none
);
CREATE INDEX IF NOT EXISTS idx_attempt_details_rubric ON attempt_details(rubric_name);
"""

# The loop result of each item (seed 000 section 6), written when its loop ends.
LOOP_RESULTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS loop_results (
  cycle_id TEXT NOT NULL,
  nodeid TEXT NOT NULL,
  agent_name TEXT NOT NULL,
  case_id TEXT NOT NULL,
  result TEXT NOT NULL,  -- JSON: success, finalAttempt, finalScore, artifactPath, allRuns, escalated, escalationReason
  case_data TEXT,  -- JSON {inputs, expected, description[, cut]}: what the item was given; NULL: not recorded
  PRIMARY KEY (cycle_id, nodeid)
);
"""

# What `harness merge` made of which shards: one row per shard merged into a cycle of this work folder, so that
# merging the same shards again changes nothing. Made by the first merge (harness/records/merge.py).
MERGED_SHARDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS merged_shards (
  cycle_id TEXT NOT NULL,     -- the merged cycle, in this work folder
  fingerprint TEXT NOT NULL,  -- sha256 over the shard's items' records (ids, cycle and work folder set aside)
  source TEXT NOT NULL,       -- the shard's work folder, as given to harness merge
  shard_cycle TEXT NOT NULL,  -- the cycle the shard's session made
  shard TEXT,                 -- I/N, from the shard's shard.json; NULL: not recorded
  items INTEGER NOT NULL,
  merged_at TEXT NOT NULL,
  PRIMARY KEY (cycle_id, fingerprint)
);
"""

# Columns added to loop_results after its first release, migrated as ADDED_DETAIL_COLUMNS are.
ADDED_LOOP_COLUMNS = {"case_data": "TEXT"}

# The most of an item's case data a row keeps: 64 KB of JSON; a larger one is cut, and its ``cut`` says so.
MAX_CASE_DATA_BYTES = 64 * 1024

# Columns added to attempt_details after its first release: a work folder from an older version gains them
# when a session opens it, and a reader of one it has not yet opened reads them as NULL.
ADDED_DETAIL_COLUMNS = {"cached_answers": "INTEGER NOT NULL DEFAULT 0", "verdict": "TEXT", "model_usage": "TEXT",
                        "cost_known": "INTEGER", "commands": "TEXT", "variant": "TEXT"}


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables a new work folder lacks and bring an older one's up to date (idempotent)."""
    conn.executescript(f"BEGIN IMMEDIATE; {AGENT_RUNS_SCHEMA} {ATTEMPT_DETAILS_SCHEMA} {LOOP_RESULTS_SCHEMA} COMMIT;")
    _add_missing_columns(conn)
    _widen_outcome_check(conn)


def detail_columns(conn: sqlite3.Connection) -> set[str]:
    """The columns attempt_details has in this database (an older one may lack the added ones)."""
    return {row[1] for row in conn.execute("PRAGMA table_info(attempt_details)")}


def _widen_outcome_check(conn: sqlite3.Connection) -> None:
    """A work folder from before outcome ``interrupted`` existed: rebuild attempt_details with today's CHECK
    (SQLite cannot alter a CHECK in place), keeping every row."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'attempt_details'"
                              ).fetchone()
        if "'interrupted'" not in sql:
            columns = ", ".join(row[1] for row in conn.execute("PRAGMA table_info(attempt_details)"))
            table, index = ATTEMPT_DETAILS_SCHEMA.split(";\n", 1)
            conn.execute(table.replace("IF NOT EXISTS attempt_details", "attempt_details_new"))
            conn.execute(f"INSERT INTO attempt_details_new ({columns}) SELECT {columns} FROM attempt_details")
            conn.execute("DROP TABLE attempt_details")
            conn.execute("ALTER TABLE attempt_details_new RENAME TO attempt_details")
            conn.execute(index)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def loop_columns(conn: sqlite3.Connection) -> set[str]:
    """The columns loop_results has in this database (an older one may lack the added ones)."""
    return {row[1] for row in conn.execute("PRAGMA table_info(loop_results)")}


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    for table, present, added in (("attempt_details", detail_columns(conn), ADDED_DETAIL_COLUMNS),
                                  ("loop_results", loop_columns(conn), ADDED_LOOP_COLUMNS)):
        for name, declaration in added.items():
            if name not in present:
                try:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")
                except sqlite3.OperationalError as exc:  # another process of the session added it first
                    if "duplicate column" not in str(exc):
                        raise


# The columns AttemptDetails writes: run_id, then those of :func:`detail_values` in order; verdict is written apart.
DETAIL_WRITE_COLUMNS = (
    "run_id", "nodeid", "case_id", "rubric_name", "outcome", "exit_code", "threshold", "model", "input_tokens",
    "output_tokens", "cache_write_tokens", "cache_read_tokens", "cost_usd", "dimensions", "samples",
    "cached_answers", "model_usage", "cost_known", "commands", "variant",
)


def detail_values(d: AttemptDetails) -> tuple[Any, ...]:
    """The row of ``d`` after its ``run_id``, JSON columns encoded (and redacted, like every record)."""
    return (d.nodeid, d.case_id, d.rubric_name, d.outcome, d.exit_code, d.threshold, d.model,
            d.input_tokens, d.output_tokens, d.cache_write_tokens, d.cache_read_tokens, d.cost_usd,
            redacted_json(d.dimensions), json.dumps(d.samples) if d.samples is not None else None,
            d.cached_answers,
            redacted_json(d.model_usage, sort_keys=True) if d.model_usage is not None else None,
            int(bool(d.cost_known)), redacted_json(d.commands) if d.commands is not None else None,
            d.variant)


def encode_case_data(data: dict[str, Any], limit: int = MAX_CASE_DATA_BYTES) -> str:
    """An item's case data (``inputs``, ``expected``, ``description``) as the ``case_data`` column keeps it: JSON,
    redacted like every record, at most ``limit`` bytes. Over it, the largest fields are cut: each such field holds
    the start of its JSON text, as a string, and ``cut`` maps its name to its whole size in bytes."""
    data = redact_json(data)
    whole = json.dumps(data, ensure_ascii=False, default=str)
    if len(whole.encode("utf-8")) <= limit:
        return whole
    texts = {name: json.dumps(value, ensure_ascii=False, default=str) for name, value in data.items()}
    sizes = {name: len(text.encode("utf-8")) for name, text in texts.items()}
    kept: dict[str, Any] = {}
    cut: dict[str, int] = {}
    room = limit - 256 - sum(len(name) + 8 for name in data)  # the envelope's keys and the cut note
    for index, name in enumerate(sorted(data, key=sizes.__getitem__)):
        share = room // (len(data) - index)
        if sizes[name] <= share:
            kept[name], room = data[name], room - sizes[name]
            continue
        kept[name], cut[name] = _prefix(texts[name], share), sizes[name]
        room -= len(json.dumps(kept[name], ensure_ascii=False).encode("utf-8"))
    return json.dumps({**{name: kept[name] for name in data}, "cut": cut}, ensure_ascii=False)


def _prefix(text: str, size: int) -> str:
    """The longest start of ``text`` whose JSON string takes at most ``size`` bytes."""
    length = size
    while length > 0:
        head = text[:length]
        encoded = len(json.dumps(head, ensure_ascii=False).encode("utf-8"))
        if encoded <= size:
            return head
        length = max(0, min(length - 1, length * size // encoded - 1))
    return ""


def decode_json(text: Any, default: Any) -> Any:
    """A JSON column's value; ``default`` for NULL or text that is not JSON."""
    if not isinstance(text, (str, bytes)):
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def decode_model_usage(text: Any) -> dict[str, dict[str, Any]] | None:
    usage = decode_json(text, None)
    return usage if isinstance(usage, dict) else None


def decode_cost_known(value: Any) -> bool:
    """NULL (a row from before the column) means known: those sessions priced every model they called."""
    return value is None or bool(value)
