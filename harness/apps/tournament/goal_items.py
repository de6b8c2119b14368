"""Goals as a kind of item (harness.evaluation.items): ``goals/<slug>/goal.md`` holds three items,

* ``valid``: the goal file, its ideas and its sealed paths make sense;
* ``benchmark``: the sealed benchmark (its measured run on the current checkout, its check beside a copy
  of the sealed files) passes, meets the active phase's sub-score targets, scores within what the goal
  declares plausible and has not regressed below the baseline the tournament recorded;
* ``improve``: with ``--harness-improve N``, N tournament iterations (``harness improve``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.apps.tournament import plausibility
from harness.apps.tournament.benchmark import (
    BenchmarkSite,
    SealedPaths,
    check_sealed_check,
    command_argv,
    copy_sealed,
    project_files,
    run_benchmark,
)
from harness.apps.tournament.confine import GoalSandbox
from harness.apps.tournament.gitops import GitRepo
from harness.apps.tournament.ideas import list_ideas
from harness.apps.tournament.schemas import RecordInvalid
from harness.apps.tournament.store import Layout, read_json
from harness.base.errors import HarnessError
from harness.base.redaction import redact
from harness.evaluation.items import ItemContext, ItemFailed, ItemKind, ItemResult, ItemSpec
from harness.loading.goal import Goal
from harness.loading.goal_file import load_goal


def project_root(goal_file: Path) -> Path:
    """goals/<slug>/goal.md -> the folder that holds goals/ (where benchmark commands run)."""
    return goal_file.resolve().parent.parent.parent


def records_root(goal_file: Path) -> Path:
    """The repository root, where WORK/improve/<slug>/ lives (the project root outside git)."""
    root = project_root(goal_file)
    try:
        return GitRepo.discover(root).root
    except HarnessError:
        return root


def goal_sandbox(goal: Goal, goal_file: Path) -> tuple[GoalSandbox, GitRepo | None]:
    """The sandbox the gate runs the goal's benchmark in: the checkout itself is the writable worktree."""
    root = project_root(goal_file)
    try:
        repo: GitRepo | None = GitRepo.discover(root)
    except HarnessError:
        repo = None
    repo_root = repo.root if repo is not None else root
    git_dir = repo.git_dir() if repo is not None else root / ".git"
    return GoalSandbox(goal, repo_root, git_dir, root), repo


class GoalKind(ItemKind):
    """``goals/<slug>/goal.md``: ``valid``, ``benchmark`` and, with ``--harness-improve N``, ``improve``; each runs
    alone (a benchmark's timings must not compete with other work), and reports the goal's facts."""

    name = "goal"

    def __init__(self, improve_iterations: int = 0):
        self.improve_iterations = improve_iterations

    def claims(self, path: Path, *, rubrics_dir: Path) -> bool:
        return path.name == "goal.md" and path.parent.parent.name == "goals"

    def collect(self, path: Path, context: ItemContext) -> Iterator[ItemSpec]:
        goal = load_goal(path)
        names = ["valid", "benchmark"] + (["improve"] if self.improve_iterations > 0 else [])
        for name in names:
            yield ItemSpec(name=name, label=f"goal {goal.slug}: {name}", payload=(goal, path), line=0,
                           concurrent=False)

    def run(self, spec: ItemSpec, nodeid: str, context: ItemContext) -> ItemResult | None:
        goal, path = spec.payload
        return {"valid": _valid, "benchmark": _benchmark, "improve": self._improve}[spec.name](goal, path)

    def _improve(self, goal: Goal, path: Path) -> ItemResult:
        from harness.apps.tournament.loop import improve

        summary = improve(path, self.improve_iterations, echo=lambda line: print(redact(line), flush=True))
        return _facts(goal, improve_statuses=",".join(summary.statuses))


def _facts(goal: Goal, **more: Any) -> ItemResult:
    return ItemResult(outcome="passed", kind=GoalKind.name, facts={"goal": goal.slug, **more})


def _failed(goal: Goal, name: str, lines: list[str], result: ItemResult | None = None) -> ItemFailed:
    return ItemFailed(f"{goal.slug} {name}: " + "\n".join(lines), result)


def _valid(goal: Goal, path: Path) -> None:
    problems: list[str] = []
    try:
        list_ideas(goal.goal_dir)
    except HarnessError as exc:
        problems.append(str(exc))
    root = project_root(path)
    sealed = SealedPaths(goal.sealed_paths)
    files = project_files(root)
    for glob in goal.sealed_paths:
        if not SealedPaths([glob]).filter(files):
            problems.append(f"{path}: sealed_paths: {glob!r} matches no file")
    if not sealed.filter(files):
        problems.append(f"{path}: sealed_paths: nothing is sealed")
    for name, command in (("command", goal.benchmark.command), ("check", goal.benchmark.check)):
        argv = command_argv(command) if command else []
        if argv and argv[0] != sys.executable and shutil.which(argv[0]) is None and not (root / argv[0]).exists():
            problems.append(f"{path}: benchmark.{name}: {argv[0]!r} is not on PATH")
    try:
        check_sealed_check(goal, files)
    except HarnessError as exc:
        problems.append(str(exc))
    box, repo = goal_sandbox(goal, path)
    try:
        box.check_held_back(repo)
    except HarnessError as exc:
        problems.append(str(exc))
    if problems:
        raise _failed(goal, "valid", problems)


def _benchmark(goal: Goal, path: Path) -> ItemResult:
    box, _ = goal_sandbox(goal, path)
    root = project_root(path)
    subdir = root.relative_to(box.repo_root)
    with tempfile.TemporaryDirectory(prefix="harness-sealed-") as sealed:
        # the check sees the sealed files as the checkout has them now, never the rest of the checkout
        copy_sealed(SealedPaths(goal.sealed_paths), root, Path(sealed) / subdir)
        outcome = run_benchmark(box, BenchmarkSite(box.repo_root, subdir, sealed_root=Path(sealed)))
    if not outcome.ok:
        raise _failed(goal, "benchmark", [f"the sealed benchmark failed ({outcome.kind}): {outcome.detail}"])
    assert outcome.score is not None
    score, subs = outcome.score, outcome.sub_scores
    facts: dict[str, Any] = {"goal_score": score, "goal_metric": goal.metric.name}
    lines: list[str] = []
    records = records_root(path)
    phase = goal.phase(_current_phase(goal, records))
    if phase is not None:
        facts["goal_phase"] = phase.phase
        for target in phase.unmet(subs):
            got = subs.get(target.sub_score)
            lines.append(f"phase {phase.phase} ({phase.focus}): {target} not met "
                         f"({target.sub_score} = {'missing' if got is None else f'{got:g}'})")
    recorded = _recorded_baseline(goal, records)
    poisoned = plausibility.implausible(goal, recorded["score"]) if recorded is not None else None
    if poisoned:
        baseline_file = Layout(records, goal.slug).baseline_file
        lines.append(f"the recorded baseline ({baseline_file}) holds {plausibility.FLAG}, {poisoned}: an earlier "
                     "run may have recorded a fooled measurement; remove the file, and `harness improve` records "
                     "an honest one")
        recorded = None
    why = plausibility.implausible(goal, score, recorded["score"] if recorded is not None else None)
    if why:
        lines.append(f"{plausibility.FLAG}: {why}; a score outside what the goal declares plausible is never "
                     "accepted unseen: look at what the benchmark measures")
    if recorded is not None:
        tolerance = max(goal.acceptance.min_effect * recorded["spread"],
                        goal.acceptance.gate_tolerance * abs(recorded["score"]))
        worse_by = -goal.metric.better(score, recorded["score"])
        if worse_by > tolerance:
            lines.append(f"{goal.metric.name} {score:g} regressed below the recorded baseline "
                         f"{recorded['score']:g} (commit {recorded['commit'][:7]}): worse by {worse_by:.4g}, "
                         f"tolerance {tolerance:.4g}")
    result = _facts(goal, **facts)
    if lines:
        raise _failed(goal, "benchmark", lines, result)
    return result


def _current_phase(goal: Goal, root: Path) -> str | None:
    try:
        settings: dict[str, Any] = read_json(Layout(root, goal.slug).settings_file, "agent_settings")
    except (FileNotFoundError, HarnessError):
        return None
    return settings.get("current_phase")


def _recorded_baseline(goal: Goal, root: Path) -> dict[str, Any] | None:
    try:
        return read_json(Layout(root, goal.slug).baseline_file, "baseline")
    except FileNotFoundError:
        return None
    except RecordInvalid as exc:
        raise _failed(goal, "benchmark", [str(exc)]) from None
