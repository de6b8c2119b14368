"""What a Dask worker does for ``harness improve --scheduler`` (the client's side is cluster.py): plain data in, plain
data out.

A task carries the repository as ``git bundle`` bytes, the goal file's text, the plan and the settings. The worker
clones the bundle into a temporary folder of its own and rebuilds there what a run shares (the goal, the sandbox,
the sampler, model access: nothing of the client's process travels), then runs exactly what a thread of the local
pool runs: :func:`~harness.apps.tournament.execution.run_executor` for a candidate, the sampler's runs and
interleaved pairs for the noise runs, the winner's confirmation and the runs after the merge. Benchmarks run in the
worker's sandbox, as local ones do. The answer says which worker ran the task and when each benchmark ran there
(the placement log), with the log it wrote and, for a candidate, its branch as a bundle of its own commits.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import os
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness.apps.tournament.agents import ModelAccess
from harness.apps.tournament.context import Context
from harness.apps.tournament.execution import run_executor
from harness.apps.tournament.gitops import GitError, GitRepo
from harness.apps.tournament.models import Plan
from harness.apps.tournament.sampling import PairedRuns, Samples, Sampler
from harness.apps.tournament.state import BaselineRuns
from harness.apps.tournament.store import Layout
from harness.llm import CallPolicy
from harness.loading.goal_file import load_goal


@dataclass(frozen=True)
class Job:
    """What every task of a round carries: the goal file (its path in the repository and its bytes, as the client
    loaded it), the round, the plans approved with ``--approve``, and ``--allow-unconfined``."""

    goal_file: str
    goal_bytes: bytes
    n: int
    approve: tuple[str, ...] = ()
    allow_unconfined: bool = False


@dataclass(frozen=True)
class CandidateTask:
    """One executor: its plan (the record, and the archived JSON an ``executor_command`` is given), the commit it
    starts from and the round's noise runs (what its first runs are compared with)."""

    job: Job
    eid: str
    plan: dict[str, Any]
    plan_json: str
    base: str
    baseline: dict[str, Any]


@dataclass(frozen=True)
class RunsTask:
    """Benchmark runs given the sealed files of ``base`` (the round's manifest): ``runs`` runs of ``commits[0]``,
    or, with two commits, ``runs`` interleaved pairs (ABAB) of the two. ``label`` names the log."""

    job: Job
    base: str
    commits: tuple[str, ...]
    runs: int
    label: str
    held_back: bool = False


@dataclass(frozen=True)
class Shared:
    """Bytes the client scattered on the cluster and published under ``name`` (the repository's bundle, the held-back
    inputs): a task fetches them where it runs. They are not a dependency of the task, so Dask places the task by
    its resources alone, not on the worker that happens to hold the bytes."""

    name: str

    def load(self) -> bytes:
        from distributed import get_client

        data: bytes = get_client().get_dataset(self.name).result()
        return data


def _bytes(data: bytes | Shared | None) -> bytes | None:
    return data.load() if isinstance(data, Shared) else data


@dataclass
class Done:
    """A task's answer: the worker that ran it, the spans of the task and of each benchmark on it (unix seconds),
    the manifest's digests it measured with, the log it wrote, and what it found: an executor's result (its JSON,
    and its branch's own commits as a bundle, when it made one), samples, or pairs."""

    worker: str
    spans: list[dict[str, Any]]
    digests: dict[str, str]
    log: str = ""
    result: dict[str, Any] | None = None
    branch: bytes | None = None
    samples: Samples | None = None
    pairs: PairedRuns | None = None


@dataclass
class _TimedSampler(Sampler):
    """The sampler, noting when each of its benchmarks ran (waits for the benchmark lock included)."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    label: str = ""

    def sample(self, n: int, wt: Path, manifest: Any, runs: int, log: Path, *, held_back: bool = False) -> Samples:
        started = time.time()
        try:
            return super().sample(n, wt, manifest, runs, log, held_back=held_back)
        finally:
            self.spans.append({"task": self.label, "what": "benchmark", "runs": runs, "started": started,
                               "ended": time.time()})


def run_candidate(task: CandidateTask, bundle: bytes | Shared) -> Done:
    """A Dask task: one executor on this worker, from its worktree to its runs, as the local pool runs it."""
    started = time.time()
    with _site(task.job, _bytes(bundle) or b"", task.base, task.eid) as (ctx, sampler):
        n = task.job.n
        plan = Plan.from_json(task.plan)
        plan_file = ctx.layout.plan(n, plan.plan_id)
        plan_file.parent.mkdir(parents=True, exist_ok=True)
        plan_file.write_text(task.plan_json, encoding="utf-8")
        manifest = ctx.sampler.manifest(n, task.base)
        result = run_executor(ctx, n, task.eid, plan, task.base, manifest, BaselineRuns.from_json(task.baseline))
        branch = ctx.repo.bundle(result.branch, f"^{task.base}") if result.commit is not None else None
        return _done(ctx, sampler, started, manifest.digests, ctx.layout.log(n, task.eid), result=result.to_json(),
                     branch=branch)


def run_runs(task: RunsTask, bundle: bytes | Shared, held_back: bytes | Shared | None = None) -> Done:
    """A Dask task: runs of one commit, or pairs of two, on this worker (``held_back``: the goal's held-back inputs,
    a tar, for the winner's confirmation and the runs after the merge)."""
    started = time.time()
    with _site(task.job, _bytes(bundle) or b"", task.commits[-1], task.label, _bytes(held_back)) as (ctx, sampler):
        n = task.job.n
        manifest = ctx.sampler.manifest(n, task.base)
        log = ctx.layout.log(n, task.label)
        trees = []
        for side, commit in enumerate(task.commits):
            trees.append(ctx.layout.worktrees / f"round_{n}_{task.label}_{side}")
            ctx.repo.add_worktree(trees[-1], commit)
        if len(trees) == 1:
            got = ctx.sampler.sample(n, trees[0], manifest, task.runs, log, held_back=task.held_back)
            return _done(ctx, sampler, started, manifest.digests, log, samples=got)
        pairs = ctx.sampler.pairs(n, trees[0], trees[1], task.runs, manifest, log, held_back=task.held_back)
        return _done(ctx, sampler, started, manifest.digests, log, pairs=pairs)


def held_back_tar(folder: Path) -> bytes:
    """The goal's held-back inputs as a tar (what a worker is sent for the runs that may see them)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return buffer.getvalue()


def worker_ready() -> str:
    """The harness's version on this worker; run on every worker when the cluster is opened, which imports this side
    of the harness there before the first candidate."""
    return importlib.metadata.version("pytest-rubric")


def worker_name() -> str:
    """This worker's address (a Dask worker's), else this host and process."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


def _done(ctx: Context, sampler: _TimedSampler, started: float, digests: dict[str, str], log: Path,
          **found: Any) -> Done:
    worker = worker_name()
    spans = [{"task": sampler.label, "what": "task", "started": started, "ended": time.time()}, *sampler.spans]
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return Done(worker, [{"worker": worker, **span} for span in spans], dict(sorted(digests.items())), text, **found)


@contextlib.contextmanager
def _site(job: Job, bundle: bytes, checkout: str, label: str,
          held_back: bytes | None = None) -> Iterator[tuple[Context, _TimedSampler]]:
    """A clone of ``bundle`` in a temporary folder, at ``checkout``, and the context of a run in it; removed after."""
    with tempfile.TemporaryDirectory(prefix="harness-worker-") as tmp:
        folder = Path(tmp).resolve()
        (folder / "repo.bundle").write_bytes(bundle)
        root = folder / "repo"
        _git(folder, "clone", "--quiet", "--no-checkout", str(folder / "repo.bundle"), str(root))
        _git(root, "checkout", "--quiet", "--detach", checkout)
        goal_path = root / job.goal_file
        if not goal_path.is_file() or goal_path.read_bytes() != job.goal_bytes:  # the goal as the client read it
            goal_path.parent.mkdir(parents=True, exist_ok=True)
            goal_path.write_bytes(job.goal_bytes)
        goal = load_goal(goal_path)
        repo = GitRepo(root)
        layout = Layout(root, goal.slug)
        policy = CallPolicy.build(work_dir=layout.work_dir)
        ctx = Context.make(goal, repo, layout, echo=lambda line: None, access=ModelAccess(goal, None, policy),
                           approve=job.approve, allow_unconfined=job.allow_unconfined, interrupt_after=None)
        if held_back is not None:
            ctx.box = replace(ctx.box, held_back_at=_unpack(held_back, folder / "held_back"))
        sampler = _TimedSampler(**{f.name: getattr(ctx.sampler, f.name) for f in fields(Sampler)}, label=label)
        sampler.box = ctx.box
        ctx.sampler = sampler
        try:
            yield ctx, sampler
        finally:
            repo.remove_worktrees_under(layout.worktrees)
            policy.close()


def _unpack(data: bytes, folder: Path) -> Path:
    folder.mkdir()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 on: no links or paths out of the folder
            tar.extractall(folder, filter="data")
        else:  # pragma: no cover - older 3.11: the tar is the client's own
            tar.extractall(folder)  # noqa: S202
    return folder


def _git(cwd: Path, *args: str) -> None:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False,
                          env={k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")})
    if proc.returncode != 0:
        detail = proc.stderr.strip().splitlines()
        raise GitError(f"the worker could not clone the repository: git {args[0]}: "
                       f"{detail[-1] if detail else proc.returncode}")
