"""The git operations of a tournament: worktrees, experiment and archive branches, the final merge.

Everything runs ``git`` as a subprocess. Nothing here touches the user's working tree except
:meth:`GitRepo.merge_no_ff` and :meth:`GitRepo.revert_merge`, called once per iteration for the winner.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import ExitCode, HarnessError

# Commits the tournament makes on experiment branches: no user hooks, no signing prompts.
_OURS = ("-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null")
_IDENTITY = {"GIT_AUTHOR_NAME": "harness", "GIT_AUTHOR_EMAIL": "harness@localhost",
             "GIT_COMMITTER_NAME": "harness", "GIT_COMMITTER_EMAIL": "harness@localhost"}


class GitError(HarnessError):
    """A git command failed, or the repository is not in a state the tournament can work from."""

    exit_code = ExitCode.GENERAL_FAILURE

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.GENERAL_FAILURE):
        super().__init__(message)
        self.exit_code = exit_code


def _clean_env() -> dict[str, str]:
    """The environment of a git command: ours, never a repository some caller's variables point at."""
    env = dict(os.environ)
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(key, None)
    return env


@dataclass(frozen=True)
class Worktree:
    path: Path
    branch: str | None
    head: str | None


class GitRepo:
    """One repository; ``root`` is its top-level folder (the user's working tree)."""

    def __init__(self, root: Path):
        self.root = root
        self.lock = threading.RLock()  # ref and worktree changes go one at a time

    @classmethod
    def discover(cls, start: Path) -> GitRepo:
        start = start if start.is_dir() else start.parent
        try:
            out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=start, capture_output=True,
                                 text=True, check=False)
        except FileNotFoundError:
            raise GitError("git is not installed", ExitCode.UNAVAILABLE) from None
        if out.returncode != 0:
            raise GitError(f"{start} is not inside a git repository (the tournament works on git branches)",
                           ExitCode.USAGE_ERROR)
        return cls(Path(out.stdout.strip()).resolve())

    # ------------------------------------------------------------------ plumbing
    def git(self, *args: str, cwd: Path | None = None, check: bool = True, ours: bool = False,
            input: str | None = None, errors: str = "strict") -> subprocess.CompletedProcess[str]:
        env = _clean_env()
        cmd = ["git", *(_OURS if ours else ()), *args]
        if ours:
            env.update(_IDENTITY)
        proc = subprocess.run(cmd, cwd=cwd or self.root, capture_output=True, text=True, env=env, input=input,
                              check=False, errors=errors)
        if check and proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise GitError(f"git {' '.join(args[:3])} failed: {detail[-1] if detail else proc.returncode}")
        return proc

    def out(self, *args: str, cwd: Path | None = None) -> str:
        return self.git(*args, cwd=cwd).stdout.strip()

    # ------------------------------------------------------------------ state of the user's tree
    def current_branch(self) -> str:
        proc = self.git("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        if proc.returncode != 0:
            raise GitError("HEAD is detached: check out the branch the tournament should improve "
                           "(git switch <branch>) and run again", ExitCode.USAGE_ERROR)
        return proc.stdout.strip()

    def head(self) -> str:
        proc = self.git("rev-parse", "--verify", "--quiet", "HEAD", check=False)
        if proc.returncode != 0:
            raise GitError("the branch has no commit yet: commit the goal and its program first",
                           ExitCode.USAGE_ERROR)
        return proc.stdout.strip()

    def dirty_files(self) -> list[str]:
        """Tracked files with staged or unstaged changes (untracked files do not count)."""
        out = self.git("status", "--porcelain", "--untracked-files=no").stdout
        return [line[3:] for line in out.splitlines() if line.strip()]

    def changes(self) -> set[str]:
        """Changed tracked files and untracked ones that are not ignored: what a stray write would add."""
        out = self.git("status", "--porcelain", "--untracked-files=all").stdout
        return {line[3:] for line in out.splitlines() if line.strip()}

    def require_clean_branch(self) -> str:
        """The checked-out branch's name; refuse a detached HEAD or a dirty working tree."""
        branch = self.current_branch()
        self.head()
        dirty = self.dirty_files()
        if dirty:
            shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
            raise GitError(f"the working tree has uncommitted changes ({shown}): commit or stash them first; "
                           "the tournament only touches your branch to merge a winner", ExitCode.USAGE_ERROR)
        state = self.git("rev-parse", "--git-path", "MERGE_HEAD").stdout.strip()
        if (self.root / state).exists() or Path(state).exists():
            raise GitError("a merge is in progress: finish or abort it first", ExitCode.USAGE_ERROR)
        return branch

    # ------------------------------------------------------------------ branches
    def branch_exists(self, name: str) -> bool:
        return self.git("rev-parse", "--verify", "--quiet", f"refs/heads/{name}", check=False).returncode == 0

    def rev(self, ref: str) -> str:
        return self.out("rev-parse", "--verify", f"{ref}^{{commit}}")

    def delete_branch(self, name: str) -> None:
        with self.lock:
            if self.branch_exists(name):
                self.git("branch", "-D", name)

    def rename_branch(self, old: str, new: str) -> str:
        """Rename ``old`` to ``new`` (``new_2``, ``new_3``... if taken); return the name used."""
        with self.lock:
            target, n = new, 1
            while self.branch_exists(target):
                n += 1
                target = f"{new}_{n}"
            self.git("branch", "-m", old, target)
            return target

    def changed_files(self, base: str, commit: str) -> list[str]:
        out = self.out("diff", "--name-only", "--no-renames", base, commit)
        return [line for line in out.splitlines() if line]

    def diff(self, base: str, commit: str) -> str:
        """The change from ``base`` to ``commit`` as a unified diff (binary files by name only)."""
        # a candidate's file need not be UTF-8; the critic reads the diff as text all the same
        return self.git("diff", "--no-renames", "--no-color", base, commit, errors="replace").stdout

    def git_dir(self) -> Path:
        """The repository's git folder, shared by its worktrees."""
        return (self.root / self.out("rev-parse", "--git-common-dir")).resolve()

    def ls_tree(self, commit: str) -> list[str]:
        return [p for p in self.out("ls-tree", "-r", "--name-only", commit).splitlines() if p]

    def show_bytes(self, commit: str, path: str) -> bytes:
        proc = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=self.root, capture_output=True, check=True)
        return proc.stdout

    def is_ancestor(self, a: str, b: str) -> bool:
        return self.git("merge-base", "--is-ancestor", a, b, check=False).returncode == 0

    def parents(self, commit: str) -> list[str]:
        return self.out("rev-list", "--parents", "-n", "1", commit).split()[1:]

    # ------------------------------------------------------------------ bundles: the repository for a Dask worker
    def bundle(self, *refs: str) -> bytes:
        """``git bundle`` of ``refs`` (``HEAD ^base`` for a branch's own commits): the bytes a worker clones or a
        client fetches. An empty range raises GitError."""
        proc = subprocess.run(["git", "bundle", "create", "--quiet", "-", *refs], cwd=self.root, capture_output=True,
                              check=False, env=_clean_env())
        if proc.returncode != 0:
            detail = proc.stderr.decode(errors="replace").strip().splitlines()
            raise GitError(f"git bundle {' '.join(refs)} failed: {detail[-1] if detail else proc.returncode}")
        return proc.stdout

    def fetch_bundle(self, data: bytes, branch: str) -> None:
        """Set ``branch`` to the branch of that name in the bundle ``data`` (a worker's candidate)."""
        with self.lock, tempfile.TemporaryDirectory(prefix="harness-bundle-") as folder:
            path = Path(folder) / "candidate.bundle"
            path.write_bytes(data)
            self.git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", str(path),
                     f"+refs/heads/{branch}:refs/heads/{branch}")

    def set_branch(self, branch: str, commit: str) -> None:
        """Create or move ``branch`` to ``commit`` (never the checked-out branch)."""
        with self.lock:
            self.git("branch", "--force", branch, commit)

    # ------------------------------------------------------------------ worktrees
    def worktrees(self) -> list[Worktree]:
        out = self.git("worktree", "list", "--porcelain").stdout
        found: list[Worktree] = []
        path = branch = head = None
        for line in out.splitlines() + [""]:
            if line.startswith("worktree "):
                path = Path(line[9:])
            elif line.startswith("branch "):
                branch = line[7:].removeprefix("refs/heads/")
            elif line.startswith("HEAD "):
                head = line[5:]
            elif not line and path is not None:
                found.append(Worktree(path, branch, head))
                path = branch = head = None
        return found

    def add_worktree(self, path: Path, commit: str, branch: str | None = None) -> None:
        """A worktree at ``path``: on a new ``branch`` from ``commit`` (replacing a stale one), else detached."""
        with self.lock:
            self.remove_worktree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            if branch:
                self.git("worktree", "add", "--force", "-B", branch, str(path), commit)
            else:
                self.git("worktree", "add", "--force", "--detach", str(path), commit)

    def remove_worktree(self, path: Path) -> None:
        with self.lock:
            resolved = path.resolve()
            if any(w.path.resolve() == resolved for w in self.worktrees()):
                self.git("worktree", "remove", "--force", "--force", str(path), check=False)
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)
            self.git("worktree", "prune", check=False)

    def remove_worktrees_under(self, folder: Path) -> list[Path]:
        """Remove every worktree registered below ``folder`` and any leftover folders; return them."""
        removed = []
        with self.lock:
            self.git("worktree", "prune", check=False)
            folder = folder.resolve()
            for wt in self.worktrees():
                try:
                    wt.path.resolve().relative_to(folder)
                except ValueError:
                    continue
                self.remove_worktree(wt.path)
                removed.append(wt.path)
            if folder.exists():
                for child in sorted(folder.iterdir()):
                    if child.is_dir():
                        shutil.rmtree(child, ignore_errors=True)
                        if child not in removed:
                            removed.append(child)
            self.git("worktree", "prune", check=False)
        return removed

    # ------------------------------------------------------------------ changes on experiment branches
    def apply_diff(self, worktree: Path, diff: str) -> None:
        """Apply a unified diff in ``worktree`` (raises GitError with git's reason when it does not apply)."""
        proc = self.git("apply", "--whitespace=nowarn", "--recount", "-", cwd=worktree, check=False, input=diff)
        if proc.returncode != 0:
            first = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
            raise GitError(f"the diff does not apply: {'; '.join(first[:2]) or 'git apply failed'}")

    def commit_all(self, worktree: Path, message: str) -> str | None:
        """Commit everything changed in ``worktree``; None when there was nothing to commit."""
        with self.lock:
            self.git("add", "--all", cwd=worktree)
            if self.git("diff", "--cached", "--quiet", cwd=worktree, check=False).returncode == 0:
                return None
            self.git("commit", "--quiet", "--no-verify", "-m", message, cwd=worktree, ours=True)
            return self.out("rev-parse", "HEAD", cwd=worktree)

    # ------------------------------------------------------------------ the user's branch
    def merge_no_ff(self, branch: str, message: str) -> str:
        with self.lock:
            env_user = self.git("config", "user.email", check=False).stdout.strip()
            args = ("merge", "--no-ff", "--no-edit", "-m", message, branch)
            proc = self.git(*args, check=False, ours=not env_user)
            if proc.returncode != 0:
                self.git("merge", "--abort", check=False)
                detail = (proc.stderr or proc.stdout).strip().splitlines()
                raise GitError(f"merging {branch} failed: {detail[-1] if detail else proc.returncode}")
            return self.head()

    def revert_merge(self, merge_commit: str, message: str) -> str:
        with self.lock:
            env_user = self.git("config", "user.email", check=False).stdout.strip()
            self.git("revert", "--no-edit", "-m", "1", merge_commit, ours=not env_user)
            self.git("commit", "--amend", "-m", message, "--no-verify", ours=not env_user)
            return self.head()
