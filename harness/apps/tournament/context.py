"""What every phase of an iteration shares: the goal, the repository, the record layout and the state
store, the model access, the sandbox and the benchmark sampler, the cancel event and the echo."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.apps.tournament.agents import ModelAccess
from harness.apps.tournament.benchmark import SealedPaths
from harness.apps.tournament.confine import GoalSandbox
from harness.apps.tournament.gitops import GitRepo
from harness.apps.tournament.sampling import Sampler
from harness.apps.tournament.store import Layout, StateStore
from harness.loading.goal import Goal

if TYPE_CHECKING:
    from harness.apps.tournament.benchmark import SealedManifest
    from harness.apps.tournament.models import ExecutorResult, Plan
    from harness.apps.tournament.sampling import PairedRuns, Samples
    from harness.apps.tournament.state import BaselineRuns


def fmt(value: float | None) -> str:
    """A score in the lines the tournament prints."""
    return "none" if value is None else f"{value:.4g}"


class Cluster(Protocol):
    """Where candidates and benchmark runs go when they do not run in this process (``--scheduler``: Dask workers,
    :mod:`~harness.apps.tournament.cluster`). Runs given the same ``place`` run on the worker the first of them ran on
    (a round's noise runs, its winner's confirmation and the runs after the merge: noise is per host). The runs use
    the sealed files of ``manifest`` (its commit's); ``pairs`` interleave that commit and ``commit`` (ABAB)."""

    def candidate(self, ctx: Context, n: int, eid: str, plan: Plan, base: str, manifest: SealedManifest,
                  baseline: BaselineRuns) -> ExecutorResult: ...

    def samples(self, ctx: Context, n: int, manifest: SealedManifest, commit: str, runs: int, log: Path, *,
                held_back: bool = False, place: str | None = None) -> Samples: ...

    def pairs(self, ctx: Context, n: int, manifest: SealedManifest, commit: str, pairs: int, log: Path, *,
              held_back: bool = False, place: str | None = None) -> PairedRuns: ...


@dataclass
class Context:
    """One tournament's shared parts (see the module's docstring); the phases read them, the loop makes them."""

    goal: Goal
    repo: GitRepo
    layout: Layout
    store: StateStore
    access: ModelAccess
    box: GoalSandbox
    sampler: Sampler
    echo: Callable[[str], None]
    cancel: threading.Event
    approve: tuple[str, ...] = ()          # plan ids and idea file stems the user approved (--approve)
    interrupt_after: int | None = None     # the resume tests' deterministic kill after executor K
    cluster: Cluster | None = None         # --scheduler: candidates and benchmarks on Dask workers; None: here

    @classmethod
    def make(cls, goal: Goal, repo: GitRepo, layout: Layout, *, echo: Callable[[str], None],
             access: ModelAccess, approve: tuple[str, ...], allow_unconfined: bool,
             interrupt_after: int | None) -> Context:
        # benchmark commands run where goals/ lives (the repository root in the usual layout)
        project_root = goal.goal_dir.resolve().parent.parent
        box = GoalSandbox(goal, repo.root, repo.git_dir(), project_root, allow_unconfined=allow_unconfined)
        cancel = threading.Event()
        sampler = Sampler(repo, layout, box, SealedPaths(goal.sealed_paths), project_root.relative_to(repo.root),
                          cancel)
        return cls(goal, repo, layout, StateStore(layout), access, box, sampler, echo, cancel,
                   tuple(name.removesuffix(".md") for name in approve), interrupt_after)

    @property
    def sealed(self) -> SealedPaths:
        return self.sampler.sealed

    def approved(self, plan_id: str) -> bool:
        """The user approved this plan (``--approve``: its plan id, or the idea file it came from)."""
        return any(plan_id == name or plan_id.endswith(f"_user_{name}") for name in self.approve)
