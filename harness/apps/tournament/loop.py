"""One goal's self-improvement loop (seed 001): research, planning, critic review, execution on git
branches, a noise-aware tournament against the sealed benchmark, merge, records, stop check. Each step is a
module of its own (planning, execution, selection, recording, stopping); this one runs them in order.

``iteration_state.json`` is written at every step, so a run stopped anywhere (Ctrl-C, a kill) resumes
where it stopped: finished executors are kept, unfinished ones start again. The state also says which
run it belongs to (``run``: its first iteration, the iterations asked, finished or not), so the same
command run again finishes the run that was stopped: ``--iterations N`` counts from that run's first
iteration, not from the resumed one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.apps.tournament import execution, planning, recording, selection, stopping
from harness.apps.tournament.agents import ModelAccess
from harness.apps.tournament.benchmark import check_sealed_check, project_files
from harness.apps.tournament.cluster import ClusterUnavailable, DaskCluster, dask_problem
from harness.apps.tournament.confine import UNCONFINED_FLAG
from harness.apps.tournament.context import Context
from harness.apps.tournament.execution import held_even_tolerance
from harness.apps.tournament.failures import failure_analysis
from harness.apps.tournament.gitops import GitRepo
from harness.apps.tournament.ideas import Idea, list_ideas
from harness.apps.tournament.migrate import migrate
from harness.apps.tournament.models import AgentSettings, Plan
from harness.apps.tournament.sampling import PairedRuns
from harness.apps.tournament.settings import sync_settings
from harness.apps.tournament.state import IterationState, RunInfo
from harness.apps.tournament.store import Layout, histories
from harness.base.errors import ExitCode, HarnessConfigError, HarnessError
from harness.base.events import Events, TournamentStep
from harness.base.fileio import file_lock
from harness.llm import CallPolicy
from harness.loading.goal import Goal
from harness.loading.goal_file import find_goal_file, load_goal
from harness.sandbox import kill_active

# failure_analysis, held_even_tolerance and PairedRuns lived here before the steps had modules of their own
__all__ = ["INTERRUPT_ENV", "ImproveInterrupted", "ImproveSummary", "PairedRuns", "RunRefused", "Tournament",
           "failure_analysis", "held_even_tolerance", "improve"]

INTERRUPT_ENV = "HARNESS_IMPROVE_INTERRUPT_AFTER_EXECUTOR"


class ImproveInterrupted(HarnessError):
    """The run was stopped (Ctrl-C); the state says where, and the next run resumes there."""

    exit_code = ExitCode.TEMP_FAIL


class RunRefused(HarnessError):
    """Another run of the same goal holds the lock."""

    exit_code = ExitCode.USAGE_ERROR


@dataclass
class ImproveSummary:
    """What one ``harness improve`` run did."""

    goal: str
    iterations: list[int] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    plots: list[Path] = field(default_factory=list)


@contextlib.contextmanager
def _run_lock(layout: Layout) -> Iterator[None]:
    """One run of a goal at a time: a second one is refused at once, never left waiting."""
    with file_lock(layout.lock_file, wait=False) as held:
        if not held:
            raise RunRefused(f"another `harness improve` run for {layout.slug} is going "
                             f"({layout.rel(layout.lock_file)} is locked); wait for it to finish")
        yield


class Tournament:
    """Runs iterations of one goal; see :func:`improve`. The records go where ``layout`` says (by default
    ``WORK/improve/<slug>/`` in the repository)."""

    def __init__(self, goal: Goal, repo: GitRepo, *, echo: Callable[[str], None] = print,
                 client: Any | None = None, interrupt_after: int | None = None, approve: tuple[str, ...] = (),
                 allow_unconfined: bool = False, layout: Layout | None = None, events: Events | None = None,
                 scheduler: str | None = None):
        layout = layout or Layout(repo.root, goal.slug)
        # every model call of the run under one policy: the response cache in the work folder, prices, limits
        self.policy = CallPolicy.build(work_dir=layout.work_dir)
        self.policy.events = self.events = events if events is not None else Events()
        self.ctx = Context.make(goal, repo, layout, echo=echo, access=ModelAccess(goal, client, self.policy),
                                approve=approve, allow_unconfined=allow_unconfined, interrupt_after=interrupt_after)
        self.goal, self.repo, self.layout, self.store = goal, repo, self.ctx.layout, self.ctx.store
        self.echo = echo
        self.branch = ""
        self.run_info: RunInfo | None = None  # iteration_state.json's ``run``: this run's first iteration and N
        self.ideas: list[Idea] = []
        self.want_plots = True
        self.scheduler = scheduler  # --scheduler: a Dask scheduler's address, or local:N; None: this machine's threads

    # ======================================================================================= the run
    def run(self, iterations: int) -> ImproveSummary:
        summary = ImproveSummary(goal=self.goal.slug)
        self.branch = self.repo.require_clean_branch()
        self.ideas = list_ideas(self.goal.goal_dir)  # a broken idea file stops the run before anything
        self.ctx.box.check_held_back(self.repo)
        check_sealed_check(self.goal, project_files(self.ctx.box.project_root))
        self.layout.ensure_ignored()
        with _run_lock(self.layout):
            for line in migrate(self.layout):  # records of the earlier layout, moved into state/ once
                self.echo(line)
            stray = self.repo.remove_worktrees_under(self.layout.worktrees)
            if stray:
                self.echo(f"cleaned {len(stray)} stray worktree(s) left by an earlier run")
            settings = sync_settings(self.goal, self.layout, self.echo)
            self.echo(f"harness improve {self.goal.slug}: branch {self.branch} at {self.repo.head()[:7]}, "
                      f"{iterations} iteration(s); records in {self.layout.rel(self.layout.base)}/")
            self.echo(self._sandbox_line())
            try:
                if self.scheduler is not None:  # closed in the finally below, a local:N cluster with it
                    self.ctx.cluster = DaskCluster(self.scheduler)
                    self.echo(self.ctx.cluster.describe())
                first = self._run_start(self.store.load(), iterations)
                self.run_info = RunInfo(first_iteration=first, iterations=iterations, finished=False)
                for _ in range(iterations):  # each pass finishes one iteration of the run
                    state = self.store.load()
                    resuming = state is not None and state.status != "completed"
                    number = state.iteration if resuming and state else len(histories(self.layout)) + 1
                    if number >= first + iterations:
                        break  # the N iterations of this run are done
                    if not resuming:
                        reason = stopping.stop_reason(self.goal, self.layout)
                        if reason:
                            summary.stop_reason = reason
                            self.echo(f"stopping: {reason}")
                            break
                    status = self._iteration(number, state if resuming else None, settings)
                    summary.iterations.append(number)
                    summary.statuses.append(status)
                    reason = self.store.state.stop_reason if self.store.state else None
                    if reason:
                        summary.stop_reason = reason
                        self.echo(f"stopping: {reason}")
                        break
                self._run_finished()
            except KeyboardInterrupt:
                self.ctx.cancel.set()
                kill_active()
                st = self.store.state
                if st is not None and st.status != "completed":
                    st.status = "interrupted"
                    self.store.save()
                    raise ImproveInterrupted(
                        f"interrupted during iteration {st.iteration} ({st.current_step}); worktrees removed; "
                        "run the same command again to resume") from None
                raise ImproveInterrupted("interrupted; run the same command again to resume") from None
            except BaseException:
                if self.store.state is not None and self.store.state.status == "in_progress":
                    self.store.state.status = "failed"
                    self.store.save()
                raise
            finally:
                self.repo.remove_worktrees_under(self.layout.worktrees)
                self.policy.close()
                if isinstance(self.ctx.cluster, DaskCluster):
                    self.ctx.cluster.close()
                    self.ctx.cluster = None
        summary.plots = recording.plot(self.ctx) if self.want_plots else []
        return summary

    def _run_start(self, state: IterationState | None, iterations: int) -> int:
        """The first iteration of this run: a run that was stopped (Ctrl-C, a kill, a failure) is resumed
        and keeps its first iteration, so it ends after the N iterations asked, as if never stopped."""
        run = state.run if state is not None else None
        if run is not None and not run.finished:
            first = run.first_iteration
            self.echo(f"resuming the run that started at iteration {first}: iterations {first} to "
                      f"{first + iterations - 1}")
            return first
        if state is not None and state.status != "completed":  # a state written before runs were recorded
            return state.iteration
        return len(histories(self.layout)) + 1

    def _run_finished(self) -> None:
        """The run ended by itself (its iterations done, or a stop condition): the next one is a new run."""
        st = self.store.state
        if st is not None and st.run is not None and not st.run.finished:
            st.run.finished = True
            self.store.save()

    def _sandbox_line(self) -> str:
        box = self.ctx.box.box
        if box.available:
            return box.describe()
        if self.ctx.box.allow_unconfined:
            return (f"{box.describe()}: benchmarks and commands from models and ideas run UNCONFINED "
                    f"({UNCONFINED_FLAG})")
        return (f"{box.describe()}: benchmarks run unconfined; commands from models and ideas are refused "
                f"(pass {UNCONFINED_FLAG} to run them anyway); diffs still apply")

    # ======================================================================================= one iteration
    def _iteration(self, n: int, state: IterationState | None, settings: AgentSettings) -> str:
        assert self.run_info is not None
        if state is not None:
            self.store.state = state
            self.echo(f"iteration {n}: resuming at {state.current_step} (it was {state.status})")
            state.status = "in_progress"
            state.run = self.run_info.model_copy()
            if state.base_commit is None:
                state.base_commit = self.repo.head()  # killed before it was saved: nothing merged yet
            if state.branch is None:
                state.branch = self.branch
            self.store.save()
        else:
            self.echo(f"iteration {n}")
            # one write: a kill right after it leaves a state that resumes
            state = self.store.new(n, run=self.run_info.model_copy(), base_commit=self.repo.head(),
                                   branch=self.branch)
        self.events.emit(TournamentStep(self.goal.slug, n, "iteration_started"))
        plans = self._plan(n, state, settings)
        approved = [p for p in plans if p.critic_approved]
        if approved and state.execution.status != "completed":
            self._execute(n, state, approved)
        if state.tournament.status != "completed":
            self._tournament(n, state, plans)
        if state.recording.status != "completed":
            self._record(n, state, plans)
        self._stop_check(n, state, settings)
        assert state.tournament.outcome is not None
        self.events.emit(TournamentStep(self.goal.slug, n, "iteration_finished",
                                        {"outcome": state.tournament.outcome.status}))
        return state.tournament.outcome.status

    # each step a method of its own, so a test can stop a run at any of them
    def _plan(self, n: int, st: IterationState, settings: AgentSettings) -> list[Plan]:
        return planning.research_and_plan(self.ctx, n, st, settings, self.ideas, histories(self.layout))

    def _execute(self, n: int, st: IterationState, approved: list[Plan]) -> None:
        execution.execute(self.ctx, n, st, approved)

    def _tournament(self, n: int, st: IterationState, plans: list[Plan]) -> None:
        selection.run_tournament(self.ctx, n, st, plans)

    def _record(self, n: int, st: IterationState, plans: list[Plan]) -> None:
        recording.record(self.ctx, n, st, plans)

    def _stop_check(self, n: int, st: IterationState, settings: AgentSettings) -> None:
        stopping.stop_check(self.ctx, n, st, settings)


def improve(target: Path | str, iterations: int, *, echo: Callable[[str], None] = print, client: Any | None = None,
            plots: bool = True, approve: tuple[str, ...] = (), allow_unconfined: bool = False,
            work_dir: Path | str | None = None, scheduler: str | None = None) -> ImproveSummary:
    """Run ``iterations`` tournament iterations for the goal at ``target`` (``goals/<slug>`` or its goal.md).
    The records go to ``work_dir/improve/<slug>/``: ``work_dir`` (relative to the current folder) is the
    work folder, by default ``WORK`` in the repository root. ``scheduler`` (``tcp://HOST:PORT`` or ``local:N``)
    sends the candidates and benchmarks to Dask workers (cluster.py)."""
    if iterations < 1:
        raise HarnessConfigError("--iterations", None, f"must be at least 1, got {iterations}")
    problem = dask_problem() if scheduler is not None else None
    if problem:  # before anything else: one line saying how to install it
        raise ClusterUnavailable(problem)
    goal_file = find_goal_file(target)
    goal = load_goal(goal_file)
    repo = GitRepo.discover(goal_file.resolve().parent)
    layout = Layout(repo.root, goal.slug, _work_folder(work_dir))
    raw = os.environ.get(INTERRUPT_ENV)
    interrupt_after = int(raw) if raw and raw.isdigit() else None
    tournament = Tournament(goal, repo, echo=echo, client=client, interrupt_after=interrupt_after, approve=approve,
                            allow_unconfined=allow_unconfined, layout=layout, scheduler=scheduler)
    tournament.want_plots = plots
    return tournament.run(iterations)


def _work_folder(given: Path | str | None) -> Path | None:
    """``--work-dir``: a folder, or a path where one can be made; None keeps the default."""
    if given is None:
        return None
    work = Path(given).expanduser().resolve()
    existing = work
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        problem = "is a file" if existing == work else f"cannot be made: {existing} is a file"
        raise HarnessConfigError("--work-dir", None, f"{work} {problem}, not a folder",
                                 "give a folder for the records; it is created when missing")
    return work
