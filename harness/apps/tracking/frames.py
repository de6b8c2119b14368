"""pandas frames over the harness records (``WORK/harness.db``), read-only.

Three shapes, each built from the one before:

- :func:`attempts_frame`: one row per attempt (``agent_runs`` joined with ``attempt_details``);
- :func:`items_frame`: one row per item and cycle, its final attempt, with totals over its attempts;
- :func:`dimensions_frame`: one row per item, cycle and dimension of the final attempt.

Cycle ids (``YYYY-MM-DD-NNN``) sort in time order, so every frame is sorted by cycle id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.face.report_text import VERDICT_PASSED, default_verdict
from harness.records import ATTEMPT_FIELDS, RecordReader

ATTEMPT_COLUMNS = list(ATTEMPT_FIELDS)

TOKEN_COLUMNS = ["input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens"]
USAGE_COUNTS = ["calls", *TOKEN_COLUMNS]


def attempts_frame(work_dir: Path, cycles: list[str] | None = None) -> pd.DataFrame:
    """Every attempt in the work folder (optionally only ``cycles``); empty when there is no database.

    Read through :class:`harness.records.RecordReader` (read-only: it never creates the database).
    ``dimensions`` is a dict ``{dim: {score, weight, reason}}``, ``suggested_fixes`` a list,
    ``samples`` a list of per-sample overall scores or None, ``model_usage`` a dict by model or None,
    ``cost_known`` False where some model of the attempt had no price.
    """
    rows = RecordReader(Path(work_dir)).attempts(cycles)
    frame = pd.DataFrame.from_records(rows, columns=ATTEMPT_COLUMNS, coerce_float=True)
    frame["overall_score"] = pd.to_numeric(frame["overall_score"], errors="coerce").astype(float)
    return frame


def merge_usage(usages: Iterable[dict[str, dict[str, Any]] | None]) -> dict[str, dict[str, Any]] | None:
    """Per-model usage summed over attempts; a model's ``cost_usd`` is None when any attempt's was. None when no
    attempt recorded usage."""
    merged: dict[str, dict[str, Any]] = {}
    for usage in usages:
        for model, counts in (usage if isinstance(usage, dict) else {}).items():
            if not isinstance(counts, dict):
                continue
            total = merged.setdefault(model, {**{c: 0 for c in USAGE_COUNTS}, "cost_usd": 0.0})
            for column in USAGE_COUNTS:
                total[column] += int(counts.get(column) or 0)
            cost = counts.get("cost_usd")
            total["cost_usd"] = None if cost is None or total["cost_usd"] is None else total["cost_usd"] + cost
    return merged or None


SCORE_COLUMNS = ("overall_score", "rubric_name", "dimensions", "threshold")


def items_frame(attempts: pd.DataFrame) -> pd.DataFrame:
    """One row per (cycle, item): the final attempt's fields plus ``attempts``, ``tokens`` and
    ``cost_usd`` summed over all of the item's attempts, and ``passed`` (the final outcome)."""
    columns = [*ATTEMPT_COLUMNS, "attempts", "tokens", "passed", "first_score"]
    if attempts.empty:
        return pd.DataFrame(columns=columns)
    keys = ["cycle_id", "nodeid"]
    ordered = attempts.sort_values([*keys, "attempt", "run_id"])
    final = ordered.groupby(keys, sort=True).tail(1).set_index(keys)
    # an item of several runs (a construct's phases, a pipeline's stages) is scored by its last scored run: its
    # score, rubric and dimensions; its verdict, outcome and exit code stay the item's, on its last run
    scored = ordered[ordered["overall_score"].notna()].groupby(keys, sort=True).tail(1).set_index(keys)
    unscored = [key for key in final.index if key in scored.index and pd.isna(final.at[key, "overall_score"])]
    for column in SCORE_COLUMNS:
        for key in unscored:
            final.at[key, column] = scored.at[key, column]
    totals = ordered.groupby(keys, sort=True).agg(
        attempts=("attempt", "size"),
        cost_total=("cost_usd", "sum"),
        cached_total=("cached_answers", "sum"),
        cost_known_all=("cost_known", "all"),
        **{f"{c}_total": (c, "sum") for c in TOKEN_COLUMNS},
    )
    items = final.join(totals)
    # attempt 1's score beside the final one: what the revisions added (of the run that scores the item, for an
    # item of several runs)
    firsts = ordered[ordered["attempt"] == 1].groupby([*keys, "case_id"], sort=True).head(1).set_index(
        [*keys, "case_id"])["overall_score"]
    scoring_run = {key: (scored if key in scored.index else final).at[key, "case_id"] for key in final.index}
    items["first_score"] = [firsts.get((*key, scoring_run[key]), math.nan) for key in items.index]
    items["cost_usd"] = items.pop("cost_total")
    items["cached_answers"] = items.pop("cached_total").fillna(0).astype(int)
    items["cost_known"] = items.pop("cost_known_all").astype(bool)
    usage = {key: merge_usage(group) for key, group in ordered.groupby(keys, sort=True)["model_usage"]}
    items["model_usage"] = [usage[key] for key in items.index]
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
    return RecordReader(Path(work_dir)).cycles()
