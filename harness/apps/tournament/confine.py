"""What a goal's commands may see: the sandbox of one goal in one repository.

Every benchmark run, executor command and command a model proposes runs through :class:`GoalSandbox`:
the user's checkout and every home are hidden, the command's worktree is writable, the repository's
git folder is readable (so ``git log`` and ``git diff`` work in a worktree), the environment is the
allowlist plus the names the goal's ``## Sandbox`` section declares, and the goal's limits apply. A
benchmark's check is confined apart: it sees the sealed files, read-only, and nothing of the candidate's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.apps.tournament.gitops import GitRepo
from harness.base.errors import HarnessConfigError
from harness.base.redaction import child_environment
from harness.loading.goal import Goal
from harness.sandbox import Confinement, Limits, Sandbox, sandbox

UNCONFINED_FLAG = "--allow-unconfined"


@dataclass(frozen=True)
class GoalSandbox:
    """The confinement of one goal's commands; ``allow_unconfined`` is the user's explicit opt-in to run
    commands from models and ideas where no sandbox can be made."""

    goal: Goal
    repo_root: Path        # the user's checkout: hidden
    git_dir: Path          # read-only inside, so worktrees stay git repositories
    project_root: Path     # where goals/ lives: relative paths of ## Sandbox start here
    allow_unconfined: bool = False
    engine: Sandbox | None = None  # default: this machine's sandbox
    held_back_at: Path | None = None  # the held-back inputs' copy, where not at the goal's path (a Dask worker's)

    @property
    def box(self) -> Sandbox:
        return self.engine or sandbox()

    def may_run_commands(self) -> str | None:
        """None when commands from models and ideas may run; else why not, in one line."""
        if self.box.available or self.allow_unconfined:
            return None
        return (f"refused: no sandbox can be made here ({self.box.reason}); commands from models and ideas do "
                f"not run unconfined unless you pass {UNCONFINED_FLAG}")

    def held_back_dir(self) -> Path | None:
        held = self.goal.benchmark.held_back
        if held and self.held_back_at is not None:
            return self.held_back_at
        return self._path(held) if held else None

    def check_held_back(self, repo: GitRepo | None) -> None:
        """Held-back inputs a candidate could read from its worktree would hold nothing back."""
        held = self.held_back_dir()
        if held is None:
            return
        field = "benchmark.held_back"
        if not held.is_dir():
            raise HarnessConfigError(self.goal.path, field, f"{held} is not a folder",
                                     "point it at a folder of inputs kept out of git")
        if repo is None or repo.root not in held.parents:
            return
        inside = held.relative_to(repo.root).as_posix()
        if repo.out("ls-files", "--", inside):
            raise HarnessConfigError(self.goal.path, field, f"{inside} is tracked by git, so every candidate's "
                                     "worktree has a copy", f"git-ignore it and run `git rm -r --cached {inside}`, "
                                     "or move it out of the repository")

    def confinement(self, workdir: Path, *, cwd: Path | None = None, network: bool = False,
                    env: Mapping[str, str] | None = None, overlays: tuple[tuple[Path, str], ...] = (),
                    held_back: bool = False) -> Confinement:
        """A command of a candidate's worktree (a benchmark's measured run, an executor): the worktree
        writable, the repository's git folder readable, the user's checkout hidden."""
        # the pytest gate works in the checkout itself: the one case where the checkout is not hidden
        hidden = (self.repo_root,) if workdir != self.repo_root else ()
        return self._confine(workdir, cwd=cwd, network=network, env={"HARNESS_WORKTREE": str(workdir), **(env or {})},
                             hidden=hidden, read_only=(self.git_dir,), overlays=overlays, held_back=held_back)

    def check_confinement(self, sealed_root: Path, *, cwd: Path, hide: tuple[Path, ...] = (),
                          env: Mapping[str, str] | None = None, held_back: bool = False) -> Confinement:
        """The benchmark's check: the sealed files (``sealed_root``) read-only and nothing of the candidate's:
        the user's checkout, the repository's git folder and the candidate's worktree (``hide``) stay out of
        sight, so nothing of the candidate's reaches the process that writes the result."""
        return self._confine(sealed_root, cwd=cwd, network=False,
                             env={"HARNESS_SEALED": str(sealed_root), **(env or {})},
                             hidden=(self.repo_root, self.git_dir, *hide), read_only=(), held_back=held_back,
                             workdir_writable=False)

    def _confine(self, workdir: Path, *, cwd: Path | None, network: bool, env: Mapping[str, str],
                 hidden: tuple[Path, ...], read_only: tuple[Path, ...], overlays: tuple[tuple[Path, str], ...] = (),
                 held_back: bool, workdir_writable: bool = True) -> Confinement:
        spec = self.goal.sandbox
        environment = child_environment(spec.env)
        environment.update(PYTHONDONTWRITEBYTECODE="1")
        environment.update(env)
        shown = [*read_only, *(self._path(p) for p in spec.read)]
        held = self.held_back_dir()
        if held is not None:
            if held_back:
                shown.append(held)
                environment["HARNESS_HELD_BACK"] = str(held)
            else:
                hidden = (*hidden, held)
        return Confinement(workdir=workdir, cwd=cwd, env=environment, hidden=tuple(hidden), read_only=tuple(shown),
                           writable=tuple(self._path(p) for p in spec.write), overlays=overlays, network=network,
                           workdir_writable=workdir_writable)

    def limits(self, timeout_s: float, *, cpu: bool = False) -> Limits:
        """The goal's limits; ``cpu`` caps each process's CPU time at the timeout too (not for benchmarks,
        whose CPU time the harness measures)."""
        return Limits(timeout_s=timeout_s, cpu_s=timeout_s if cpu else None, **self.goal.sandbox.bounds())

    def _path(self, raw: str) -> Path:
        path = Path(os.path.expanduser(raw))
        return (path if path.is_absolute() else self.project_root / path).resolve()
