"""``harness improve GOAL --scheduler ADDRESS``: candidates and benchmark runs on Dask distributed workers.

``local:N`` starts a cluster of N worker processes on this machine for the command and closes it at the end;
``tcp://HOST:PORT`` (or ``tls://``) uses a running scheduler. Every worker offers one ``benchmark`` resource
(``local:N`` starts them so; a running cluster's workers are started with ``--resources benchmark=1``) and every task
asks for it, so a worker runs one candidate, and one benchmark, at a time however many threads it has.

What goes to a worker is plain data (:mod:`~harness.apps.tournament.remote`): the repository as ``git bundle`` bytes,
scattered once per round through Dask, the goal file, the plan and the settings. A candidate comes back as its
result and a bundle of its branch's own commits, fetched into the user's repository as ``experiment/round_N_...``.
A round's noise runs, its winner's confirmation (interleaved pairs with the baseline) and the runs after the merge
run on one worker, the first that measured the noise, so the baseline a candidate is compared with and the
candidate are measured on one host; a candidate's own check for a regression runs in its task, on its worker.
Dask is the optional extra ``distributed``, imported only here and only with ``--scheduler``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from harness.apps.tournament.benchmark import SealedManifest
from harness.apps.tournament.context import Context
from harness.apps.tournament.models import ExecutorResult, Plan
from harness.apps.tournament.remote import (
    CandidateTask,
    Done,
    Job,
    RunsTask,
    Shared,
    held_back_tar,
    run_candidate,
    run_runs,
    worker_ready,
)
from harness.apps.tournament.sampling import PairedRuns, Samples
from harness.apps.tournament.state import BaselineRuns
from harness.apps.tournament.store import append_log
from harness.base.errors import ExitCode, HarnessError

EXTRA = "pip install 'pytest-rubric[distributed]'"
RESOURCE = "benchmark"       # one per worker, one per task: a worker runs one benchmark at a time
LOCAL = "local:"
CONNECT_TIMEOUT_S = 10
WORKERS_TIMEOUT_S = 30
POLL_S = 0.1
QUIET_HTTP = {"dashboard_address": "127.0.0.1:0"}


class ClusterUnavailable(HarnessError):
    """``--scheduler`` cannot be used: Dask is not installed, or the scheduler or its workers cannot serve."""

    exit_code = ExitCode.UNAVAILABLE


def dask_problem() -> str | None:
    """Why ``--scheduler`` cannot work here (the extra is not installed), in one line; None when it can."""
    if importlib.util.find_spec("distributed") is None:
        return f"--scheduler needs Dask distributed, which is not installed (fix: {EXTRA})"
    return None


def placement_log(ctx: Context, n: int) -> Path:
    """``logs/round_N/placement.jsonl``: which worker ran each task, and when each benchmark ran there."""
    return ctx.layout.base / "logs" / f"round_{n}" / "placement.jsonl"


class DaskCluster:
    """The Dask client of one ``harness improve`` run (and its cluster, for ``local:N``); see the module's docstring.
    Thread-safe: the executor threads hand their candidates to it at once."""

    def __init__(self, address: str):
        problem = dask_problem()
        if problem:
            raise ClusterUnavailable(problem)
        from distributed import Client, KilledWorker, LocalCluster

        self._killed: type[Exception] = KilledWorker
        self.address = address
        self._local: Any = None
        self._lock = threading.Lock()
        self._data: dict[tuple[str, ...], Shared] = {}  # this round's bundles of the repository, by their commits
        self._round = 0
        self._published: list[str] = []
        self._places: dict[str, str] = {}             # place -> the worker that ran its first task
        if address.startswith(LOCAL):
            # one thread each (the resource holds them to one candidate anyway); no memory limit of Dask's (the
            # sandbox bounds each run's); no dashboard, and the scheduler's own HTTP endpoints on a free port of
            # this host, never a warning that 8787 is taken
            count = int(address[len(LOCAL):])
            try:
                self._local = LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                                           resources={RESOURCE: 1}, memory_limit=0, silence_logs=logging.ERROR,
                                           dashboard_address=None, scheduler_kwargs=QUIET_HTTP)
            except Exception as exc:  # noqa: BLE001 - Dask's own reasons, in one line
                raise ClusterUnavailable(f"could not start a local Dask cluster of {count} worker(s): "
                                         f"{type(exc).__name__}: {exc}") from None
            self.client = Client(self._local)
        else:
            try:
                self.client = Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
            except (OSError, TimeoutError) as exc:
                raise ClusterUnavailable(f"cannot reach the Dask scheduler at {address}: {exc} (fix: start one with "
                                         f"`dask scheduler` and workers with `dask worker {address} --nthreads 1 "
                                         f"--resources {RESOURCE}=1`, or use --scheduler local:N)") from None
        try:
            self.workers = self._check_workers()
        except BaseException:
            self.close()
            raise

    def _check_workers(self) -> list[str]:
        fix = f"start workers with `dask worker {self.address} --nthreads 1 --resources {RESOURCE}=1`"
        try:
            self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except TimeoutError:
            raise ClusterUnavailable(f"the Dask scheduler at {self.address} has no workers (fix: {fix})") from None
        workers = self.client.scheduler_info()["workers"]
        able = sorted(a for a, w in workers.items() if (w.get("resources") or {}).get(RESOURCE, 0) >= 1)
        if not able:
            raise ClusterUnavailable(f"no worker of the Dask scheduler at {self.address} offers the `{RESOURCE}` "
                                     f"resource, so none would run a candidate (fix: {fix})")
        ours = importlib.metadata.version("pytest-rubric")
        try:  # imports the worker's side on every worker now, not in the first candidate each runs
            theirs = self.client.run(worker_ready, workers=able)
        except Exception as exc:  # a worker without the harness cannot even read the function
            raise ClusterUnavailable(f"a Dask worker cannot run the harness ({type(exc).__name__}: {exc}) (fix: "
                                     f"install pytest-rubric {ours} with {EXTRA} on every worker)") from None
        odd = sorted(f"{a} has {v}" for a, v in theirs.items() if v != ours)
        if odd:
            raise ClusterUnavailable(f"the Dask workers must run pytest-rubric {ours}, as here: {', '.join(odd)}")
        return able

    def describe(self) -> str:
        where = "a local cluster" if self._local is not None else f"the Dask scheduler at {self.address}"
        return (f"cluster: {len(self.workers)} Dask worker(s) of {where}, each running one benchmark at a time "
                f"(resource `{RESOURCE}`); candidates go to the workers, the merge stays here")

    def close(self) -> None:
        with self._lock:
            self._data.clear()
            self._release(list(self._published))
        self.client.close()
        if self._local is not None:
            self._local.close()

    # ---------------------------------------------------------------------------------- the Cluster protocol
    def candidate(self, ctx: Context, n: int, eid: str, plan: Plan, base: str, manifest: SealedManifest,
                  baseline: BaselineRuns) -> ExecutorResult:
        """One executor on a worker; its branch fetched back here (at ``base`` when it made no commit)."""
        log = ctx.layout.log(n, eid)
        log.unlink(missing_ok=True)
        archived = ctx.layout.plan(n, plan.plan_id)
        plan_json = archived.read_text(encoding="utf-8") if archived.is_file() else json.dumps(plan.to_json())
        task = CandidateTask(self._job(ctx, n), eid, plan.to_json(), plan_json, base, baseline.to_json())
        done = self._run(ctx, n, manifest, eid, run_candidate, task, self._repo(ctx, n, base))
        assert done.result is not None
        result = ExecutorResult.from_json(done.result)
        if done.branch is not None:
            ctx.repo.fetch_bundle(done.branch, result.branch)
            if ctx.repo.rev(result.branch) != result.commit:
                raise HarnessError(f"{eid}: the branch the worker sent back is not at {result.commit}")
        else:
            ctx.repo.set_branch(result.branch, base)
        return result

    def samples(self, ctx: Context, n: int, manifest: SealedManifest, commit: str, runs: int, log: Path, *,
                held_back: bool = False, place: str | None = None) -> Samples:
        task = RunsTask(self._job(ctx, n), manifest.commit, (commit,), runs, log.stem, held_back)
        done = self._run_runs(ctx, n, manifest, task, place)
        assert done.samples is not None
        return done.samples

    def pairs(self, ctx: Context, n: int, manifest: SealedManifest, commit: str, pairs: int, log: Path, *,
              held_back: bool = False, place: str | None = None) -> PairedRuns:
        task = RunsTask(self._job(ctx, n), manifest.commit, (manifest.commit, commit), pairs, log.stem, held_back)
        done = self._run_runs(ctx, n, manifest, task, place)
        assert done.pairs is not None
        return done.pairs

    def _run_runs(self, ctx: Context, n: int, manifest: SealedManifest, task: RunsTask, place: str | None) -> Done:
        bundle = self._repo(ctx, n, *task.commits)
        held = self._held_back(ctx, task.held_back)
        try:
            return self._run(ctx, n, manifest, task.label, run_runs, task, bundle, held, place=place)
        finally:
            if held is not None:  # sent for this task alone
                with self._lock:
                    self._release([held.name])

    # ---------------------------------------------------------------------------------- submitting and waiting
    def _run(self, ctx: Context, n: int, manifest: SealedManifest, label: str, function: Any, *args: Any,
             place: str | None = None) -> Done:
        """Submit one task asking for the benchmark resource (on the worker of ``place`` when it has one), wait for
        it (Ctrl-C cancels it), and keep its log and placement."""
        pinned = self._places.get(place) if place else None
        key = f"harness-{ctx.goal.slug}-round_{n}-{label}-{uuid.uuid4().hex[:12]}"
        # the pinned worker is a preference: when it is gone the task runs on another, and says so
        where: dict[str, Any] = {"workers": [pinned], "allow_other_workers": True} if pinned else {}
        future = self.client.submit(function, *args, key=key, resources={RESOURCE: 1}, pure=False, **where)
        try:
            while not future.done():
                if ctx.cancel.is_set():
                    raise KeyboardInterrupt
                time.sleep(POLL_S)
            done: Done = future.result()
        except self._killed as exc:
            raise HarnessError(f"{label}: the Dask workers that ran it died, each time it was tried ({exc}); run the "
                               "same command again to resume") from None
        except BaseException:
            future.cancel()
            raise
        if place:
            self._places.setdefault(place, done.worker)
            if pinned and done.worker != pinned:
                ctx.echo(f"  cluster: worker {pinned}, which measured {place}'s baseline, is gone; {label} ran on "
                         f"{done.worker}")
        if done.digests != dict(sorted(manifest.digests.items())):
            raise HarnessError(f"{label}: worker {done.worker} measured with sealed files other than the round's "
                               "manifest")
        if done.log:
            append_log(ctx.layout.log(n, label), done.log)
        append_log(placement_log(ctx, n), "".join(json.dumps(span) + "\n" for span in done.spans))
        return done

    def _job(self, ctx: Context, n: int) -> Job:
        goal_file = ctx.goal.path.resolve().relative_to(ctx.repo.root).as_posix()
        return Job(goal_file, ctx.goal.path.read_bytes(), n, ctx.approve, ctx.box.allow_unconfined)

    def _repo(self, ctx: Context, n: int, *commits: str) -> Shared:
        """The repository for a worker: a bundle of ``HEAD`` (and of the candidates' branches holding ``commits``
        it does not), published once and fetched by every task that needs the same commits."""
        refs = ["HEAD"]
        for commit in commits:
            if not any(ctx.repo.is_ancestor(commit, ref) for ref in refs):
                holder = next((b for b in self._branches(ctx) if ctx.repo.is_ancestor(commit, b)), None)
                if holder is None:
                    raise HarnessError(f"commit {commit[:7]} is on no branch of the repository to send the workers")
                refs.append(holder)
        key = tuple(ctx.repo.rev(ref) for ref in refs)
        with self._lock:
            if self._round != n:  # an earlier round's tasks are all done: its bundles go
                old, self._data, self._round = self._data, {}, n
                self._release([shared.name for shared in old.values()])
            if key not in self._data:
                self._data[key] = self._share(ctx.repo.bundle(*refs))
            return self._data[key]

    def _share(self, data: bytes) -> Shared:
        """``data`` scattered and published for tasks to fetch (:class:`~harness.apps.tournament.remote.Shared`):
        passed as an argument it would be a dependency, and Dask would send every task to the worker holding it."""
        name = f"harness-{uuid.uuid4().hex}"
        self.client.publish_dataset(self.client.scatter(data), name=name)
        self._published.append(name)
        return Shared(name)

    def _release(self, names: list[str]) -> None:
        """Unpublish ``names`` once their tasks are done: on a scheduler of the user's nothing of ours stays."""
        self._published = [name for name in self._published if name not in names]
        if names and self.client.status == "running":
            try:
                self.client.unpublish_dataset(names)
            except Exception:  # noqa: BLE001 - what it held goes with the client anyway
                pass

    @staticmethod
    def _branches(ctx: Context) -> list[str]:
        return ctx.repo.out("for-each-ref", "--format=%(refname)", "refs/heads/").splitlines()

    def _held_back(self, ctx: Context, wanted: bool) -> Shared | None:
        folder = ctx.box.held_back_dir() if wanted else None
        if folder is None or not folder.is_dir():
            return None
        with self._lock:
            return self._share(held_back_tar(folder))
