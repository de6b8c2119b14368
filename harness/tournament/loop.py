"""One goal's self-improvement loop (seed 001): research, planning, critic review, execution on git
branches, a noise-aware tournament against the sealed benchmark, merge, records, stop check.

``iteration_state.json`` is written at every step, so a run stopped anywhere (Ctrl-C, a kill) resumes
where it stopped: finished executors are kept, unfinished ones start again. The state also says which
run it belongs to (``run``: its first iteration, the iterations asked, finished or not), so the same
command run again finishes the run that was stopped: ``--iterations N`` counts from that run's first
iteration, not from the resumed one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.errors import ExitCode, HarnessConfigError, HarnessError
from harness.tournament import agents, critic, stats
from harness.tournament.agents import ModelAccess, add_costs
from harness.sandbox import kill_active
from harness.tournament.benchmark import BenchmarkSite, RunOutcome, SealedManifest, SealedPaths, run_benchmark
from harness.tournament.confine import UNCONFINED_FLAG, GoalSandbox
from harness.tournament.executors import ChangeOutcome, executor_kind, make_change
from harness.tournament.gitops import GitError, GitRepo
from harness.tournament.goal import Goal, find_goal_file, load_goal
from harness.tournament.ideas import Idea, list_ideas
from harness.tournament.safety import SafetyGuard
from harness.tournament.schemas import validate, write_record
from harness.tournament.store import (
    Layout, StateStore, append_array, append_log, goal_entries, histories, now_iso, read_json, write_json_plain,
)

INTERRUPT_ENV = "HARNESS_IMPROVE_INTERRUPT_AFTER_EXECUTOR"
_FAILED_STATUSES = ("no_winner", "all_rejected")


class ImproveInterrupted(HarnessError):
    """The run was stopped (Ctrl-C); the state says where, and the next run resumes there."""

    exit_code = ExitCode.TEMP_FAIL


class RunRefused(HarnessError):
    """Another run of the same goal holds the lock."""

    exit_code = ExitCode.USAGE_ERROR


@dataclass
class PairedRuns:
    """Interleaved runs (ABAB) of the baseline and a candidate; a failed run ends them."""

    baseline: list[float] = field(default_factory=list)
    candidate: list[float] = field(default_factory=list)
    failed_side: Literal["baseline", "candidate"] | None = None
    failure: str = ""


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
    layout.lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(layout.lock_file, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunRefused(f"another `harness improve` run for {layout.slug} is going "
                               f"({layout.rel(layout.lock_file)} is locked); wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _gain(goal: Goal, value: float) -> float:
    """A score in gain units: larger is better, whatever the metric's direction."""
    return value if goal.metric.direction == "maximize" else -value


def held_even_tolerance(goal: Goal, baseline_score: float, spread: float) -> float:
    """How much worse than the baseline a candidate may measure and still count as "held even":
    the larger of min_effect x the measured spread and regression_tolerance x |baseline|."""
    acc = goal.acceptance
    return max(acc.min_effect * spread, acc.regression_tolerance * abs(baseline_score))


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"


class Tournament:
    """Runs iterations of one goal; see :func:`improve`."""

    def __init__(self, goal: Goal, repo: GitRepo, *, echo: Callable[[str], None] = print,
                 client: Any | None = None, interrupt_after: int | None = None, approve: tuple[str, ...] = (),
                 allow_unconfined: bool = False):
        self.goal = goal
        self.repo = repo
        self.approve = tuple(name.removesuffix(".md") for name in approve)
        self.layout = Layout(repo.root, goal.slug)
        self.store = StateStore(self.layout)
        self.echo = echo
        self.access = ModelAccess(goal, client)
        self.sealed = SealedPaths(goal.sealed_paths)
        self.cancel = threading.Event()
        self.interrupt_after = interrupt_after
        self.branch = ""
        self.run_info: dict[str, Any] = {}  # iteration_state.json's ``run``: this run's first iteration and N
        self.ideas: list[Idea] = []
        self.want_plots = True
        # benchmark commands run where goals/ lives (the repository root in the usual layout)
        project_root = goal.goal_dir.resolve().parent.parent
        self.subdir = project_root.relative_to(repo.root)
        self.box = GoalSandbox(goal, repo.root, repo.git_dir(), project_root, allow_unconfined=allow_unconfined)
        self._manifests: dict[tuple[int, str], SealedManifest] = {}

    # ======================================================================================= the run
    def run(self, iterations: int) -> ImproveSummary:
        summary = ImproveSummary(goal=self.goal.slug)
        self.branch = self.repo.require_clean_branch()
        self.ideas = list_ideas(self.goal.goal_dir)  # a broken idea file stops the run before anything
        self.box.check_held_back(self.repo)
        self.layout.ensure_ignored()
        with _run_lock(self.layout):
            stray = self.repo.remove_worktrees_under(self.layout.worktrees)
            if stray:
                self.echo(f"cleaned {len(stray)} stray worktree(s) left by an earlier run")
            settings = self._sync_settings()
            self.echo(f"harness improve {self.goal.slug}: branch {self.branch} at {self.repo.head()[:7]}, "
                      f"{iterations} iteration(s); records in {self.layout.rel(self.layout.base)}/")
            self.echo(self._sandbox_line())
            try:
                first = self._run_start(self.store.load(), iterations)
                self.run_info = {"first_iteration": first, "iterations": iterations, "finished": False}
                for _ in range(iterations):  # each pass finishes one iteration of the run
                    state = self.store.load()
                    resuming = state is not None and state["status"] != "completed"
                    number = state["iteration"] if resuming and state else len(histories(self.layout)) + 1
                    if number >= first + iterations:
                        break  # the N iterations of this run are done
                    if not resuming:
                        reason = self._stop_reason()
                        if reason:
                            summary.stop_reason = reason
                            self.echo(f"stopping: {reason}")
                            break
                    status = self._iteration(number, state if resuming else None, settings)
                    summary.iterations.append(number)
                    summary.statuses.append(status)
                    reason = (self.store.data or {}).get("stop_reason")
                    if reason:
                        summary.stop_reason = reason
                        self.echo(f"stopping: {reason}")
                        break
                self._run_finished()
            except KeyboardInterrupt:
                self.cancel.set()
                kill_active()
                if self.store.data is not None and self.store.data["status"] != "completed":
                    self.store.data["status"] = "interrupted"
                    self.store.save()
                    step = self.store.data["current_step"]
                    raise ImproveInterrupted(
                        f"interrupted during iteration {self.store.data['iteration']} ({step}); worktrees removed; "
                        "run the same command again to resume") from None
                raise ImproveInterrupted("interrupted; run the same command again to resume") from None
            except BaseException:
                if self.store.data is not None and self.store.data["status"] == "in_progress":
                    self.store.data["status"] = "failed"
                    self.store.save()
                raise
            finally:
                self.repo.remove_worktrees_under(self.layout.worktrees)
        summary.plots = self._plots()
        return summary

    def _run_start(self, state: dict[str, Any] | None, iterations: int) -> int:
        """The first iteration of this run: a run that was stopped (Ctrl-C, a kill, a failure) is resumed
        and keeps its first iteration, so it ends after the N iterations asked, as if never stopped."""
        run = (state or {}).get("run")
        if isinstance(run, dict) and not run.get("finished") and isinstance(run.get("first_iteration"), int):
            first = run["first_iteration"]
            self.echo(f"resuming the run that started at iteration {first}: iterations {first} to "
                      f"{first + iterations - 1}")
            return first
        if state is not None and state["status"] != "completed":  # a state written before runs were recorded
            return int(state["iteration"])
        return len(histories(self.layout)) + 1

    def _run_finished(self) -> None:
        """The run ended by itself (its iterations done, or a stop condition): the next one is a new run."""
        data = self.store.data
        if data is not None and isinstance(data.get("run"), dict) and not data["run"].get("finished"):
            data["run"]["finished"] = True
            self.store.save()

    def _sandbox_line(self) -> str:
        box = self.box.box
        if box.available:
            return box.describe()
        if self.box.allow_unconfined:
            return (f"{box.describe()}: benchmarks and commands from models and ideas run UNCONFINED "
                    f"({UNCONFINED_FLAG})")
        return (f"{box.describe()}: benchmarks run unconfined; commands from models and ideas are refused "
                f"(pass {UNCONFINED_FLAG} to run them anyway); diffs still apply")

    def _approved(self, plan_id: str) -> bool:
        """The user approved this plan (``--approve``: its plan id, or the idea file it came from)."""
        return any(plan_id == name or plan_id.endswith(f"_user_{name}") for name in self.approve)

    def _manifest(self, n: int, commit: str) -> SealedManifest:
        """The sealed files of ``commit``, written once under ``.sealed/round_N/`` for the runs to be given."""
        key = (n, commit)
        if key not in self._manifests:
            manifest = SealedManifest.take(self.repo, commit, self.sealed)
            manifest.materialize(self.layout.sealed_copy(n))
            self._manifests[key] = manifest
        return self._manifests[key]

    def _plots(self) -> list[Path]:
        """Trajectories per approach family (harness.tracking.plots, when it is installed)."""
        if not self.want_plots or not self.layout.raw_data.exists():
            return []
        try:
            from harness.tracking.plots import plot_trajectories
        except ImportError:
            self.echo("plots: skipped (harness.tracking.plots is not available)")
            return []
        out_dir = self.layout.tracking / "plots"
        try:
            written = [Path(p) for p in plot_trajectories(self.layout.raw_data, out_dir,
                                                          metrics={self.goal.slug: self.goal.metric})]
        except Exception as exc:  # noqa: BLE001 - the records are written; a plot problem must not fail the run
            self.echo(f"plots: skipped ({exc})")
            return []
        if written:
            self.echo(f"plots: {', '.join(self.layout.rel(Path(p).resolve()) for p in written)}")
        return written

    # ------------------------------------------------------------------------------- settings, stop
    def _load_settings(self) -> dict[str, Any] | None:
        try:
            return read_json(self.layout.settings_file, "agent_settings")
        except FileNotFoundError:
            return None

    def _save_settings(self, settings: dict[str, Any]) -> None:
        write_record(self.layout.settings_file, "agent_settings", settings)

    def _sync_settings(self) -> dict[str, Any]:
        settings = self._load_settings()
        active = self.goal.phase(None)
        if settings is None:
            settings = {"goal_slug": self.goal.slug, "current_phase": active.phase if active else None,
                        "number_of_planners": self.goal.agents.planners,
                        "number_of_executors": self.goal.agents.executors, "consumed_ideas": []}
            self._save_settings(settings)
            return settings
        events = []
        upcoming = len(histories(self.layout)) + 1
        for key, new in (("number_of_planners", self.goal.agents.planners),
                         ("number_of_executors", self.goal.agents.executors)):
            if settings.get(key) != new:
                events.append(self._event("config_change", upcoming, key, settings.get(key), new, "user"))
                settings[key] = new
        if settings.get("current_phase") and not any(p.phase == settings["current_phase"] for p in self.goal.phases):
            new_phase = active.phase if active else None
            events.append(self._event("config_change", upcoming, "current_phase", settings["current_phase"],
                                      new_phase, "user"))
            settings["current_phase"] = new_phase
        if events:
            append_array(self.layout.events, "event_log", events)
            for e in events:
                self.echo(f"config change from goal.md: {e['details']['field']} "
                          f"{e['details']['old_value']} -> {e['details']['new_value']}")
        self._save_settings(settings)
        return settings

    def _event(self, kind: str, iteration: int, name: str, old: Any, new: Any, source: str) -> dict[str, Any]:
        return {"timestamp": now_iso(), "event_type": kind, "iteration": iteration,
                "details": {"field": name, "old_value": old, "new_value": new, "source": source},
                "goal": self.goal.slug}

    def _stop_reason(self) -> str | None:
        history = histories(self.layout)
        stop = self.goal.stop
        if len(history) >= stop.max_iterations:
            return f"max_iterations ({stop.max_iterations}) reached"
        try:
            best = read_json(self.layout.baseline_file, "baseline")
        except FileNotFoundError:
            best = None
        if best is not None and stop.target_score is not None:
            if self.goal.metric.better(best["score"], stop.target_score) >= 0:
                return f"target_score {stop.target_score:g} reached ({self.goal.metric.name} {best['score']:g})"
        statuses = [h.get("merge_status") for h in history]
        if len(statuses) >= stop.circuit_breaker and all(
                s in _FAILED_STATUSES for s in statuses[-stop.circuit_breaker:]):
            return (f"circuit breaker: the last {stop.circuit_breaker} iterations failed "
                    f"({', '.join(statuses[-stop.circuit_breaker:])})")
        if len(statuses) >= stop.plateau_window and "merged" not in statuses[-stop.plateau_window:]:
            return f"plateau: no merge in the last {stop.plateau_window} iterations"
        return None

    # ======================================================================================= one iteration
    def _iteration(self, n: int, state: dict[str, Any] | None, settings: dict[str, Any]) -> str:
        if state is not None:
            self.store.data = state
            self.echo(f"iteration {n}: resuming at {state['current_step']} (it was {state['status']})")
            state["status"] = "in_progress"
            state["run"] = dict(self.run_info)
            state.setdefault("base_commit", self.repo.head())  # killed before it was saved: nothing merged yet
            state.setdefault("branch", self.branch)
            self.store.save()
        else:
            self.echo(f"iteration {n}")
            # one write: a kill right after it leaves a state that resumes
            state = self.store.new(n, run=dict(self.run_info), base_commit=self.repo.head(), branch=self.branch)
        history = histories(self.layout)
        plans = self._research_and_plan(n, state, settings, history)
        approved = [p for p in plans if p["critic_approved"]]
        if approved and state["execution"]["status"] != "completed":
            self._execute(n, state, approved)
        if state["tournament"]["status"] != "completed":
            self._tournament(n, state, plans)
        if state["recording"]["status"] != "completed":
            self._record(n, state, plans)
        self._stop_check(n, state, settings)
        return str(state["tournament"]["outcome"]["status"])

    # ------------------------------------------------------------------------------- research and plans
    def _research_and_plan(self, n: int, st: dict[str, Any], settings: dict[str, Any],
                           history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        brief = None
        if st["research"]["status"] != "completed":
            self.store.step("research")
            st["research"]["status"] = "in_progress"
            self.store.save()
            if not self.access.available:
                st["research"].update(status="completed", completed_at=now_iso(), skipped=self.access.skip_reason)
                self.echo(f"  research brief: skipped ({self.access.skip_reason})")
            else:
                try:
                    brief = agents.research(self.access, self.goal, self.repo.root, n, history)
                    write_record(self.layout.research(n), "research_brief", brief)
                    st["research"].update(status="completed", completed_at=now_iso(),
                                          output_path=self.layout.rel(self.layout.research(n)), cost=brief["cost"])
                    self.echo(f"  research brief: {len(brief['ideas'])} idea(s), ${brief['cost']['cost_usd']:.4f}")
                except HarnessError as exc:
                    st["research"].update(status="failed", error=str(exc))
                    self.echo(f"  research brief: failed ({exc}); planners go on without it")
            self.store.save()
        elif st["research"].get("output_path"):
            brief = read_json(self.repo.root / st["research"]["output_path"], "research_brief")

        if st["planning"]["status"] != "completed":
            self.store.step("planning")
            st["planning"]["status"] = "in_progress"
            self.store.save()
            plans = self._make_plans(n, st, settings, brief, history)
            for plan in plans:
                write_record(self.layout.plan(n, plan["plan_id"]), "plan", plan)
                st["planning"]["plans"][plan["planner_id"]] = {
                    "status": "completed", "output_path": self.layout.rel(self.layout.plan(n, plan["plan_id"])),
                    "critic_approved": None, "plan_id": plan["plan_id"]}
            st["planning"].update(status="completed", completed_at=now_iso())
            self.store.save()
        plans = self._load_plans(st)

        if st.get("critic", {}).get("status") != "completed":
            self.store.step("critic_review")
            critic.review_round(plans, self.goal, history, critic.prior_attempts(history))
            for plan in plans:
                review = plan["critic_review"]
                verdict = "approved" if plan["critic_approved"] else f"rejected ({review['rejection_reason']})"
                if review.get("measurement_flags"):
                    verdict += (f"; reaches into the measurement ({review['measurement_flags'][0]}), so it is not "
                                "merged without your approval")
                self.echo(f"  critic: {plan['plan_id']} [{plan['approach_family']}] {verdict}")
            self._architect(plans)
            for plan in plans:
                write_record(self.layout.plan(n, plan["plan_id"]), "plan_archive", plan)
                st["planning"]["plans"][plan["planner_id"]]["critic_approved"] = plan["critic_approved"]
            st["planning"]["approved_count"] = sum(1 for p in plans if p["critic_approved"])
            st["critic"] = {"status": "completed", "completed_at": now_iso()}
            self.store.save()
        return plans

    def _make_plans(self, n: int, st: dict[str, Any], settings: dict[str, Any], brief: dict[str, Any] | None,
                    history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # ideas taken by this round before an interruption are taken again, by this round
        earlier = [c for c in settings.get("consumed_ideas", []) if c["round"] != n]
        consumed = {c["idea"] for c in earlier}
        fresh = [i for i in self.ideas if i.path.name not in consumed][: self.goal.agents.executors]
        plans = [idea.to_plan(n, self.goal.metric.name) for idea in fresh]
        settings["consumed_ideas"] = earlier + [{"idea": idea.path.name, "round": n, "plan_id": plan["plan_id"]}
                                                for idea, plan in zip(fresh, plans)]
        st["user_ideas_consumed"] = [i.path.name for i in fresh]
        if fresh:
            self.echo(f"  user ideas: {', '.join(i.path.name for i in fresh)}")
        planners = self.goal.agents.planners
        if planners and not self.access.available:
            self.echo(f"  model planners: skipped ({self.access.skip_reason})")
        elif planners:
            taken = [p["approach_family"] for p in plans]
            ids = [f"planner_{chr(ord('a') + i)}" for i in range(planners)]
            jobs = {pid: (lambda pid=pid: agents.plan(self.access, self.goal, self.repo.root, n, pid, brief, history,
                                                      taken)) for pid in ids}
            for pid, (plan, error) in agents.run_parallel(jobs, planners).items():
                if error is not None:
                    st["planning"]["plans"][pid] = {"status": "failed", "output_path": None, "critic_approved": None,
                                                    "error": str(error)}
                    self.echo(f"  {pid}: failed ({error})")
                    continue
                plans.append(plan)
                self.echo(f"  {pid}: plan [{plan['approach_family']}], ${plan['cost']['cost_usd']:.4f}")
        self._save_settings(settings)
        return plans

    def _load_plans(self, st: dict[str, Any]) -> list[dict[str, Any]]:
        plans = []
        for entry in st["planning"]["plans"].values():
            if entry.get("output_path"):
                plans.append(read_json(self.repo.root / entry["output_path"], "plan"))
        return plans

    def _architect(self, plans: list[dict[str, Any]]) -> None:
        approved = [p for p in plans if p["critic_approved"]]
        if not approved or not self.goal.agents.architect_review:
            return
        if not self.access.available:
            self.echo(f"  architect review: skipped ({self.access.skip_reason})")
            return
        jobs = {p["plan_id"]: (lambda p=p: agents.architect_review(self.access, self.goal, p)) for p in approved}
        results = agents.run_parallel(jobs, len(jobs))
        for plan in approved:
            value, error = results[plan["plan_id"]]
            if error is not None:
                self.echo(f"  architect review of {plan['plan_id']}: failed ({error}); the critic's verdict stands")
                continue
            review, cost = value
            plan["architect_review"] = review
            plan["cost"] = add_costs(plan.get("cost"), cost)
            if review["verdict"] == "reject":
                plan["critic_approved"] = False
                self.echo(f"  architect: {plan['plan_id']} rejected ({review['feedback']})")
            else:
                self.echo(f"  architect: {plan['plan_id']} approved")

    # ------------------------------------------------------------------------------- execution
    def _execute(self, n: int, st: dict[str, Any], approved: list[dict[str, Any]]) -> None:
        self.store.step("execution")
        ex = st["execution"]
        ex["status"] = "in_progress"
        base = st["base_commit"]
        manifest = self._manifest(n, base)
        write_json_plain(self.layout.sealed(n), manifest.to_json())
        if "baseline" not in ex:
            ex["baseline"] = self._measure_baseline(n, base, manifest)
            self.store.save()
        b = ex["baseline"]
        self.echo(f"  baseline: {self.goal.metric.name} {_fmt(b['score'])} (median of {len(b['samples'])} runs, "
                  f"spread {_fmt(b['spread'])})")
        chosen = approved[: self.goal.agents.executors]
        for index, plan in enumerate(chosen, 1):
            eid = f"executor_{index}"
            ex["executors"].setdefault(eid, {"status": "pending", "plan_id": plan["plan_id"], "output_path": None,
                                             "benchmark_score": None})
        for plan in approved[self.goal.agents.executors:]:
            self.echo(f"  {plan['plan_id']}: approved but not executed (only {self.goal.agents.executors} executors)")
        self.store.save()
        by_id = {p["plan_id"]: p for p in chosen}
        todo = []
        for eid, entry in ex["executors"].items():
            if entry["status"] == "completed" and entry.get("output_path"):
                result = read_json(self.repo.root / entry["output_path"], "benchmark_result")
                self.echo(f"  {eid} {entry['plan_id']}: finished earlier, kept ({self._describe(result)})")
            else:
                todo.append(eid)
        if todo:
            before = self.repo.changes()
            self._run_executors(n, st, todo, by_id, manifest)
            stray = sorted(self.repo.changes() - before)
            if stray:  # only possible without the sandbox: say so rather than merge on top of it
                self.echo(f"  warning: your checkout changed while candidates ran ({', '.join(stray[:5])}"
                          f"{' ...' if len(stray) > 5 else ''}); a candidate or command wrote outside its worktree")
        ex.update(status="completed", completed_at=now_iso())
        self.store.save()

    def _measure_baseline(self, n: int, base: str, manifest: SealedManifest) -> dict[str, Any]:
        wt = self.layout.worktrees / f"round_{n}_baseline"
        self.repo.add_worktree(wt, base)
        try:
            samples, subs, _ = self._sample(n, wt, manifest, self.goal.acceptance.noise_runs,
                                            self.layout.log(n, "baseline"))
        finally:
            self.repo.remove_worktree(wt)
        if isinstance(samples, RunOutcome):
            raise HarnessError(f"the sealed benchmark fails on the baseline commit {base[:7]}: {samples.detail} "
                               "(fix the program or the benchmark before improving it)")
        gains = [_gain(self.goal, s) for s in samples]
        return {"commit": base, "samples": samples, "score": stats.median(samples), "spread": stats.spread(gains),
                "sub_scores": subs}

    def _sample(self, n: int, wt: Path, manifest: SealedManifest, runs: int, log: Path, *, held_back: bool = False
                ) -> tuple[list[float] | RunOutcome, dict[str, float], str]:
        """``runs`` benchmark runs in ``wt``, each given the manifest's sealed files (laid read-only over the
        worktree's, and restored in it before the run); a failed run is returned as is."""
        samples: list[float] = []
        subs: dict[str, float] = {}
        raw = ""
        site = BenchmarkSite(wt, self.subdir, manifest.overlays(self.layout.sealed_copy(n), wt), held_back)
        for _ in range(runs):
            manifest.restore(wt, self.repo)
            outcome = run_benchmark(self.box, site, cancel=self.cancel)
            append_log(log, f"[{outcome.kind}] exit {outcome.exit_code} in {outcome.seconds:.2f}s, "
                            f"CPU {outcome.cpu_ms:.1f} ms {outcome.detail}\n"
                            f"{outcome.stdout}{outcome.stderr}"
                            + (f"[result channel] {outcome.result}" if outcome.result else ""))
            changed = manifest.verify(wt, self.repo)
            if changed:
                return RunOutcome("sealed", detail=f"sealed file(s) changed while the benchmark ran: "
                                                   f"{', '.join(changed)}", stdout=outcome.stdout,
                                  result=outcome.result), {}, outcome.raw
            if not outcome.ok:
                return outcome, {}, outcome.raw
            assert outcome.score is not None
            samples.append(outcome.score)
            subs, raw = outcome.sub_scores, outcome.raw
        return samples, subs, raw

    def _run_executors(self, n: int, st: dict[str, Any], todo: list[str], by_id: dict[str, dict[str, Any]],
                       manifest: SealedManifest) -> None:
        ex = st["execution"]
        pool = ThreadPoolExecutor(max_workers=max(1, len(todo)), thread_name_prefix="harness-executor")
        futures: dict[Future[dict[str, Any]], str] = {}
        try:
            for eid in todo:
                entry = ex["executors"][eid]
                entry.update(status="running", started_at=now_iso(), output_path=None, benchmark_score=None)
                futures[pool.submit(self._executor, n, eid, by_id[entry["plan_id"]], st["base_commit"], manifest,
                                    ex["baseline"])] = eid
            self.store.save()
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: futures[f]):
                    eid = futures[future]
                    result = future.result()
                    path = self.layout.result(n, eid)
                    write_record(path, "benchmark_result", result)
                    ex["executors"][eid].update(status="completed", output_path=self.layout.rel(path),
                                                benchmark_score=result["benchmark_score"], completed_at=now_iso(),
                                                cost=result["cost"])
                    self.store.save()
                    self.echo(f"  {eid} {result['plan_id']}: {self._describe(result)}")
                    if self.interrupt_after is not None and eid == f"executor_{self.interrupt_after}":
                        raise KeyboardInterrupt  # the deterministic kill of the resume tests
        except BaseException:
            self.cancel.set()
            kill_active()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

    def _describe(self, result: dict[str, Any]) -> str:
        text = result["status"]
        if result["benchmark_score"] is not None:
            text += f" {self.goal.metric.name} {_fmt(result['benchmark_score'])}"
        fa = result.get("failure_analysis")
        if fa and result["status"] != "regression":
            text += f" [{fa['category']}] {fa['what']}"
        if result.get("regression_check") and result["status"] == "success":
            text += f" ({result['regression_check']['reason']})"
        return text

    def _executor(self, n: int, eid: str, plan: dict[str, Any], base: str, manifest: SealedManifest,
                  baseline: dict[str, Any]) -> dict[str, Any]:
        """One executor, in its own worktree on ``experiment/round_N_executor_K`` (runs in a thread)."""
        branch = f"experiment/round_{n}_{eid}"
        wt = self.layout.worktrees / f"round_{n}_{eid}"
        log = self.layout.log(n, eid)
        log.unlink(missing_ok=True)
        kind = executor_kind(plan, self.goal)
        result: dict[str, Any] = {"executor_id": eid, "plan_id": plan["plan_id"], "benchmark_score": None,
                                  "benchmark_raw": "", "status": "error", "sub_scores": {}, "failure_analysis": None,
                                  "timestamp": now_iso(), "branch": branch, "commit": None, "samples": [],
                                  "executor_kind": kind}
        approved = self._approved(plan["plan_id"])
        try:
            self.repo.add_worktree(wt, base, branch)
            preflight = SafetyGuard(wt).check_plan(
                plan, executor_command=self.goal.agents.executor_command if kind == "command" else None)
            result["safety_guard"] = preflight.to_record()
            if not preflight.safe and not approved:
                return self._failed(result, plan, "infrastructure",
                                    f"SafetyGuard stopped the plan before it ran: {preflight.reason()}; if it is "
                                    f"safe, have it taken again and approve it (--approve {plan['plan_id']}, or "
                                    f"the idea file's name)")
            change = make_change(kind, repo=self.repo, goal=self.goal, plan=plan, worktree=wt, log=log,
                                 access=self.access, cancel=self.cancel, box=self.box,
                                 plan_file=self.repo.root / self.layout.plan(n, plan["plan_id"]))
            if self.cancel.is_set():
                raise KeyboardInterrupt
            result["cost"] = change.cost
            if change.blocked_commands:
                result["blocked_commands"] = change.blocked_commands
            if change.ok:
                commit = self.repo.commit_all(wt, f"harness: round {n} {eid}: {plan.get('title') or plan['plan_id']}"
                                                  f"\n\n{plan['hypothesis']}\n\nplan: {plan['plan_id']}")
                if commit is None:
                    change = ChangeOutcome(kind, False, "the executor left the code unchanged", "scope_error",
                                           change.cost)
                else:
                    result["commit"] = commit
            if not change.ok:
                return self._failed(result, plan, change.category or "infrastructure", change.detail)
            violated = self.sealed.filter(self.repo.changed_files(base, result["commit"]))
            if violated:
                return self._failed(result, plan, "sealed_file_violation",
                                    f"the candidate changed sealed path(s) {', '.join(violated)}")
            flags = critic.measurement_flags(self.repo.diff(base, result["commit"]))
            if flags:
                result["measurement"] = {"flags": flags, "approved": approved}
            samples, subs, raw = self._sample(n, wt, manifest, self.goal.acceptance.candidate_runs, log)
            if isinstance(samples, RunOutcome):
                result["benchmark_raw"] = samples.raw
                return self._failed(result, plan, _RUN_CATEGORY.get(samples.kind, "logic_error"), samples.detail)
            score = stats.median(samples)
            result.update(benchmark_score=score, benchmark_raw=raw, sub_scores=subs, samples=samples)
            if flags and not approved:
                return self._failed(result, plan, "measurement",
                                    f"the change reaches into the measurement ({'; '.join(flags[:3])}"
                                    f"{'; ...' if len(flags) > 3 else ''}); measured {self.goal.metric.name} "
                                    f"{_fmt(score)}, not merged without your approval: review branch "
                                    f"{branch.replace('experiment/', 'archive/', 1)} and merge it yourself, or "
                                    f"approve such a plan when it runs (--approve {plan['plan_id']})")
            allowed = held_even_tolerance(self.goal, baseline["score"], baseline["spread"])
            if -self.goal.metric.better(score, baseline["score"]) > allowed:
                check = self._check_regression(n, eid, wt, base, manifest, log, allowed)
                result["regression_check"] = check
                if check["failed_side"]:
                    category = "logic_error" if check["failed_side"] == "candidate" else "infrastructure"
                    return self._failed(result, plan, category, check["reason"])
                if check["regression"]:
                    return self._failed(result, plan, "regression", check["reason"], status="regression")
            result["status"] = "success"
            return result
        except GitError as exc:
            return self._failed(result, plan, "infrastructure", str(exc))
        finally:
            if not self.cancel.is_set():
                self.repo.remove_worktree(wt)

    def _check_regression(self, n: int, eid: str, wt: Path, base: str, manifest: SealedManifest, log: Path,
                          allowed: float) -> dict[str, Any]:
        """A candidate whose first runs measured worse than the noise allows is measured again in
        interleaved pairs with the baseline commit: timings drift over seconds, so runs taken minutes apart
        cannot show a regression. It is one only when the pairs show it, by the median and the goal's test."""
        acc = self.goal.acceptance
        wt_base = self.layout.worktrees / f"round_{n}_{eid}_baseline"
        self.repo.add_worktree(wt_base, base)
        try:
            runs = self._pairs(n, wt_base, wt, acc.confirm_pairs, manifest, log)
        finally:
            if not self.cancel.is_set():  # on Ctrl-C the interrupt handler removes every worktree
                self.repo.remove_worktree(wt_base)
        a, b = runs.baseline, runs.candidate
        check: dict[str, Any] = {"pairs": acc.confirm_pairs, "baseline_samples": a, "candidate_samples": b,
                                 "allowed": allowed, "failed_side": runs.failed_side}
        if runs.failed_side:
            return {**check, "regression": False,
                    "reason": f"the benchmark failed on the {runs.failed_side} when re-run in pairs: {runs.failure}"}
        loss = -self.goal.metric.better(stats.median(b), stats.median(a))
        measured = (f"{self.goal.metric.name} {_fmt(stats.median(b))} vs baseline {_fmt(stats.median(a))} over "
                    f"{len(b)} interleaved pairs: worse by {_fmt(loss)}")
        if loss <= allowed:
            return {**check, "loss": loss, "regression": False,
                    "reason": f"{measured}, within what the noise allows ({_fmt(allowed)}): held even"}
        measured += f", more than the noise allows ({_fmt(allowed)})"
        if not stats.exact_test_can_reach(len(a), len(b), acc.alpha):
            return {**check, "loss": loss, "regression": True,
                    "reason": f"{measured}; {len(b)} pairs cannot reach alpha {acc.alpha:g}, so the loss alone decides"}
        worse = stats.significance([_gain(self.goal, x) for x in a], [_gain(self.goal, x) for x in b],
                                   test=acc.significance, alpha=acc.alpha, difference="loss")
        return {**check, "loss": loss, "regression": worse.significant,
                "reason": f"{measured}; {worse.text}" + ("" if worse.significant else ": not significant, held even")}

    def _pairs(self, n: int, wt_a: Path, wt_b: Path, pairs: int, manifest: SealedManifest, log: Path, *,
               held_back: bool = False) -> PairedRuns:
        """``pairs`` interleaved runs (ABAB) of the baseline worktree ``wt_a`` and a candidate's ``wt_b``."""
        runs = PairedRuns()
        order: tuple[tuple[Path, Literal["baseline", "candidate"]], ...] = ((wt_a, "baseline"), (wt_b, "candidate"))
        for _ in range(pairs):
            for wt, side in order:
                got, _, _ = self._sample(n, wt, manifest, 1, log, held_back=held_back)
                if isinstance(got, RunOutcome):
                    runs.failed_side, runs.failure = side, got.detail
                    return runs
                (runs.baseline if side == "baseline" else runs.candidate).extend(got)
        return runs

    def _failed(self, result: dict[str, Any], plan: dict[str, Any], category: str, detail: str,
                status: str | None = None) -> dict[str, Any]:
        result["status"] = status or ("timeout" if category == "timeout" else "error")
        result["failure_analysis"] = failure_analysis(category, detail, plan, self.goal)
        result.setdefault("cost", dict(agents.ZERO_COST))
        return result

    # ------------------------------------------------------------------------------- tournament
    def _tournament(self, n: int, st: dict[str, Any], plans: list[dict[str, Any]]) -> None:
        self.store.step("tournament")
        t = st["tournament"]
        t["status"] = "in_progress"
        self.store.save()
        results = self._results(st)
        approved = [p for p in plans if p["critic_approved"]]
        winner_result = None
        if not approved:
            outcome = {"status": "all_rejected", "reason": f"the critic rejected all {len(plans)} plan(s)"
                       + (": " + "; ".join(f"{p['plan_id']}: {p['critic_review']['rejection_reason']}" for p in plans)
                          if plans else " (no plans: no ideas left and no model planners)"),
                       "winner": None, "decision": None}
            if not plans:
                outcome["reason"] = "no plans this round: no user ideas left and the model planners " + (
                    f"were skipped ({self.access.skip_reason})" if not self.access.available else "produced none")
        else:
            candidates = [r for r in results if r["status"] == "success"]
            if not candidates:
                outcome = {"status": "no_winner", "winner": None, "decision": None,
                           "reason": "no candidate succeeded: " + "; ".join(
                               f"{r['executor_id']} {r['status']}"
                               + (f" ({r['failure_analysis']['category']})" if r.get("failure_analysis") else "")
                               for r in results)}
            else:
                best = max(candidates, key=lambda r: _gain(self.goal, r["benchmark_score"]))
                winner_result = best
                t.update(winner=best["executor_id"], winner_score=best["benchmark_score"])
                self.store.save()
                outcome = self._confirm_and_merge(n, st, best)
        t["outcome"] = outcome
        t.update(status="completed", completed_at=now_iso())
        if winner_result is None:
            t.update(winner=None, winner_score=None)
        self.store.save()

    def _results(self, st: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for eid in sorted(st["execution"]["executors"], key=lambda e: int(e.split("_")[-1])):
            entry = st["execution"]["executors"][eid]
            if entry.get("output_path"):
                out.append(read_json(self.repo.root / entry["output_path"], "benchmark_result"))
        return out

    def _confirm_and_merge(self, n: int, st: dict[str, Any], best: dict[str, Any]) -> dict[str, Any]:
        t = st["tournament"]
        acc = self.goal.acceptance
        base = st["base_commit"]
        baseline = st["execution"]["baseline"]
        manifest = self._manifest(n, base)
        eid = best["executor_id"]
        winner = {"executor_id": eid, "branch": best["branch"], "hypothesis": "", "plan_id": best["plan_id"],
                  "score_before": baseline["score"], "score_after": best["benchmark_score"],
                  "sub_scores": best["sub_scores"], "commit": best["commit"]}
        plan = read_json(self.layout.plan(n, best["plan_id"]), "plan")
        winner["hypothesis"] = plan["hypothesis"]

        if "decision" not in t:
            wt_a = self.layout.worktrees / f"round_{n}_confirm_baseline"
            wt_b = self.layout.worktrees / f"round_{n}_confirm_{eid}"
            self.repo.add_worktree(wt_a, base)
            self.repo.add_worktree(wt_b, best["commit"])
            try:
                # the goal's held-back inputs are shown to these runs only: a candidate tuned to the inputs
                # it could see fails here
                runs = self._pairs(n, wt_a, wt_b, acc.confirm_pairs, manifest, self.layout.log(n, "confirm"),
                                   held_back=True)
            finally:
                self.repo.remove_worktree(wt_a)
                self.repo.remove_worktree(wt_b)
            a, b = runs.baseline, runs.candidate
            if runs.failed_side == "baseline":
                raise HarnessError(f"the sealed benchmark failed on the baseline while confirming: {runs.failure}")
            if runs.failed_side:
                t["decision"] = {"accepted": False, "decided_by": "re-run", "category": "logic_error",
                                 "reason": f"the winner's benchmark failed when re-run: {runs.failure}"}
            else:
                # the measured spread: every run of the baseline commit, the noise runs and the fresh ones
                pooled = stats.spread([_gain(self.goal, x) for x in baseline["samples"] + a])
                d = stats.decide([_gain(self.goal, x) for x in a], [_gain(self.goal, x) for x in b],
                                 noise_spread=pooled, min_effect_multiple=acc.min_effect,
                                 test=acc.significance, alpha=acc.alpha, unit="")
                t["decision"] = {**d.to_json(), "reason": d.reason, "baseline_samples": a, "candidate_samples": b,
                                 "pairs": acc.confirm_pairs}
                # report medians in the metric's own units
                t["decision"]["baseline_median"] = stats.median(a)
                t["decision"]["candidate_median"] = stats.median(b)
            self.store.save()
        decision = t["decision"]
        self.echo(f"  tournament: {eid} vs baseline over {acc.confirm_pairs} interleaved pairs (ABAB): "
                  f"{decision['reason']}")
        if not decision["accepted"]:
            return {"status": "no_improvement", "winner": winner, "decision": decision,
                    "reason": f"{eid} was not merged: {decision['reason']}"}
        winner["score_before"] = decision["baseline_median"]
        winner["score_after"] = decision["candidate_median"]
        return self._merge(n, st, winner, decision, manifest)

    def _merge(self, n: int, st: dict[str, Any], winner: dict[str, Any], decision: dict[str, Any],
               manifest: SealedManifest) -> dict[str, Any]:
        t = st["tournament"]
        head = self.repo.head()
        if "merge_commit" not in t:
            parents = self.repo.parents(head)
            if len(parents) == 2 and parents[1] == winner["commit"]:
                t["merge_commit"] = head  # merged just before an interruption
            else:
                if self.repo.current_branch() != st["branch"]:
                    raise GitError(f"the branch changed from {st['branch']} to {self.repo.current_branch()} during "
                                   "the run; switch back and run again to resume")
                if self.repo.dirty_files():
                    raise GitError("the working tree got uncommitted changes during the run; commit or stash them "
                                   "and run again to resume")
                plan_title = winner.get("plan_id")
                message = (f"harness: merge {winner['branch']} ({plan_title})\n\n{winner['hypothesis']}\n\n"
                           f"{self.goal.metric.name}: {_fmt(winner['score_before'])} -> {_fmt(winner['score_after'])}; "
                           f"{decision['reason']}")
                t["merge_commit"] = self.repo.merge_no_ff(winner["branch"], message)
            self.store.save()
            self.echo(f"  merged {winner['branch']} into {st['branch']} (--no-ff) at {t['merge_commit'][:7]}")
        merge_commit = t["merge_commit"]
        if "post_merge" not in t:
            wt = self.layout.worktrees / f"round_{n}_post_merge"
            self.repo.add_worktree(wt, merge_commit)
            try:
                got, subs, _ = self._sample(n, wt, manifest, self.goal.acceptance.post_merge_runs,
                                            self.layout.log(n, "post_merge"), held_back=True)
            finally:
                self.repo.remove_worktree(wt)
            if isinstance(got, RunOutcome):
                t["post_merge"] = {"score": None, "sub_scores": {}, "failed": got.detail}
            else:
                t["post_merge"] = {"score": stats.median(got), "sub_scores": subs, "samples": got}
            self.store.save()
        post = t["post_merge"]
        before = winner["score_before"]
        regressed = post["score"] is None or self.goal.metric.better(post["score"], before) <= 0
        outcome = {"winner": winner, "decision": decision, "re_benchmark_score": post["score"],
                   "merge_commit": merge_commit}
        if regressed:
            if "revert_commit" not in t:
                t["revert_commit"] = self.repo.revert_merge(
                    merge_commit, f"harness: revert {winner['branch']}: the re-benchmark after the merge regressed")
                self.store.save()
            why = post.get("failed") or (f"{self.goal.metric.name} {_fmt(post['score'])} is not better than "
                                         f"{_fmt(before)}")
            self.echo(f"  re-benchmark after merge: {why}; merge reverted at {t['revert_commit'][:7]}")
            return {**outcome, "status": "no_improvement", "regressions_detected": True,
                    "reason": f"the re-benchmark after the merge regressed ({why}); the merge was reverted "
                              f"({t['revert_commit'][:7]})"}
        winner["sub_scores"] = post["sub_scores"] or winner["sub_scores"]
        self.echo(f"  re-benchmark after merge: {self.goal.metric.name} {_fmt(post['score'])} confirms the gain "
                  f"(was {_fmt(before)})")
        return {**outcome, "status": "merged", "regressions_detected": False, "reason": None}

    # ------------------------------------------------------------------------------- recording
    def _record(self, n: int, st: dict[str, Any], plans: list[dict[str, Any]]) -> None:
        self.store.step("recording")
        rec = st["recording"]
        rec["status"] = "in_progress"
        self.store.save()
        outcome = st["tournament"]["outcome"]
        merged = outcome["status"] == "merged"
        winner_eid = outcome["winner"]["executor_id"] if merged else None
        results = self._results(st)
        by_plan = {p["plan_id"]: p for p in plans}

        archived = rec.setdefault("archived", [])
        done = {a["executor_id"] for a in archived}
        for r in results:
            if r["executor_id"] in done or not self.repo.branch_exists(r["branch"]):
                continue
            if r["executor_id"] == winner_eid or not r.get("commit"):
                self.repo.delete_branch(r["branch"])
                archived.append({"executor_id": r["executor_id"], "archive": None})
            else:
                name = self.repo.rename_branch(r["branch"], r["branch"].replace("experiment/", "archive/", 1))
                archived.append({"executor_id": r["executor_id"], "archive": name})
            self.store.save()
        archive_names = [a["archive"] for a in archived if a["archive"]]
        if archive_names:
            self.echo(f"  archived: {', '.join(archive_names)}")

        report_path = self.layout.merge_report(n)
        winner = outcome.get("winner")
        report = {
            "iteration": n, "goal_slug": self.goal.slug,
            "winner": None if winner is None else {k: winner[k] for k in (
                "executor_id", "branch", "hypothesis", "score_before", "score_after", "sub_scores")} | {
                "plan_id": winner["plan_id"], "commit": winner["commit"]},
            "archived": archive_names,
            "regressions_detected": bool(outcome.get("regressions_detected", False)),
            "re_benchmark_score": outcome.get("re_benchmark_score"),
            "status": outcome["status"],
            "reason": outcome["reason"],
            "acceptance": _acceptance(outcome.get("decision")),
            "merge_commit": outcome.get("merge_commit"),
        }
        write_record(report_path, "merge_report", report)
        rec["merge_report_path"] = self.layout.rel(report_path)

        history = self._history_record(n, st, plans, results, outcome, by_plan)
        write_record(self.layout.history(n), "iteration_history", history)
        rec["history_path"] = self.layout.rel(self.layout.history(n))
        self.store.save()

        if not rec["visualization_updated"]:
            entries = []
            if not goal_entries(self.layout.raw_data, self.goal.slug) and st["execution"].get("baseline"):
                b = st["execution"]["baseline"]
                entries.append({"iteration": 0, "plan_id": "baseline", "benchmark_score": b["score"],
                                "is_winner": False, "approach_family": "baseline", "sub_scores": b["sub_scores"],
                                "goal": self.goal.slug})
            for r in results:
                plan = by_plan[r["plan_id"]]
                entries.append({"iteration": n, "plan_id": r["plan_id"], "benchmark_score": r["benchmark_score"],
                                "is_winner": r["executor_id"] == winner_eid, "approach_family": plan["approach_family"],
                                "sub_scores": r["sub_scores"], "goal": self.goal.slug, "status": r["status"]})
            already = {(e.get("iteration"), e.get("plan_id")) for e in goal_entries(self.layout.raw_data, self.goal.slug)}
            entries = [e for e in entries if (e["iteration"], e["plan_id"]) not in already]
            if entries:
                append_array(self.layout.raw_data, "raw_data", entries)
            rec["visualization_updated"] = True
            self.store.save()

        self._write_baseline(n, st, outcome)
        self.repo.remove_worktrees_under(self.layout.worktrees)
        rec.update(cleanup_done=True, status="completed", completed_at=now_iso())
        self.store.save()
        cost = history["cost"]["total"]
        self.echo(f"  cost: {cost['input_tokens'] + cost['output_tokens']} tokens, ${cost['cost_usd']:.4f}")
        self.echo(f"  merge report: {outcome['status']}" + (f" ({outcome['reason']})" if outcome["reason"] else ""))

    def _history_record(self, n: int, st: dict[str, Any], plans: list[dict[str, Any]], results: list[dict[str, Any]],
                        outcome: dict[str, Any], by_plan: dict[str, dict[str, Any]]) -> dict[str, Any]:
        merged_eid = outcome["winner"]["executor_id"] if outcome["status"] == "merged" else None

        def entry(r: dict[str, Any]) -> dict[str, Any]:
            plan = by_plan[r["plan_id"]]
            return {"plan_id": r["plan_id"], "score": r["benchmark_score"], "approach_family": plan["approach_family"],
                    "hypothesis": plan["hypothesis"], "sub_scores": r["sub_scores"], "executor_id": r["executor_id"],
                    "status": r["status"], "diff_sha256": critic.diff_digest(plan.get("diff"))}

        winner = None
        losers = []
        for r in results:
            e = entry(r)
            if r["executor_id"] == merged_eid:
                winner = e
                continue
            fa = r.get("failure_analysis")
            if fa is None:  # a success that was not merged: the tournament's decision is its analysis
                if outcome.get("winner") and outcome["winner"]["executor_id"] == r["executor_id"]:
                    category = (outcome.get("decision") or {}).get("category", "regression")
                    fa = failure_analysis(category, outcome["reason"], by_plan[r["plan_id"]], self.goal,
                                          not_merged=True)
                else:
                    fa = failure_analysis("regression", f"{self.goal.metric.name} {_fmt(r['benchmark_score'])} lost "
                                          f"the tournament to {outcome['winner']['executor_id']}"
                                          if outcome.get("winner") else "not merged", by_plan[r["plan_id"]],
                                          self.goal, not_merged=True)
            e["failure_analysis"] = fa
            losers.append(e)
        rejected = [{"plan_id": p["plan_id"], "approach_family": p["approach_family"], "hypothesis": p["hypothesis"],
                     "reason": p["critic_review"]["rejection_reason"]
                     or f"architect: {p.get('architect_review', {}).get('feedback', '')}"}
                    for p in plans if not p["critic_approved"]]
        research_cost = st["research"].get("cost")
        plan_costs = {p["plan_id"]: p.get("cost") or dict(agents.ZERO_COST) for p in plans}
        exec_costs = {r["executor_id"]: r.get("cost") or dict(agents.ZERO_COST) for r in results}
        baseline = st["execution"].get("baseline") or {}
        return {
            "iteration": n,
            "baseline_score": baseline.get("score"),
            "winner": winner,
            "losers": losers,
            "research_brief_id": f"round_{n}" if st["research"].get("output_path") else None,
            "goal_slug": self.goal.slug,
            "merge_status": outcome["status"],
            "rejected_plans": rejected,
            "user_ideas_consumed": st["user_ideas_consumed"],
            "cost": {"research": add_costs(research_cost), "plans": plan_costs, "executors": exec_costs,
                     "total": add_costs(research_cost, *plan_costs.values(), *exec_costs.values())},
        }

    def _write_baseline(self, n: int, st: dict[str, Any], outcome: dict[str, Any]) -> None:
        measured = st["execution"].get("baseline")
        if outcome["status"] == "merged":
            post = st["tournament"]["post_merge"]
            record = {"commit": st["tournament"]["merge_commit"], "score": post["score"],
                      "sub_scores": post["sub_scores"]}
        elif measured:
            record = {"commit": measured["commit"], "score": measured["score"], "sub_scores": measured["sub_scores"]}
        else:
            return
        record.update(goal_slug=self.goal.slug, spread=(measured or {}).get("spread", 0.0), iteration=n,
                      timestamp=now_iso(), metric=self.goal.metric.name, direction=self.goal.metric.direction)
        write_record(self.layout.baseline_file, "baseline", record)

    # ------------------------------------------------------------------------------- stop check
    def _stop_check(self, n: int, st: dict[str, Any], settings: dict[str, Any]) -> None:
        self.store.step("stop_check")
        sc = st.setdefault("stop_check", {})
        if not sc.get("events_written"):
            events = []
            try:
                best = read_json(self.layout.baseline_file, "baseline")
            except FileNotFoundError:
                best = None
            phase = self.goal.phase(settings.get("current_phase"))
            while best is not None and phase is not None and not phase.unmet(best["sub_scores"]):
                nxt = self.goal.next_phase(phase.phase)
                if nxt is None:
                    break
                events.append(self._event("phase_transition", n, "current_phase", phase.phase, nxt.phase,
                                          "tournament"))
                self.echo(f"  phase {phase.phase} targets met ({', '.join(map(str, phase.targets))}): "
                          f"now {nxt.phase} ({nxt.focus})")
                phase = nxt
            if events:
                append_array(self.layout.events, "event_log", events)
                settings["current_phase"] = phase.phase if phase else None
                self._save_settings(settings)
            sc["events_written"] = True
            self.store.save()
        st["stop_reason"] = self._stop_reason()
        st["status"] = "completed"
        self.store.save()


# how a failed benchmark run is analysed (seed 001's categories)
_RUN_CATEGORY = {"sealed": "sealed_file_violation", "tampered": "measurement", "timeout": "timeout",
                 "oom": "oom", "parse_error": "benchmark_parse_error"}


def _acceptance(decision: dict[str, Any] | None) -> dict[str, Any] | None:
    if not decision:
        return None
    keep = ("accepted", "decided_by", "test", "p_value", "ci_lower", "gain", "min_effect", "spread",
            "baseline_median", "candidate_median", "pairs", "baseline_samples", "candidate_samples", "reason")
    return {k: decision[k] for k in keep if k in decision}


# "measurement" is not one of seed 001's categories: a change that reaches into what measures it is
# recorded as the seed's sealed_file_violation, with reasons of its own.
_SEED_CATEGORY = {"measurement": "sealed_file_violation"}
_WHY = {
    "sealed_file_violation": ("the sealed benchmark must stay the same for every candidate; a changed benchmark "
                              "would measure something else"),
    "measurement": ("a change that reaches into what measures it (the clock, the result, the interpreter's "
                    "start-up) can move the score without making the program any better"),
    "scope_error": "the change does not fit the code at the current best commit",
    "logic_error": "the change broke the program: the benchmark could not produce a score",
    "benchmark_parse_error": "the benchmark's output no longer holds a readable score",
    "timeout": "the change made the benchmark too slow or made it hang",
    "oom": "the benchmark ran out of memory with the change",
    "infrastructure": "the executor could not carry the plan out",
}
_LESSON = {
    "sealed_file_violation": "improve the program, never the benchmark or the other sealed paths ({sealed})",
    "measurement": ("improve the program itself; leave timers, exit hooks, stdout, the standard library and the "
                    "import system alone, or ask the user to approve the change"),
    "scope_error": "write the change against the current best commit and keep it to the target files",
    "logic_error": "keep the program's answers exact; check the change against the benchmark's own checks first",
    "benchmark_parse_error": "do not print to stdout from the program or change the benchmark's output format",
    "timeout": "keep the work bounded; the benchmark has a time limit of {timeout:g} s",
    "oom": "keep memory use bounded",
    "infrastructure": "fix the executor setup (model access, executor_command) before retrying the plan",
}


def failure_analysis(category: str, detail: str, plan: dict[str, Any], goal: Goal, *,
                     not_merged: bool = False) -> dict[str, Any]:
    """Seed 001's failure analysis object for a candidate that lost."""
    family = plan.get("approach_family", "?")
    if category == "regression":
        why = (f"the hypothesis did not hold: {plan.get('hypothesis', '')}" if not not_merged else
               "the measured gain is not larger than the benchmark's noise, so it is not a real improvement")
        lesson = (f"the {family} idea '{plan.get('title') or plan['plan_id']}' does not improve "
                  f"{goal.metric.name}; do not repeat it")
    else:
        why = _WHY.get(category, "see what")
        lesson = _LESSON.get(category, "avoid repeating this failure").format(
            sealed=", ".join(goal.sealed_paths), timeout=goal.benchmark.timeout_s)
    analysis = {"what": detail or category, "why": why, "category": _SEED_CATEGORY.get(category, category),
                "lesson": lesson}
    validate("failure_analysis", analysis, "failure analysis")
    return analysis


def improve(target: Path | str, iterations: int, *, echo: Callable[[str], None] = print, client: Any | None = None,
            plots: bool = True, approve: tuple[str, ...] = (), allow_unconfined: bool = False) -> ImproveSummary:
    """Run ``iterations`` tournament iterations for the goal at ``target`` (``goals/<slug>`` or its goal.md)."""
    if iterations < 1:
        raise HarnessConfigError("--iterations", None, f"must be at least 1, got {iterations}")
    goal_file = find_goal_file(target)
    goal = load_goal(goal_file)
    repo = GitRepo.discover(goal_file.resolve().parent)
    raw = os.environ.get(INTERRUPT_ENV)
    interrupt_after = int(raw) if raw and raw.isdigit() else None
    tournament = Tournament(goal, repo, echo=echo, client=client, interrupt_after=interrupt_after, approve=approve,
                            allow_unconfined=allow_unconfined)
    tournament.want_plots = plots
    return tournament.run(iterations)
