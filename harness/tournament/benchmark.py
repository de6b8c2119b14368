"""The sealed benchmark: run the goal's command confined, read its score from a channel the harness
opens, and make sure no candidate can fool it.

* A SHA-256 manifest of the sealed paths is taken at the baseline commit; every run gets the manifest's
  bytes laid read-only over the sealed paths of its worktree, never the candidate's.
* The score comes from the result channel (``HARNESS_RESULT_FD``), which must hold exactly one result,
  or, with ``score_from: cpu_time``, from the CPU time of the run measured from outside its sandbox.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import shutil
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from harness.sandbox import Finished
from harness.tournament.confine import GoalSandbox
from harness.tournament.gitops import GitRepo
from harness.tournament.goal import BenchmarkSpec

# Benchmark runs take turns so that timings do not compete for the CPU (parallel executors still
# do their editing and model work at the same time).
BENCHMARK_LOCK = threading.Lock()


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

    def verify(self, worktree: Path, repo: GitRepo) -> list[str]:
        """Sealed paths whose content in ``worktree`` differs from the manifest (added, changed or missing)."""
        bad = []
        for path, digest in self.digests.items():
            target = worktree / path
            if target.is_symlink() or not target.is_file() or hashlib.sha256(target.read_bytes()).hexdigest() != digest:
                bad.append(path)
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


@dataclass
class RunOutcome:
    """One benchmark run: ``kind`` is ok, error, timeout, oom, parse_error, sealed or tampered."""

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

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def raw(self) -> str:
        """The output the score was read from: the result channel's, else stdout."""
        return self.result if self.result is not None else self.stdout


@dataclass(frozen=True)
class BenchmarkSite:
    """Where one benchmark run happens: a worktree (or the checkout), the sealed files laid over it
    read-only, and whether the goal's held-back inputs are shown (only to the winner's confirmation)."""

    worktree: Path
    subdir: Path = Path(".")
    overlays: tuple[tuple[Path, str], ...] = ()
    held_back: bool = False


def benchmark_argv(spec: BenchmarkSpec) -> list[str]:
    return [part.replace("{python}", sys.executable) for part in shlex.split(spec.command)]


def run_benchmark(goal_box: GoalSandbox, site: BenchmarkSite, *,
                  cancel: threading.Event | None = None) -> RunOutcome:
    """Run the goal's benchmark once, confined, and read its score from the channel the harness opened."""
    spec = goal_box.goal.benchmark
    argv = benchmark_argv(spec)
    confinement = goal_box.confinement(site.worktree, cwd=site.worktree / site.subdir, overlays=site.overlays,
                                       held_back=site.held_back)
    with BENCHMARK_LOCK:
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt
        run = goal_box.box.run(argv, confinement, goal_box.limits(spec.timeout_s), result_channel=True,
                               cancel=cancel)
    return classify(spec, run)


def classify(spec: BenchmarkSpec, run: Finished) -> RunOutcome:
    """What one run of the benchmark came to, and its score."""
    seconds = run.wall_ms / 1000.0
    outcome = RunOutcome("ok", stdout=run.stdout, stderr=run.stderr, exit_code=run.exit_code, seconds=seconds,
                         cpu_ms=run.cpu_ms, result=run.result)
    code = run.exit_code
    if run.timed_out:
        outcome.kind, outcome.detail = "timeout", f"the benchmark ran longer than {spec.timeout_s:g} s and was stopped"
        return outcome
    if code in (137, 128 + signal.SIGKILL):
        outcome.kind = "oom"
        outcome.detail = f"the benchmark was killed (exit {code}), most likely out of memory"
        return outcome
    if code == 128 + signal.SIGXCPU:
        outcome.kind, outcome.detail = "timeout", "the benchmark used up its CPU time limit"
        return outcome
    if code != 0:
        tail = _last_line(run.stderr) or _last_line(run.stdout) or "no output"
        outcome.kind, outcome.detail = "error", f"the benchmark exited {code}: {tail}"
        return outcome
    try:
        score, subs = read_score(spec, run)
    except Tampered as exc:
        outcome.kind, outcome.detail = "tampered", str(exc)
        return outcome
    except ValueError as exc:
        outcome.kind, outcome.detail = "parse_error", str(exc)
        return outcome
    outcome.score, outcome.sub_scores = score, subs
    return outcome


class Tampered(ValueError):
    """The result channel holds more than the benchmark's one result: other code wrote to it."""


def read_score(spec: BenchmarkSpec, run: Finished) -> tuple[float, dict[str, float]]:
    """The score and sub-scores of a finished run, by the goal's ``result`` and ``score_from``."""
    if spec.result == "channel":
        text = run.result or ""
        if not text.strip() and spec.score_from == "output":
            hint = (" (it printed a result on stdout, which any code the benchmark imports can print too: write it "
                    "to the file named by HARNESS_RESULT_FILE, or set '- result: stdout' in goal.md to trust stdout)"
                    if _looks_like_a_result(spec, run.stdout) else "")
            raise ValueError(f"the benchmark wrote nothing to its result channel (HARNESS_RESULT_FD){hint}")
        results = _results_in(spec, text)
        if results > 1:
            raise Tampered(f"the result channel received {results} results where the benchmark "
                           "writes one: code the benchmark imported wrote to it too")
    else:
        text = run.stdout
    measured = {"cpu_time": run.cpu_ms, "wall_time": run.wall_ms}.get(spec.score_from)
    if measured is not None:
        subs = parse_output(spec, text)[1] if text.strip() else {}
        return round(measured, 3), subs
    return parse_output(spec, text)


def _results_in(spec: BenchmarkSpec, text: str) -> int:
    if spec.parse == "regex":
        assert spec.score_regex is not None
        return len(re.findall(spec.score_regex, text, re.MULTILINE))
    count = 0
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                count += isinstance(json.loads(line), dict)
            except json.JSONDecodeError:
                continue
    return count


def _looks_like_a_result(spec: BenchmarkSpec, stdout: str) -> bool:
    try:
        parse_output(spec, stdout)
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


def parse_output(spec: BenchmarkSpec, stdout: str) -> tuple[float, dict[str, float]]:
    """The score and sub-scores in the benchmark's output (ValueError says what is missing)."""
    if spec.parse == "json":
        for line in reversed(stdout.splitlines()):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(data, dict):
                continue
            if spec.score_key not in data:
                raise ValueError(f"the last JSON line has no {spec.score_key!r} key")
            score = _number(data[spec.score_key], spec.score_key)
            subs_raw = data.get(spec.sub_scores_key) or {}
            if not isinstance(subs_raw, dict):
                raise ValueError(f"{spec.sub_scores_key!r} is not an object")
            subs = {str(k): _number(v, f"{spec.sub_scores_key}.{k}") for k, v in subs_raw.items()}
            return score, subs
        raise ValueError("no JSON object line in the benchmark's output")
    assert spec.score_regex is not None
    match = None
    for match in re.finditer(spec.score_regex, stdout, re.MULTILINE):
        pass
    if match is None:
        raise ValueError(f"score_regex {spec.score_regex!r} matched nothing in the output")
    score = _number(match.group(1), "score")
    subs = {}
    for name, regex in spec.sub_score_regexes:
        sub = None
        for sub in re.finditer(regex, stdout, re.MULTILINE):
            pass
        if sub is None:
            raise ValueError(f"sub_score_regex.{name} matched nothing in the output")
        subs[name] = _number(sub.group(1), name)
    return score, subs
