"""Failure analyses (seed 001, section 7): what went wrong with a candidate that lost, why, its category
and the lesson planners read in the history."""

from __future__ import annotations

from harness.apps.tournament.models import FailureAnalysis, Plan
from harness.apps.tournament.schemas import validate
from harness.loading.goal import Goal

# how a failed benchmark run is analysed (seed 001's categories)
RUN_CATEGORY = {"sealed": "sealed_file_violation", "timeout": "timeout", "oom": "oom",
                "parse_error": "benchmark_parse_error"}

# "measurement" and "implausible" are not seed 001's categories: a change that reaches into what measures it,
# and a score outside what the goal declares plausible, are recorded as the seed's sealed_file_violation, with
# reasons of their own.
_SEED_CATEGORY = {"measurement": "sealed_file_violation", "implausible": "sealed_file_violation"}
_WHY = {
    "sealed_file_violation": ("the sealed benchmark must stay the same for every candidate; a changed benchmark "
                              "would measure something else"),
    "measurement": ("a change that reaches into what measures it (the clock, the result, the interpreter's "
                    "start-up) can move the score without making the program any better"),
    "implausible": ("a score outside what the goal declares plausible (no time at all, past plausible_best, more "
                    "than plausible_factor times the baseline) is likelier a fooled or broken measurement than a "
                    "real gain"),
    "scope_error": "the change does not fit the code at the current best commit",
    "logic_error": "the change broke the program: the benchmark or its check could not produce a score",
    "benchmark_parse_error": "the benchmark's output no longer holds a readable score",
    "timeout": "the change made the benchmark too slow or made it hang",
    "oom": "the benchmark ran out of memory with the change",
    "infrastructure": "the executor could not carry the plan out",
}
_LESSON = {
    "sealed_file_violation": "improve the program, never the benchmark or the other sealed paths ({sealed})",
    "measurement": ("improve the program itself; leave timers, exit hooks, stdout, the standard library and the "
                    "import system alone, or ask the user to approve the change"),
    "implausible": ("make the program itself faster or better; if such a score is real, the user approves it "
                    "(--approve) or widens the goal's plausible bounds"),
    "scope_error": "write the change against the current best commit and keep it to the target files",
    "logic_error": "keep the program's answers exact; check the change against the benchmark's own checks first",
    "benchmark_parse_error": "keep the output the benchmark's check reads in the format it expects",
    "timeout": "keep the work bounded; the benchmark has a time limit of {timeout:g} s",
    "oom": "keep memory use bounded",
    "infrastructure": "fix the executor setup (model access, executor_command) before retrying the plan",
}


def failure_analysis(category: str, detail: str, plan: Plan, goal: Goal, *,
                     not_merged: bool = False) -> FailureAnalysis:
    """Seed 001's failure analysis object for a candidate that lost."""
    if category == "regression":
        why = (f"the hypothesis did not hold: {plan.hypothesis}" if not not_merged else
               "the measured gain is not larger than the benchmark's noise, so it is not a real improvement")
        lesson = (f"the {plan.approach_family} idea '{plan.title or plan.plan_id}' does not improve "
                  f"{goal.metric.name}; do not repeat it")
    else:
        why = _WHY.get(category, "see what")
        lesson = _LESSON.get(category, "avoid repeating this failure").format(
            sealed=", ".join(goal.sealed_paths), timeout=goal.benchmark.timeout_s)
    analysis = {"what": detail or category, "why": why, "category": _SEED_CATEGORY.get(category, category),
                "lesson": lesson}
    validate("failure_analysis", analysis, "failure analysis")
    return FailureAnalysis.from_json(analysis)
