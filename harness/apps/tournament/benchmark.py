"""The sealed benchmark: a measured run of the candidate's code and a sealed check, never in one process.

* A SHA-256 manifest of the sealed paths is taken at the baseline commit; every run gets the manifest's
  bytes laid read-only over the sealed paths of its worktree, never the candidate's.
* The measured run (the goal's ``command``) runs the candidate's code. It holds no result channel: the
  harness measures it from outside (CPU time from ``wait4``, wall time from the parent) and keeps its stdout.
* The check (``check``), a command from the sealed files alone, runs in a process of its own that sees the
  sealed files and never the candidate's worktree. It reads the run's stdout and writes the result to the
  channel the harness opens for it, which only it holds. Both get the same fresh challenge per run.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
import shlex
import shutil
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from harness.apps.tournament.confine import GoalSandbox
from harness.apps.tournament.gitops import GitRepo
from harness.base.errors import HarnessConfigError, HarnessError
from harness.loading.goal import BenchmarkSpec, Goal
from harness.sandbox import Finished, Limits

# Benchmark runs take turns so that timings do not compete for the CPU (parallel executors still
# do their editing and model work at the same time). Re-entrant: a sampler holds it around a run and the
# checks of the sealed files before and after it.
BENCHMARK_LOCK = threading.RLock()
CHALLENGE_ENV = "HARNESS_CHALLENGE"
# what of a run's stdout a record keeps: all of it up to this many characters, else its head and tail (the logs
# have what the sandbox kept)
RAW_CHARS = 32_768


def bounded(text: str, limit: int = RAW_CHARS) -> tuple[str, int]:
    """``text`` whole when it has at most ``limit`` characters; else its first and last ``limit // 2`` around a
    line that says how many were left out. Also returns that number (0: nothing was)."""
    if len(text) <= limit:
        return text, 0
    half = limit // 2
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n[... {dropped:,} characters dropped ...]\n{text[-half:]}", dropped


def glob_to_regex(glob: str) -> re.Pattern[str]:
    """A repository-relative glob: ``**`` spans folders, ``*`` and ``?`` stay inside one; ``dir/`` means ``dir/**``."""
    glob = glob.strip().removeprefix("./")
    if glob.endswith("/"):
        glob += "**"
    out, i = "", 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
            continue
        if glob.startswith("**", i):
            out += ".*"
            i += 2
            continue
        out += "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c)
        i += 1
    return re.compile(f"^{out}(?:/.*)?$" if not glob.endswith("**") else f"^{out}$")


class SealedPaths:
    """Which repository paths are sealed (no candidate may change them)."""

    def __init__(self, globs: tuple[str, ...] | list[str]):
        self.globs = tuple(globs)
        self._patterns = [glob_to_regex(g) for g in self.globs]

    def match(self, path: str) -> bool:
        return any(p.match(path) for p in self._patterns)

    def filter(self, paths: list[str]) -> list[str]:
        return [p for p in paths if self.match(p)]


@dataclass
class SealedManifest:
    """SHA-256 of every sealed file at the baseline commit; the bytes are kept to restore them."""

    commit: str
    sealed: SealedPaths
    digests: dict[str, str] = field(default_factory=dict)
    _content: dict[str, bytes] = field(default_factory=dict, repr=False)

    @classmethod
    def take(cls, repo: GitRepo, commit: str, sealed: SealedPaths) -> SealedManifest:
        manifest = cls(commit=commit, sealed=sealed)
        for path in sealed.filter(repo.ls_tree(commit)):
            data = repo.show_bytes(commit, path)
            manifest.digests[path] = hashlib.sha256(data).hexdigest()
            manifest._content[path] = data
        return manifest

    def to_json(self) -> dict[str, object]:
        return {"commit": self.commit, "globs": list(self.sealed.globs), "sha256": dict(sorted(self.digests.items()))}

    def materialize(self, folder: Path) -> None:
        """Write the sealed files under ``folder`` (outside any worktree), the copies runs are given."""
        for path, data in self._content.items():
            target = folder / path
            if target.is_file() and not target.is_symlink() and target.read_bytes() == data:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            target.write_bytes(data)

    def overlays(self, folder: Path, worktree: Path) -> tuple[tuple[Path, str], ...]:
        """Each sealed file of :meth:`materialize`'s ``folder``, laid read-only over its path in ``worktree``."""
        return tuple((folder / path, str(worktree / path)) for path in sorted(self._content))

    def restore(self, worktree: Path, repo: GitRepo) -> None:
        """Put the baseline's sealed files back in ``worktree`` and remove sealed files it does not have.

        Links are replaced, never followed: a candidate that turned a sealed path into a link to a file
        of the user's must not have the harness write there.
        """
        listed = repo.git("ls-files", "--cached", "--others", cwd=worktree).stdout.splitlines()
        for path in self.sealed.filter(listed):
            if path not in self._content:
                (worktree / path).unlink(missing_ok=True)
        for path, data in self._content.items():
            target = worktree / path
            _refuse_links_above(worktree, target)
            if target.is_symlink() or not target.is_file() or target.read_bytes() != data:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                target.unlink(missing_ok=True)
                target.write_bytes(data)

    def altered(self, folder: Path) -> list[str]:
        """The manifest's files whose copy under ``folder`` is no longer theirs (changed, replaced or missing)."""
        bad = []
        for path, digest in self.digests.items():
            target = folder / path
            if target.is_symlink() or not target.is_file() or hashlib.sha256(target.read_bytes()).hexdigest() != digest:
                bad.append(path)
        return bad

    def verify(self, worktree: Path, repo: GitRepo) -> list[str]:
        """Sealed paths whose content in ``worktree`` differs from the manifest (added, changed or missing)."""
        bad = self.altered(worktree)
        listed = repo.git("ls-files", "--cached", "--others", cwd=worktree).stdout.splitlines()
        bad.extend(p for p in self.sealed.filter(listed) if p not in self.digests and (worktree / p).exists())
        return sorted(set(bad))


def _refuse_links_above(worktree: Path, target: Path) -> None:
    """A folder on the way to a sealed file that is a link would take the restore out of the worktree."""
    folder = target.parent
    while folder != worktree and worktree in folder.parents:
        if folder.is_symlink():
            folder.unlink()
        folder = folder.parent


def project_files(root: Path) -> list[str]:
    """The files of the project at ``root`` (the folder that holds goals/), relative to it: what git tracks
    or would track there, or, outside a repository, every file but those under .git and WORK."""
    try:
        repo = GitRepo.discover(root)
    except HarnessError:
        return [p.relative_to(root).as_posix() for p in root.rglob("*")
                if p.is_file() and p.relative_to(root).parts[0] not in (".git", "WORK")]
    listed = repo.git("ls-files", "--cached", "--others", "--exclude-standard", cwd=root).stdout.splitlines()
    # relative to the folder git runs in; a file deleted but not yet committed is gone
    return [path for path in dict.fromkeys(listed) if (root / path).is_file()]


def copy_sealed(sealed: SealedPaths, root: Path, folder: Path) -> None:
    """The sealed files of the project at ``root`` as they are now, copied under ``folder`` at their paths:
    what a check is given where there is no manifest (the pytest gate runs the checkout itself)."""
    for rel in sealed.filter(project_files(root)):
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, target)


def unsealed_files(command: str, sealed: SealedPaths, files: list[str]) -> list[str]:
    """The words of ``command`` that name a file of the project (``files``) that is not sealed."""
    known = set(files)
    words = (word.removeprefix("./") for word in command_argv(command))
    return [word for word in words if word in known and not sealed.match(word)]


def check_sealed_check(goal: Goal, files: list[str]) -> None:
    """The check must come from the sealed files: any file of the project it names is sealed."""
    if not goal.benchmark.check:
        return
    loose = unsealed_files(goal.benchmark.check, SealedPaths(goal.sealed_paths), files)
    if loose:
        raise HarnessConfigError(goal.path, "benchmark.check", f"runs {', '.join(loose)}, which is not sealed: a "
                                 "candidate could change what checks it", "list it under ## Sealed paths")


@dataclass
class RunOutcome:
    """One benchmark run: ``kind`` is ok, error, timeout, oom, parse_error or sealed. ``stdout``, ``stderr``,
    ``exit_code`` and the times are the measured run's; ``result`` and ``check_output`` the check's."""

    kind: str
    score: float | None = None
    sub_scores: dict[str, float] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    seconds: float = 0.0
    detail: str = ""
    cpu_ms: float = 0.0
    result: str | None = None
    check_output: str = ""
    dropped: dict[str, int] = field(default_factory=dict)
    leftovers: int = 0   # processes the run left behind, stopped when it ended

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def log_entry(self) -> str:
        """This run in the log: how it ended, then what the run and the check printed."""
        cut = "".join(f"[{stream}: {size} bytes dropped from the middle]\n" for stream, size in self.dropped.items()
                      if size)
        if self.leftovers:
            cut += f"[{self.leftovers} process(es) it left behind were stopped]\n"
        check = f"[check] {self.check_output}" if self.check_output else ""
        result = f"[result] {self.result}" if self.result else ""
        return (f"[{self.kind}] exit {self.exit_code} in {self.seconds:.2f}s, CPU {self.cpu_ms:.1f} ms {self.detail}\n"
                f"{cut}{self.stdout}{self.stderr}{check}{result}")


@dataclass(frozen=True)
class BenchmarkSite:
    """Where one benchmark run happens: a worktree (or the checkout), the sealed files laid over it
    read-only, the sealed files the check runs beside (``sealed_root``, at their repository paths), and
    whether the goal's held-back inputs are shown (only to the winner's confirmation)."""

    worktree: Path
    subdir: Path = Path(".")
    overlays: tuple[tuple[Path, str], ...] = ()
    held_back: bool = False
    sealed_root: Path | None = None


def command_argv(command: str) -> list[str]:
    """A goal's command line as argv: ``{python}`` is the interpreter running the harness."""
    return [part.replace("{python}", sys.executable) for part in shlex.split(command)]


def run_benchmark(goal_box: GoalSandbox, site: BenchmarkSite, *,
                  cancel: threading.Event | None = None) -> RunOutcome:
    """Run the goal's benchmark once: the measured run in the worktree, then the check beside the sealed
    files, each confined, both given the same fresh challenge; the score from the harness's measurement
    or the check's result."""
    goal = goal_box.goal
    spec = goal.benchmark
    challenge = secrets.token_hex(16)
    limits = goal_box.limits(spec.timeout_s)
    confinement = goal_box.confinement(site.worktree, cwd=site.worktree / site.subdir, overlays=site.overlays,
                                       held_back=site.held_back, env={CHALLENGE_ENV: challenge})
    with BENCHMARK_LOCK:
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt
        run = goal_box.box.run(command_argv(spec.command), confinement, limits, cancel=cancel)
        outcome = classify_run(spec, limits, run)
        if outcome.ok and spec.check:
            read_check(spec, outcome, _run_check(goal_box, site, run, challenge, limits, cancel))
    if outcome.ok:
        score(goal, outcome, run)
    return outcome


def _run_check(goal_box: GoalSandbox, site: BenchmarkSite, run: Finished, challenge: str, limits: Limits,
               cancel: threading.Event | None) -> Finished:
    spec = goal_box.goal.benchmark
    assert spec.check is not None
    if site.sealed_root is None:
        raise HarnessError(f"{goal_box.goal.path}: benchmark.check: this run was given no sealed files to check with")
    env = {CHALLENGE_ENV: challenge, "HARNESS_RUN_CPU_MS": f"{run.cpu_ms:.3f}",
           "HARNESS_RUN_WALL_MS": f"{run.wall_ms:.3f}"}
    confinement = goal_box.check_confinement(site.sealed_root, cwd=site.sealed_root / site.subdir,
                                             hide=(site.worktree,), env=env, held_back=site.held_back)
    return goal_box.box.run(command_argv(spec.check), confinement, limits, stdin=run.stdout, result_channel=True,
                            cancel=cancel)


def classify_run(spec: BenchmarkSpec, limits: Limits, run: Finished) -> RunOutcome:
    """How the measured run ended. A bound the run ran into explains a failure; a run that exited 0 is
    judged by its check."""
    outcome = RunOutcome("ok", stdout=run.stdout, stderr=run.stderr, exit_code=run.exit_code,
                         seconds=run.wall_ms / 1000.0, cpu_ms=run.cpu_ms, dropped=dict(run.dropped),
                         leftovers=run.leftovers)
    code, hit, bounds = run.exit_code, set(run.limits_hit), run.limit_problem(limits)
    tail = _last_line(run.stderr) or _last_line(run.stdout) or "no output"
    if run.timed_out or "time" in hit:
        outcome.kind, outcome.detail = "timeout", f"the benchmark ran longer than {spec.timeout_s:g} s and was stopped"
    elif code == 128 + signal.SIGXCPU:
        outcome.kind, outcome.detail = "timeout", "the benchmark used up its CPU time limit"
    elif code != 0 and "memory" in hit:
        outcome.kind, outcome.detail = "oom", f"the benchmark ran out of memory: it {bounds} (exit {code}: {tail})"
    elif code in (137, 128 + signal.SIGKILL):
        outcome.kind, outcome.detail = "oom", f"the benchmark was killed (exit {code}), most likely out of memory"
    elif code != 0:
        outcome.kind = "error"
        outcome.detail = f"the benchmark exited {code}: {tail}" + (f" (it {bounds})" if bounds else "")
    elif run.dropped.get("stdout") and spec.check:
        outcome.kind, outcome.detail = "error", f"the benchmark {bounds}: its check cannot read what it printed"
    return outcome


def read_check(spec: BenchmarkSpec, outcome: RunOutcome, check: Finished) -> None:
    """The check's verdict on the run: a check that fails (exits non-zero) fails the run with its reason."""
    outcome.check_output = check.stdout + check.stderr
    outcome.result = check.result if spec.result == "channel" else check.stdout
    if check.timed_out or "time" in check.limits_hit:
        outcome.kind, outcome.detail = "error", f"the check ran longer than {spec.timeout_s:g} s and was stopped"
    elif check.exit_code != 0:
        reason = _last_line(check.stderr) or _last_line(check.stdout) or f"it exited {check.exit_code}"
        outcome.kind, outcome.detail = "error", f"the check rejected the run's output: {reason}"


def score(goal: Goal, outcome: RunOutcome, run: Finished) -> None:
    """The score of a run that passed: the harness's own measurement (``score_from: cpu_time``/``wall_time``,
    with the metric as a sub-score unless the check reports one of that name) or the check's result."""
    spec = goal.benchmark
    text = outcome.result or ""
    try:
        if spec.measured:
            measured = round(run.cpu_ms if spec.score_from == "cpu_time" else run.wall_ms, 3)
            subs = parse_output(spec, text, need_score=False)[1] if spec.check and text.strip() else {}
            subs.setdefault(goal.metric.name, measured)
            outcome.score, outcome.sub_scores = measured, subs
            return
        if not text.strip() and spec.result == "stdout":
            raise ValueError("the check printed no result on its stdout")
        if not text.strip():
            hint = (" (it printed one on stdout: write it to the file named by HARNESS_RESULT_FILE, or set "
                    "'- result: stdout' in goal.md)" if _looks_like_a_result(spec, outcome.check_output) else "")
            raise ValueError(f"the check wrote no result to its channel (HARNESS_RESULT_FILE){hint}")
        found, outcome.sub_scores = parse_output(spec, text)
        assert found is not None
        outcome.score = found
    except ValueError as exc:
        outcome.kind, outcome.detail = "parse_error", str(exc)


def _looks_like_a_result(spec: BenchmarkSpec, text: str) -> bool:
    try:
        parse_output(spec, text)
    except ValueError:
        return False
    return True


def _last_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{what} is not a number: {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{what} is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} is not finite: {value!r}")
    return number


def parse_output(spec: BenchmarkSpec, text: str, *, need_score: bool = True) -> tuple[float | None, dict[str, float]]:
    """The score and sub-scores in the check's result (ValueError says what is missing); without
    ``need_score`` (the harness measures the score) a result may hold sub-scores alone."""
    if spec.parse == "json":
        for line in reversed(text.splitlines()):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(data, dict):
                continue
            if spec.score_key not in data and need_score:
                raise ValueError(f"the last JSON line has no {spec.score_key!r} key")
            found = _number(data[spec.score_key], spec.score_key) if spec.score_key in data else None
            subs_raw = data.get(spec.sub_scores_key) or {}
            if not isinstance(subs_raw, dict):
                raise ValueError(f"{spec.sub_scores_key!r} is not an object")
            subs = {str(k): _number(v, f"{spec.sub_scores_key}.{k}") for k, v in subs_raw.items()}
            return found, subs
        raise ValueError("no JSON object line in the check's result")
    found = None
    if spec.score_regex is not None:
        match = None
        for match in re.finditer(spec.score_regex, text, re.MULTILINE):
            pass
        if match is None and need_score:
            raise ValueError(f"score_regex {spec.score_regex!r} matched nothing in the check's result")
        found = _number(match.group(1), "score") if match is not None else None
    subs = {}
    for name, regex in spec.sub_score_regexes:
        sub = None
        for sub in re.finditer(regex, text, re.MULTILINE):
            pass
        if sub is None:
            raise ValueError(f"sub_score_regex.{name} matched nothing in the check's result")
        subs[name] = _number(sub.group(1), name)
    return found, subs
