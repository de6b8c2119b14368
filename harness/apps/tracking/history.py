"""``harness history``: per agent and rubric, how score, pass rate, attempts, tokens and cost move over cycles."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.apps.tracking.frames import attempts_frame, items_frame
from harness.base.usage import shown_cost

HISTORY_COLUMNS = ["agent", "rubric", "cycle", "items", "score", "scored", "pass_rate", "judged", "attempts",
                   "tokens", "cost_usd", "cost_known"]
FORMATS = ("table", "csv", "json")


def history_frame(work_dir: Path, *, agent: str | None = None, rubric: str | None = None,
                  since: str | None = None) -> pd.DataFrame:
    """One row per agent, rubric and cycle, oldest cycle first.

    ``score`` is the mean final score of the cycle's items that have one (``scored`` of them: an item a check
    decided before judging, or nobody could score, has none),
    ``pass_rate`` is passed / ``judged``: the items pytest passed or failed (xfailed counts as not passed;
    skipped items, the ones nobody could score, are left out; NaN when there is none). ``attempts``,
    ``tokens`` (input, output and cache) and ``cost_usd`` are totals over every attempt, ``cost_usd`` of the
    models with a price (``cost_known`` false when one had none). ``since`` is a date
    (``2026-01-31``) or a cycle id; cycles from it on are kept.
    """
    items = items_frame(attempts_frame(Path(work_dir)))
    if agent is not None:
        items = items[items["agent_name"] == agent]
    if rubric is not None:
        items = items[items["rubric_name"] == rubric]
    if since is not None:
        items = items[items["cycle_id"] >= since]
    if items.empty:
        return pd.DataFrame(columns=HISTORY_COLUMNS)
    grouped = items.groupby(["agent_name", "rubric_name", "cycle_id"], sort=True).agg(
        items=("nodeid", "size"),
        score=("overall_score", "mean"),
        scored=("overall_score", "count"),
        pass_rate=("passed", "mean"),
        judged=("passed", "count"),
        attempts=("attempts", "sum"),
        tokens=("tokens", "sum"),
        cost_usd=("cost_usd", "sum"),
        cost_known=("cost_known", "all"),
    )
    frame = grouped.reset_index().rename(columns={"agent_name": "agent", "rubric_name": "rubric", "cycle_id": "cycle"})
    frame["score"] = frame["score"].round(4)
    frame["pass_rate"] = frame["pass_rate"].astype(float).round(4)
    frame["cost_usd"] = frame["cost_usd"].round(6)
    return frame[HISTORY_COLUMNS]


def format_history(frame: pd.DataFrame, fmt: str) -> str:
    """``table`` for people, ``csv`` for spreadsheets, ``json`` (an array of objects) for scripts."""
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        records = json.loads(frame.to_json(orient="records"))
        return json.dumps(records, indent=2) + "\n"
    if frame.empty:
        return "no records yet\n"
    shown = frame.copy()
    shown["score"] = [("-" if pd.isna(v) else f"{v:.3f}" + (f" ({n}/{items})" if n < items else ""))
                      for v, n, items in zip(shown["score"], shown["scored"], shown["items"])]
    shown["pass_rate"] = [("-" if pd.isna(v) else f"{v:.0%} of {n}") for v, n in zip(shown["pass_rate"],
                                                                                    shown["judged"])]
    shown["cost_usd"] = [shown_cost(v, bool(known)) for v, known in zip(shown["cost_usd"], shown["cost_known"])]
    shown = shown.drop(columns=["judged", "scored", "cost_known"])
    return shown.to_string(index=False) + "\n"
