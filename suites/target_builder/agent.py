"""The demo target builder: a deterministic producer and a reviser that applies suggested fixes.

The producer is deliberately naive (it takes each company's first trigger, whatever its age, cites
rumours when the library has nothing, and ignores the contact history), so attempt 1 fails on stale
triggers, duplicates and an invalid trigger; the reviser applies the evaluator's suggested fixes, so
attempt 2 passes.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.S)
FRESH_DAYS = 14


def produce(request: dict[str, Any]) -> str:
    inputs = request["inputs"]
    events = inputs["triggers"]["events"]
    targets = []
    for company in inputs["companies"]:
        event = next((e for e in events if e["company"] == company["name"]), None)
        if event is None and "rumor" in company:
            event = {**company["rumor"], "source": None}
        if event is None:
            continue
        targets.append(_target(company, event))
    return render(str(inputs["as_of"]), targets)


def revise(request: dict[str, Any]) -> str:
    inputs = request["inputs"]
    as_of = _date(inputs["as_of"])
    document = json.loads(JSON_BLOCK.search(request["artifact"])[1])
    targets = document["targets"]
    companies = {c["name"]: c for c in inputs["companies"]}
    for fix in request["suggested_fixes"]:
        stale = re.match(r"Replace stale date (\d{4}-\d{2}-\d{2})", fix)
        if stale:
            targets = [_refresh(t, inputs["triggers"]["events"], companies, as_of) if t["trigger_date"] == stale[1]
                       else t for t in targets]
            targets = [t for t in targets if t is not None]
            continue
        named = [t for t in targets if t["company"] in fix]
        targets = [t for t in targets if t not in named]
    return render(document["as_of"], targets)


def _refresh(target: dict[str, Any], events: list[dict[str, Any]], companies: dict[str, Any],
             as_of: dt.date) -> dict[str, Any] | None:
    """Swap a stale trigger for the company's freshest library trigger, or drop the target."""
    fresh = [e for e in events if e["company"] == target["company"]
             and 0 <= (as_of - _date(e["date"])).days <= FRESH_DAYS]
    if not fresh:
        return None
    return _target(companies[target["company"]], max(fresh, key=lambda e: _date(e["date"])))


def _target(company: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    return {"company": company["name"], "trigger_type": event["type"], "trigger_date": str(event["date"]),
            "source": event.get("source"), "buyer": company.get("buyer", {}), "bu": company.get("bu")}


def _date(value: Any) -> dt.date:
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


def render(as_of: str, targets: list[dict[str, Any]]) -> str:
    lines = [f"# Target list ({as_of})", "", "| # | Company | Trigger | Buyer | BU |", "|---|---|---|---|---|"]
    for number, t in enumerate(targets, 1):
        buyer = t["buyer"]
        who = ", ".join(x for x in (buyer.get("name"), buyer.get("title")) if x)
        lines.append(f"| {number} | {t['company']} | {t['trigger_type']} | {who} | {t['bu']} |")
    document = {"as_of": as_of, "targets": targets}
    lines += ["", "```json", json.dumps(document, indent=2), "```", ""]
    return "\n".join(lines)
