"""pytest nodes for goals: ``goals/<slug>/goal.md`` is a :class:`GoalFile` whose items are

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
from pathlib import Path
from typing import Any

import pytest

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
from harness.loading.goal import Goal
from harness.loading.goal_file import load_goal

goal_key = pytest.StashKey[Goal]()


class GoalCheckFailed(Exception):
    """A goal item failed; the lines are the readable report."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


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


class GoalFile(pytest.File):
    """One goal.md; parsing happens here, so a broken file is a one-line collection error."""

    def collect(self):  # type: ignore[no-untyped-def]
        try:
            goal = load_goal(self.path)
        except HarnessError as exc:
            raise self.CollectError(str(exc)) from None
        self.stash[goal_key] = goal
        yield GoalValidItem.from_parent(self, name="valid")
        yield GoalBenchmarkItem.from_parent(self, name="benchmark")
        if int(self.config.getoption("harness_improve", 0) or 0) > 0:
            yield GoalImproveItem.from_parent(self, name="improve")


class _GoalItem(pytest.Item):
    @property
    def goal(self) -> Goal:
        assert self.parent is not None
        return self.parent.stash[goal_key]

    def repr_failure(self, excinfo, style=None):  # type: ignore[no-untyped-def,override]
        if isinstance(excinfo.value, (GoalCheckFailed, HarnessError)):
            return f"{self.path.parent.name} {self.name}: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"goal {self.goal.slug}: {self.name}"


class GoalValidItem(_GoalItem):
    def runtest(self) -> None:
        goal = self.goal
        problems: list[str] = []
        try:
            list_ideas(goal.goal_dir)
        except HarnessError as exc:
            problems.append(str(exc))
        root = project_root(self.path)
        sealed = SealedPaths(goal.sealed_paths)
        files = project_files(root)
        for glob in goal.sealed_paths:
            if not SealedPaths([glob]).filter(files):
                problems.append(f"{self.path}: sealed_paths: {glob!r} matches no file")
        if not sealed.filter(files):
            problems.append(f"{self.path}: sealed_paths: nothing is sealed")
        for name, command in (("command", goal.benchmark.command), ("check", goal.benchmark.check)):
            argv = command_argv(command) if command else []
            if argv and argv[0] != sys.executable and shutil.which(argv[0]) is None and not (root / argv[0]).exists():
                problems.append(f"{self.path}: benchmark.{name}: {argv[0]!r} is not on PATH")
        try:
            check_sealed_check(goal, files)
        except HarnessError as exc:
            problems.append(str(exc))
        box, repo = goal_sandbox(goal, self.path)
        try:
            box.check_held_back(repo)
        except HarnessError as exc:
            problems.append(str(exc))
        if problems:
            raise GoalCheckFailed(problems)


class GoalBenchmarkItem(_GoalItem):
    def runtest(self) -> None:
        goal = self.goal
        box, _ = goal_sandbox(goal, self.path)
        root = project_root(self.path)
        subdir = root.relative_to(box.repo_root)
        with tempfile.TemporaryDirectory(prefix="harness-sealed-") as sealed:
            # the check sees the sealed files as the checkout has them now, never the rest of the checkout
            copy_sealed(SealedPaths(goal.sealed_paths), root, Path(sealed) / subdir)
            outcome = run_benchmark(box, BenchmarkSite(box.repo_root, subdir, sealed_root=Path(sealed)))
        if not outcome.ok:
            raise GoalCheckFailed([f"the sealed benchmark failed ({outcome.kind}): {outcome.detail}"])
        assert outcome.score is not None
        score, subs = outcome.score, outcome.sub_scores
        self.user_properties += [("harness_goal", goal.slug), ("harness_goal_score", score),
                                 ("harness_goal_metric", goal.metric.name)]
        lines: list[str] = []
        phase_name = self._current_phase(records_root(self.path))
        phase = goal.phase(phase_name)
        if phase is not None:
            self.user_properties.append(("harness_goal_phase", phase.phase))
            for target in phase.unmet(subs):
                got = subs.get(target.sub_score)
                lines.append(f"phase {phase.phase} ({phase.focus}): {target} not met "
                             f"({target.sub_score} = {'missing' if got is None else f'{got:g}'})")
        recorded = self._recorded_baseline(records_root(self.path))
        poisoned = plausibility.implausible(goal, recorded["score"]) if recorded is not None else None
        if poisoned:
            baseline_file = Layout(records_root(self.path), goal.slug).baseline_file
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
        if lines:
            raise GoalCheckFailed(lines)

    def _current_phase(self, root: Path) -> str | None:
        try:
            settings: dict[str, Any] = read_json(Layout(root, self.goal.slug).settings_file, "agent_settings")
        except (FileNotFoundError, HarnessError):
            return None
        return settings.get("current_phase")

    def _recorded_baseline(self, root: Path) -> dict[str, Any] | None:
        try:
            return read_json(Layout(root, self.goal.slug).baseline_file, "baseline")
        except FileNotFoundError:
            return None
        except RecordInvalid as exc:
            raise GoalCheckFailed([str(exc)]) from None


class GoalImproveItem(_GoalItem):
    def runtest(self) -> None:
        from harness.apps.tournament.loop import improve

        iterations = int(self.config.getoption("harness_improve"))
        summary = improve(self.path, iterations, echo=lambda line: print(redact(line), flush=True))
        self.user_properties += [("harness_goal", self.goal.slug),
                                 ("harness_improve_statuses", ",".join(summary.statuses))]
