"""pandas frames over the harness records (``WORK/harness.db``), read-only.

Three shapes, each built from the one before:

- :func:`attempts_frame`: one row per attempt (``agent_runs`` joined with ``attempt_details``);
- :func:`items_frame`: one row per item and cycle, its final attempt, with totals over its attempts;
- :func:`dimensions_frame`: one row per item, cycle and dimension of the final attempt.

Cycle ids (``YYYY-MM-DD-NNN``) sort in time order, so every frame is sorted by cycle id.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pandas as pd

from harness.records import DATABASE_NAME
from harness.report_text import VERDICT_PASSED, default_verdict

ATTEMPT_COLUMNS = [
    "run_id", "cycle_id", "agent_name", "attempt", "status", "overall_score", "feedback", "suggested_fixes",
    "artifact_path", "created_at", "duration_ms", "rubric_version", "nodeid", "case_id", "rubric_name", "outcome",
    "exit_code", "threshold", "model", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens",
    "cost_usd", "dimensions", "samples", "cached_answers", "verdict",
]

_QUERY = """
SELECT r.id AS run_id, r.cycle_id, r.agent_name, r.attempt, r.status, r.overall_score, r.feedback,
       r.suggested_fixes, r.artifact_path, r.created_at, r.duration_ms, r.rubric_version,
       d.nodeid, d.case_id, d.rubric_name, d.outcome, d.exit_code, d.threshold, d.model,
       d.input_tokens, d.output_tokens, d.cache_write_tokens, d.cache_read_tokens, d.cost_usd,
       d.dimensions, d.samples, {added}
FROM agent_runs AS r JOIN attempt_details AS d ON d.run_id = r.id
ORDER BY r.cycle_id, d.nodeid, r.attempt, r.id
"""

TOKEN_COLUMNS = ["input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens"]


def database_path(work_dir: Path) -> Path:
    return Path(work_dir) / DATABASE_NAME


def _json(text: Any, default: Any) -> Any:
    if text is None or (isinstance(text, float) and pd.isna(text)):
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def attempts_frame(work_dir: Path, cycles: list[str] | None = None) -> pd.DataFrame:
    """Every attempt in the work folder (optionally only ``cycles``); empty when there is no database.

    ``dimensions`` is a dict ``{dim: {score, weight, reason}}``, ``suggested_fixes`` a list,
    ``samples`` a list of per-sample overall scores or None.
    """
    db = database_path(work_dir)
    if not db.exists():
        return pd.DataFrame(columns=ATTEMPT_COLUMNS)
    with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)) as conn:
        try:
            present = {row[1] for row in conn.execute("PRAGMA table_info(attempt_details)")}
            added = ", ".join(f"d.{c}" if c in present else f"NULL AS {c}" for c in ("cached_answers", "verdict"))
            frame = pd.read_sql_query(_QUERY.format(added=added), conn)
        except (pd.errors.DatabaseError, sqlite3.OperationalError) as exc:
            if "no such table" in str(exc):
                return pd.DataFrame(columns=ATTEMPT_COLUMNS)
            raise
    if cycles is not None:
        frame = frame[frame["cycle_id"].isin(cycles)].reset_index(drop=True)
    frame["dimensions"] = [_json(v, {}) for v in frame["dimensions"]]
    frame["suggested_fixes"] = [_json(v, []) for v in frame["suggested_fixes"]]
    frame["samples"] = [_json(v, None) for v in frame["samples"]]
    frame["overall_score"] = pd.to_numeric(frame["overall_score"], errors="coerce").astype(float)
    return frame


def items_frame(attempts: pd.DataFrame) -> pd.DataFrame:
    """One row per (cycle, item): the final attempt's fields plus ``attempts``, ``tokens`` and
    ``cost_usd`` summed over all of the item's attempts, and ``passed`` (the final outcome)."""
    columns = [*ATTEMPT_COLUMNS, "attempts", "tokens", "passed"]
    if attempts.empty:
        return pd.DataFrame(columns=columns)
    keys = ["cycle_id", "nodeid"]
    ordered = attempts.sort_values([*keys, "attempt", "run_id"])
    final = ordered.groupby(keys, sort=True).tail(1).set_index(keys)
    totals = ordered.groupby(keys, sort=True).agg(
        attempts=("attempt", "size"),
        cost_total=("cost_usd", "sum"),
        cached_total=("cached_answers", "sum"),
        **{f"{c}_total": (c, "sum") for c in TOKEN_COLUMNS},
    )
    items = final.join(totals)
    items["cost_usd"] = items.pop("cost_total")
    items["cached_answers"] = items.pop("cached_total").fillna(0).astype(int)
    for column in TOKEN_COLUMNS:
        items[column] = items.pop(f"{column}_total").astype(int)
    items["tokens"] = items[TOKEN_COLUMNS].sum(axis=1).astype(int)
    # pytest's verdict where the session recorded it (the compare gate's failures included), else the one
    # the outcome gets by default; 1.0 passed, 0.0 failed or xfailed, NaN skipped (left out of pass rates)
    words = [v if isinstance(v, str) else default_verdict(o) for v, o in zip(items["verdict"], items["outcome"])]
    items["verdict"] = words
    items["passed"] = [VERDICT_PASSED.get(w) for w in words]
    items["passed"] = items["passed"].astype(float)
    return items.reset_index()[columns].sort_values(keys).reset_index(drop=True)


def dimensions_frame(items: pd.DataFrame) -> pd.DataFrame:
    """Long format: one row per (cycle, item, dimension) of each item's final attempt."""
    rows = []
    for item in items.itertuples(index=False):
        for dim, value in (item.dimensions or {}).items():
            value = value if isinstance(value, dict) else {"score": value}
            rows.append({
                "cycle_id": item.cycle_id, "agent_name": item.agent_name, "rubric_name": item.rubric_name,
                "nodeid": item.nodeid, "dimension": dim, "score": value.get("score"),
                "weight": value.get("weight"), "reason": value.get("reason", ""),
            })
    frame = pd.DataFrame(rows, columns=["cycle_id", "agent_name", "rubric_name", "nodeid", "dimension", "score",
                                        "weight", "reason"])
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce").astype(float)
    frame["weight"] = pd.to_numeric(frame["weight"], errors="coerce").astype(float)
    return frame


def cycle_ids(work_dir: Path) -> list[str]:
    """The cycles that have at least one finished attempt, oldest first."""
    attempts = attempts_frame(work_dir)
    finished = attempts[attempts["status"] != "running"]
    return sorted(finished["cycle_id"].unique().tolist())
