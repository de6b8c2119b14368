"""What a goal declares plausible, and the scores outside it.

A measurement that was fooled or broke shows up as a score no real change reaches: a run that took no time
at all, a score past the best the goal's author thinks possible (``plausible_best``), a gain of many times
the baseline in one step (``plausible_factor``). Such a score is still measured and recorded, but it is not
merged, confirmed or recorded as the baseline without the user's approval (``--approve``), whatever the
statistics say. The bounds live in goal.md's ``## Acceptance`` section.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.loading.goal import Goal

FLAG = "an implausible score"


def implausible(goal: Goal, score: float, baseline: float | None = None) -> str | None:
    """Why ``score`` is outside what the goal declares plausible (compared with ``baseline`` for the factor),
    or None when it is plausible."""
    metric, acc = goal.metric, goal.acceptance
    name = f"{metric.name} {score:g}"
    if goal.benchmark.measured and score <= 0:
        return f"{name}: no run takes no time at all"
    if score == 0 and metric.direction == "minimize" and not acc.zero_plausible:
        return f"{name}: a score of exactly 0 (the goal does not declare it plausible: zero_plausible)"
    if acc.plausible_best is not None and metric.better(score, acc.plausible_best) > 0:
        return f"{name} is better than the best the goal declares plausible (plausible_best {acc.plausible_best:g})"
    factor = acc.plausible_factor
    if factor is not None and baseline is not None and baseline > 0:
        # a minimized score at or below 0 is the zero rule's to judge
        times = (baseline / score if score > 0 else 0.0) if metric.direction == "minimize" else score / baseline
        if times > factor:
            return (f"{name} is more than {factor:g} times better than the baseline {baseline:g} "
                    f"(plausible_factor {factor:g})")
    return None


def flags(goal: Goal, scores: Iterable[float], baseline: float | None = None) -> list[str]:
    """One flag per distinct reason any of ``scores`` is implausible, e.g.
    ``an implausible score: runtime_ms 0: no run takes no time at all``. Empty when all are plausible."""
    found = (implausible(goal, score, baseline) for score in scores)
    return list(dict.fromkeys(f"{FLAG}: {why}" for why in found if why))
