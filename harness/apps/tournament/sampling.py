"""Repeated runs of the sealed benchmark in a worktree: the round's sealed manifest laid over each run,
``N`` runs of one commit, and interleaved pairs (ABAB) of the baseline and a candidate."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.apps.tournament.benchmark import (
    BENCHMARK_LOCK,
    BenchmarkSite,
    RunOutcome,
    SealedManifest,
    SealedPaths,
    run_benchmark,
)
from harness.apps.tournament.confine import GoalSandbox
from harness.apps.tournament.gitops import GitRepo
from harness.apps.tournament.store import Layout, append_log

Side = Literal["baseline", "candidate"]


@dataclass
class PairedRuns:
    """Interleaved runs (ABAB) of the baseline and a candidate; a failed run ends them."""

    baseline: list[float] = field(default_factory=list)
    candidate: list[float] = field(default_factory=list)
    failed_side: Side | None = None
    failure: str = ""


@dataclass(frozen=True)
class Samples:
    """``runs`` scores of one worktree, the last run's sub-scores, its stdout (``raw``: verbatim, as the sandbox
    kept it) and its check's result; ``failed`` is the run that failed (the samples then stop there, and
    ``raw`` and ``result`` are its)."""

    scores: list[float]
    sub_scores: dict[str, float]
    raw: str
    failed: RunOutcome | None = None
    result: str | None = None


@dataclass
class Sampler:
    """Runs the sealed benchmark for one goal; benchmark commands run in ``subdir`` of a worktree (where
    goals/ lives)."""

    repo: GitRepo
    layout: Layout
    box: GoalSandbox
    sealed: SealedPaths
    subdir: Path
    cancel: threading.Event
    _manifests: dict[tuple[int, str], SealedManifest] = field(default_factory=dict)

    def manifest(self, n: int, commit: str) -> SealedManifest:
        """The sealed files of ``commit``, written once under ``.sealed/round_N/`` for the runs to be given."""
        key = (n, commit)
        if key not in self._manifests:
            manifest = SealedManifest.take(self.repo, commit, self.sealed)
            manifest.materialize(self.layout.sealed_copy(n))
            self._manifests[key] = manifest
        return self._manifests[key]

    def sample(self, n: int, wt: Path, manifest: SealedManifest, runs: int, log: Path, *,
               held_back: bool = False) -> Samples:
        """``runs`` benchmark runs in ``wt``, each given the manifest's sealed files (laid read-only over the
        worktree's, and restored in it before the run) and checked by the check in the manifest's copy (restored
        too); a run that changed either, or failed, ends them."""
        samples: list[float] = []
        subs: dict[str, float] = {}
        raw, result = "", None
        copy = self.layout.sealed_copy(n)
        site = BenchmarkSite(wt, self.subdir, manifest.overlays(copy, wt), held_back, sealed_root=copy)
        for _ in range(runs):
            # the check's copy serves every worktree: restored, used and verified in one turn
            with BENCHMARK_LOCK:
                manifest.restore(wt, self.repo)
                manifest.materialize(copy)
                outcome = run_benchmark(self.box, site, cancel=self.cancel)
                # the worktree's sealed files, and the copy the check ran from (only an unconfined run reaches it)
                changed = sorted(set(manifest.verify(wt, self.repo)) | set(manifest.altered(copy)))
            append_log(log, outcome.log_entry())
            if changed:
                sealed = RunOutcome("sealed", detail=f"sealed file(s) changed while the benchmark ran: "
                                                     f"{', '.join(changed)}", stdout=outcome.stdout,
                                    result=outcome.result)
                return Samples(samples, {}, outcome.stdout, failed=sealed, result=outcome.result)
            if not outcome.ok:
                return Samples(samples, {}, outcome.stdout, failed=outcome, result=outcome.result)
            assert outcome.score is not None
            samples.append(outcome.score)
            subs, raw, result = outcome.sub_scores, outcome.stdout, outcome.result
        return Samples(samples, subs, raw, result=result)

    def pairs(self, n: int, wt_a: Path, wt_b: Path, pairs: int, manifest: SealedManifest, log: Path, *,
              held_back: bool = False) -> PairedRuns:
        """``pairs`` interleaved runs (ABAB) of the baseline worktree ``wt_a`` and a candidate's ``wt_b``."""
        runs = PairedRuns()
        order: tuple[tuple[Path, Side], ...] = ((wt_a, "baseline"), (wt_b, "candidate"))
        for _ in range(pairs):
            for wt, side in order:
                got = self.sample(n, wt, manifest, 1, log, held_back=held_back)
                if got.failed is not None:
                    runs.failed_side, runs.failure = side, got.failed.detail
                    return runs
                (runs.baseline if side == "baseline" else runs.candidate).extend(got.scores)
        return runs
