"""The critic's deterministic checks (seed 001's critic_review), each with its reason.

h001  one hypothesis per plan
h002  the approach family has not won the last N iterations in a row (N = goal's family_streak)
h003  no two plans of a round share an approach family (the first one keeps its place)
schema_valid   the plan matches the plan schema and names a family of the goal's taxonomy
history_aware  the plan does not repeat an earlier attempt and refers only to plans that exist

and, on every candidate's change as committed (whatever executor made it), :func:`measurement_flags`:
what in it reaches into the measurement (timers, ``atexit``, stdout, the standard library, the benchmark's
``__main__``, import hooks, ``.pth``, ``sitecustomize``, ``conftest.py``, the result channel). Such a candidate
is not merged without the user's explicit approval. The flags are an early warning, read from text; the score
rests on the measurement from outside the run and the sealed check in a process of its own
(docs/tournament.md, threat model).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from harness.base.jsonschemas import contract_errors
from harness.loading.goal import Goal

CHECKS = ("h001_hypothesis_count", "h002_family_streak", "h003_intra_round_diversity", "schema_valid",
          "history_aware")
_JOINERS = re.compile(r";|\b(and also|additionally|as well as|in addition|furthermore|moreover)\b", re.IGNORECASE)
_PREDICTIONS = re.compile(r"\b(should|will|would)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
_PLAN_REF = re.compile(r"\bround_[0-9]+_[a-z][a-z0-9_]*\b")

# Files that change how Python or pytest start, whatever they contain.
_STARTUP_FILES = re.compile(r"(^|/)(sitecustomize\.py|usercustomize\.py|conftest\.py|[^/]*\.pth)$")
_STDLIB = r"(?:time|os|sys|io|json|math|random|builtins|subprocess|resource|signal|gc|atexit|importlib|timeit)"
# (what it reaches, pattern over one added line)
_MEASUREMENT_LINES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((what, re.compile(pattern)) for what, pattern in (
    ("a timer", r"\b(perf_counter|process_time|thread_time|monotonic|time_ns|getrusage|os\.times)\b|\btime\.time\b"
                r"|\btimeit\b"),
    ("an exit hook", r"\batexit\b|\bos\._exit\b|\bsys\.exitfunc\b"),
    ("stdout or stderr", r"\bsys\.(__)?std(out|err)(__)?\s*=(?!=)|\bsys\.std(out|err)\.\w+\s*=(?!=)"
                         r"|\bredirect_std(out|err)\b|\bos\.dup2?\b"),
    ("the standard library", rf"\b{_STDLIB}\.\w+(\.\w+)*\s*=(?!=)|\bsetattr\(\s*{_STDLIB}\b|__builtins__"
                             r"|\bimport\s+builtins\b|\bfrom\s+builtins\s+import\b"),
    ("the benchmark's own module", r"\bimport\s+__main__\b|\bfrom\s+__main__\s+import\b|['\"]__main__['\"]\s*\]"),
    ("the import system", r"\bsys\.(meta_path|path_hooks|path_importer_cache|modules)\b|\b__import__\b"
                          r"|\bimportlib\.(abc|machinery)\b"),
    ("the caller's frames", r"\bsys\._getframe\b|\binspect\.(stack|currentframe|getouterframes)\b"
                            r"|\bgc\.get_referrers\b|\bctypes\b"),
    ("the result channel", r"HARNESS_|/dev/fd/|/proc/[^/\s'\"]*/fd\b"),
))


@dataclass(frozen=True)
class PriorAttempt:
    """A plan tried in an earlier iteration (from the iteration history)."""

    plan_id: str
    hypothesis: str
    approach_family: str
    diff_sha256: str | None
    outcome: str  # "winner" or the failure category


def diff_digest(diff: str | None) -> str | None:
    if not diff:
        return None
    lines = [ln.rstrip() for ln in diff.splitlines() if not ln.startswith(("index ", "diff --git"))]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def count_hypotheses(text: str) -> int:
    """Sentences, plus explicit joiners ('; ', 'additionally', ...), plus extra predictions ('should',
    'will', 'would') before the first 'because'."""
    text = text.strip()
    if not text:
        return 0
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    claim = re.split(r"\bbecause\b", text, maxsplit=1, flags=re.IGNORECASE)[0]  # the reason may predict too
    predictions = len(_PREDICTIONS.findall(claim))
    return len(sentences) + len(_JOINERS.findall(text)) + max(0, predictions - 1)


def review_round(plans: list[dict[str, Any]], goal: Goal, history: list[dict[str, Any]],
                 prior: list[PriorAttempt]) -> None:
    """Set ``critic_review`` and ``critic_approved`` on every plan of one round, in order."""
    families = set(goal.family_tags)
    recent_winners = [h.get("winner", {}) and h["winner"].get("approach_family") for h in history]
    streak = goal.family_streak
    known_ids = {p.plan_id for p in prior}
    seen_families: dict[str, str] = {}
    for plan in plans:
        results: dict[str, str] = {}
        reasons: dict[str, str] = {}

        n = count_hypotheses(str(plan.get("hypothesis", "")))
        results["h001_hypothesis_count"] = "pass" if n == 1 else "fail"
        reasons["h001_hypothesis_count"] = ("one hypothesis" if n == 1 else
                                            "no hypothesis" if n == 0 else
                                            f"{n} hypotheses in one plan; test one idea at a time")

        family = str(plan.get("approach_family", ""))
        last = recent_winners[-streak:] if streak else []
        if len(last) == streak and streak > 0 and all(f == family for f in last):
            results["h002_family_streak"] = "fail"
            reasons["h002_family_streak"] = (f"{family!r} won the last {streak} iterations; "
                                             "try another approach family")
        else:
            results["h002_family_streak"] = "pass"
            reasons["h002_family_streak"] = f"{family!r} has not won {streak} iterations in a row"

        if family in seen_families:
            results["h003_intra_round_diversity"] = "fail"
            reasons["h003_intra_round_diversity"] = (f"{seen_families[family]} already covers {family!r} "
                                                     "this round")
        else:
            results["h003_intra_round_diversity"] = "pass"
            reasons["h003_intra_round_diversity"] = f"the only {family!r} plan this round"
            seen_families[family] = str(plan.get("plan_id"))

        errors = contract_errors("plan", {k: v for k, v in plan.items() if k not in ("critic_review", "architect_review")})
        if family not in families:
            errors.append(f"approach_family: {family!r} is not in the taxonomy ({', '.join(sorted(families))})")
        results["schema_valid"] = "pass" if not errors else "fail"
        reasons["schema_valid"] = "matches the plan schema" if not errors else errors[0]

        results["history_aware"], reasons["history_aware"] = _history_check(plan, prior, known_ids)

        failed = [k for k in CHECKS if results[k] == "fail"]
        plan["critic_review"] = {
            **results,
            "verdict": "approved" if not failed else "rejected",
            "rejection_reason": None if not failed else "; ".join(f"{k}: {reasons[k]}" for k in failed),
            "reasons": reasons,
        }
        flags = measurement_flags(plan.get("diff") or "")
        if flags:  # known before it runs; checked again on the change as committed, whoever made it
            plan["critic_review"]["measurement_flags"] = flags
        plan["critic_approved"] = not failed


def _history_check(plan: dict[str, Any], prior: list[PriorAttempt], known_ids: set[str]) -> tuple[str, str]:
    digest = diff_digest(plan.get("diff"))
    hypothesis = _norm(str(plan.get("hypothesis", "")))
    for attempt in prior:
        if digest and attempt.diff_sha256 == digest:
            return "fail", f"repeats the change of {attempt.plan_id} ({attempt.outcome})"
        if hypothesis and _norm(attempt.hypothesis) == hypothesis:
            return "fail", f"repeats the hypothesis of {attempt.plan_id} ({attempt.outcome})"
    ref = plan.get("history_reference") or {}
    mentioned = set(_PLAN_REF.findall(f"{ref.get('builds_on', '')} {ref.get('avoids', '')}"))
    unknown = sorted(mentioned - known_ids)
    if unknown:
        return "fail", f"refers to {', '.join(unknown)}, which the history does not have"
    if not prior:
        return "pass", "no earlier attempts to repeat"
    return "pass", f"repeats none of the {len(prior)} earlier attempts"


def prior_attempts(history: list[dict[str, Any]]) -> list[PriorAttempt]:
    """Every plan tried in the recorded iterations (winners and losers). A plan the executor could not carry
    out (``infrastructure``: no model, refused by SafetyGuard or for want of a sandbox) never tested its
    hypothesis, so it is not an attempt a new plan repeats."""
    out = []
    for record in history:
        entries = ([("winner", record["winner"])] if record.get("winner") else []) + [
            ((loser.get("failure_analysis") or {}).get("category", "lost"), loser) for loser in record.get("losers", [])]
        for outcome, entry in entries:
            if outcome == "infrastructure":
                continue
            out.append(PriorAttempt(plan_id=entry["plan_id"], hypothesis=entry.get("hypothesis", ""),
                                    approach_family=entry.get("approach_family", ""),
                                    diff_sha256=entry.get("diff_sha256"), outcome=outcome))
    return out


def measurement_flags(diff: str) -> list[str]:
    """What a unified diff reaches into that the measurement depends on, one line each, e.g.
    ``an exit hook: goals/x/program/app.py: +atexit.register(report)``. Empty when nothing does."""
    flags: list[str] = []
    path = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip().removeprefix("b/")
            if path != "/dev/null" and _STARTUP_FILES.search(path):
                flags.append(f"a file Python or pytest runs at start-up: {path}")
            continue
        if not line.startswith("+") or path == "/dev/null":
            continue
        code = line[1:].strip()
        for what, pattern in _MEASUREMENT_LINES:
            if pattern.search(code):
                flags.append(f"{what}: {path}: +{code[:120]}")
                break
    return list(dict.fromkeys(flags))
