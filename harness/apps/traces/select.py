"""Which trace lines ``harness traces`` shows, and how one reads as text.

A :class:`Selection` is the command's filters (item, events, exit codes, since); :meth:`Selection.feed` takes the
lines in the order written and gives back those to show. Exit codes are known only when an execution completes,
so with ``--exit-code`` an item's lines wait until its ``execution_complete`` says whether they are shown (each
matching item's story then reads whole, in the order written).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.base import exit_codes
from harness.records import TRACE_EVENTS

TRIAGE_WORDS = ("success", "retry", "fix_inputs", "escalate", "review_output", "alert_maintainer", "investigate")
_RANGE = re.compile(r"^(\d{1,3})\s*-\s*(\d{1,3})$")
_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class ExitCodes:
    """Exit codes a user asked for: codes and ranges (``65``, ``80-83``), triage words (``escalate``) and names
    (``timeout``, ``blocked``)."""

    ranges: tuple[tuple[int, int], ...] = ()
    triages: frozenset[str] = frozenset()

    def __contains__(self, code: object) -> bool:
        if not isinstance(code, int) or isinstance(code, bool):
            return False
        return any(low <= code <= high for low, high in self.ranges) or exit_codes.triage(code) in self.triages


def exit_code_spec(text: str) -> ExitCodes:
    """``--exit-code``'s value (argparse type): comma-separated codes, ranges, triage words or code names."""
    ranges: list[tuple[int, int]] = []
    triages: set[str] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        word = part.lower().replace("-", "_")
        found = _RANGE.match(part)
        if part.isdigit():
            ranges.append((int(part), int(part)))
        elif found:
            low, high = sorted((int(found[1]), int(found[2])))
            ranges.append((low, high))
        elif word in TRIAGE_WORDS:
            triages.add(word)
        elif exit_codes.named(word) is not None:
            code = exit_codes.named(word)
            ranges.append((code, code))
        else:
            raise argparse.ArgumentTypeError(
                f"{part!r} is not an exit code (fix: give a code such as 65, a range such as 80-83, a triage word "
                f"({', '.join(TRIAGE_WORDS)}) or a name such as timeout; several with commas)")
    if not ranges and not triages:
        raise argparse.ArgumentTypeError("no exit code given (fix: give a code such as 65, a range such as 80-83 or "
                                         "a triage word such as escalate)")
    return ExitCodes(tuple(ranges), frozenset(triages))


def event_name(text: str) -> str:
    """``--event``'s value (argparse type): one of the trace's events (``model_call``; ``model-call`` too)."""
    name = text.strip().lower().replace("-", "_")
    if name not in TRACE_EVENTS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a trace event (fix: use one of {', '.join(TRACE_EVENTS)})")
    return name


def since_time(text: str, *, now: dt.datetime | None = None) -> str:
    """``--since``'s value (argparse type) as a ``ts`` to compare with: a date (``2026-01-31``), a time in ISO 8601
    (UTC unless it says otherwise), or an age (``30m``, ``2h``, ``7d``)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    ago = _AGO.match(text.strip())
    if ago:
        moment = now - dt.timedelta(seconds=float(ago[1]) * _UNITS[ago[2]])
    else:
        try:
            moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a time (fix: give a date such as 2026-01-31, a time "
                                             "such as 2026-01-31T09:30, or an age such as 30m, 2h or 7d)") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
    moment = moment.astimezone(dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass
class Selection:
    """The filters of ``harness traces``: every one given must hold for a line to be shown."""

    item: str | None = None  # a substring of the node id
    events: frozenset[str] = frozenset()  # empty: every event
    exit_codes: ExitCodes | None = None
    since: str | None = None  # a ts: lines at or after it
    _waiting: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    _shown: set[tuple[str, str]] = field(default_factory=set)

    def feed(self, line: dict[str, Any], cycle: str = "") -> list[dict[str, Any]]:
        """The lines to show now, given the next ``line`` of ``cycle``."""
        data = line["data"]
        nodeid = data.get("nodeid")
        if self.since is not None and line["ts"] < self.since:
            return []
        if self.item is not None and (not isinstance(nodeid, str) or self.item not in nodeid):
            return []
        if self.exit_codes is None:
            return [line] if self._wanted(line) else []
        if not isinstance(nodeid, str):
            return []
        key = (cycle, nodeid)
        if key in self._shown:
            return [line] if self._wanted(line) else []
        waiting = self._waiting.setdefault(key, [])
        waiting.append(line)
        if line["event"] != "execution_complete":
            return []
        if data.get("exit_code") in self.exit_codes:
            self._shown.add(key)
            return [held for held in self._waiting.pop(key) if self._wanted(held)]
        if data.get("phase") is None:  # the item's own execution ended with another code: its lines are not shown
            self._waiting.pop(key, None)
        return []

    def _wanted(self, line: dict[str, Any]) -> bool:
        return not self.events or line["event"] in self.events


# --- text --------------------------------------------------------------------------------------------------


def text_line(line: dict[str, Any], cycle: str | None = None) -> str:
    """One readable line: when, (the cycle,) the event, the item, and what happened."""
    data = line["data"]
    what = _SUMMARIES.get(line["event"], lambda d: "")(data)
    nodeid = data.get("nodeid") or "-"
    parts = [line["ts"], *([cycle] if cycle else []), f"{line['event']:<18}", nodeid]
    if data.get("phase"):
        parts.append(f"[{data['phase']}]")
    return "  ".join([*parts, what]).rstrip()


def _invoked(data: dict[str, Any]) -> str:
    version = f" {data['version']}" if data.get("version") else ""
    inputs = ", ".join(data.get("input_summary") or {}) or "none kept"
    return (f"{data.get('skill_id')}{version} via {data.get('operator_type')}, attempt {data.get('attempt')}, "
            f"{data.get('context_size', 0)} chars of input (inputs: {inputs})")


def _gate(data: dict[str, Any]) -> str:
    verdict = "passed" if data.get("passed") else "FAILED"
    failures = "; ".join(f"{f.get('name')}: {f.get('message')}" for f in data.get("failures") or [])
    checks = len(data.get("checks_performed") or [])
    text = f"gate {data.get('gate_id')} {data.get('name')} {verdict} ({checks} check{'s' * (checks != 1)})"
    if failures:
        text += f": {failures}"
    if data.get("remediation_attempted"):
        text += " (remediation follows)"
    return text


def _progress(data: dict[str, Any]) -> str:
    parts = []
    if data.get("phase_entered"):
        parts.append(f"entered {data['phase_entered']}")
    if data.get("phase_exited"):
        parts.append(f"left {data['phase_exited']}")
    made = ", ".join(data.get("artifacts_created") or [])
    if made:
        size = f" ({data['chars']} chars)" if data.get("chars") is not None else ""
        parts.append(f"{data.get('role') or 'made'} {made}{size}")
    effects = len(data.get("side_effects") or [])
    if effects:
        parts.append(f"{effects} side effect{'s' * (effects != 1)}")
    return "; ".join(parts)


def _complete(data: dict[str, Any]) -> str:
    text = f"{data.get('status')} exit {data.get('exit_code')}"
    if data.get("exit_code") != 0:
        text += f" ({data.get('exit_meaning') or '?'}; {data.get('triage') or '?'})"
    text += f" in {float(data.get('duration_ms') or 0):.0f} ms"
    score = (data.get("assessment") or {}).get("score")
    if score is not None:
        text += f", score {score:.3f}"
    gates = data.get("gates") or []
    if gates:
        text += ", gates " + " ".join(f"{g.get('gate')}{'+' if g.get('passed') else '-'}" for g in gates)
    errors = data.get("errors") or []
    if errors:
        text += f"; {errors[0].get('message') if isinstance(errors[0], dict) else errors[0]}"
    return text


def _handoff(data: dict[str, Any]) -> str:
    verdict = "accepted" if data.get("accepted") else "REJECTED"
    text = f"{data.get('from_phase')} -> {data.get('to_phase')} {verdict}"
    if data.get("rejection_reason"):
        text += f": {data['rejection_reason']}"
    return text


def _model_call(data: dict[str, Any]) -> str:
    tokens = data.get("tokens") or {}
    cost = "cost unknown" if data.get("cost_usd") is None else f"${data['cost_usd']:.6f}"
    flags = [word for word, on in (("cached", data.get("cached")), ("batched", data.get("batched"))) if on]
    return (f"{data.get('model')} {tokens.get('input_tokens', 0)}/{tokens.get('output_tokens', 0)} tokens, {cost}, "
            f"{float(data.get('duration_ms') or 0):.0f} ms" + "".join(f", {flag}" for flag in flags))


_SUMMARIES = {"skill_invoked": _invoked, "gate_checked": _gate, "execution_progress": _progress,
              "execution_complete": _complete, "handoff_attempted": _handoff, "model_call": _model_call}


def matching(lines: Iterable[tuple[str, dict[str, Any]]], selection: Selection) -> Iterable[tuple[str, dict[str, Any]]]:
    """``(cycle, line)`` pairs the selection shows, in order."""
    for cycle, line in lines:
        for shown in selection.feed(line, cycle):
            yield cycle, shown
