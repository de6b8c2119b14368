"""Deterministic checks of the demo's target-quality rubric that need the fixtures."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.S)
HISTORY_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*(\d{4}-\d{2}-\d{2})\s*\|", re.M)
RECENT_CONTACT_DAYS = 90


def _targets(artifact: str) -> list[dict[str, Any]]:
    match = JSON_BLOCK.search(artifact)
    if not match:
        return []
    return json.loads(match[1]).get("targets", [])


def trigger_validity(artifact: str, context) -> dict[str, Any]:
    """1.0: exact library match with a source URL; 0.7: match without a source; 0.0: not in the library."""
    library = context.inputs["triggers"]
    events = {(e["company"], e["type"], str(e["date"])): e for e in library["events"]}
    targets = _targets(artifact)
    if not targets:
        return {"score": 0.0, "reason": "no targets found", "fixes": ["Add targets with library triggers"]}
    scores, fixes = [], []
    for t in targets:
        event = events.get((t["company"], t["trigger_type"], t["trigger_date"]))
        if event is None:
            scores.append(0.0)
            fixes.append(f"Remove {t['company']}: trigger {t['trigger_type']!r} on {t['trigger_date']} is not in "
                         "the trigger library")
        elif not t.get("source"):
            scores.append(0.7)
            fixes.append(f"Add the source URL of {t['company']}'s trigger")
        else:
            scores.append(1.0)
    valid = sum(s == 1.0 for s in scores)
    return {"score": sum(scores) / len(scores), "reason": f"{valid}/{len(scores)} targets have valid library "
            "triggers with a source", "fixes": fixes}


def dedup_check(artifact: str, context) -> dict[str, Any]:
    """1.0: not in the history; 0.5: contacted more than 90 days ago; 0.0: contacted within 90 days."""
    as_of = dt.date.fromisoformat(str(context.inputs["as_of"]))
    history = {name: dt.date.fromisoformat(day) for name, day in HISTORY_ROW.findall(context.inputs["history"])}
    targets = _targets(artifact)
    if not targets:
        return {"score": 0.0, "reason": "no targets found"}
    scores, fixes, recent = [], [], []
    for t in targets:
        contacted = history.get(t["company"])
        if contacted is None:
            scores.append(1.0)
            continue
        days = (as_of - contacted).days
        if days <= RECENT_CONTACT_DAYS:
            scores.append(0.0)
            recent.append(t["company"])
            fixes.append(f"Remove duplicate target {t['company']} (contacted {days} days ago, on {contacted})")
        else:
            scores.append(0.5)
    reason = f"{len(recent)}/{len(targets)} targets contacted within {RECENT_CONTACT_DAYS} days"
    if recent:
        reason += f": {', '.join(recent)}"
    return {"score": sum(scores) / len(scores), "reason": reason, "fixes": fixes}
