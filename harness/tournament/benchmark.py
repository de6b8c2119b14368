"""The sealed benchmark: run the goal's command with a timeout, read its score, and make sure no
candidate can fool it (a SHA-256 manifest of the sealed paths, restored before every run)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.tournament.gitops import GitRepo
from harness.tournament.goal import BenchmarkSpec

# Benchmark runs take turns so that timings do not compete for the CPU (parallel executors still
# do their editing and model work at the same time).
BENCHMARK_LOCK = threading.Lock()
_ACTIVE: set[subprocess.Popen[str]] = set()
_ACTIVE_LOCK = threading.Lock()
_SECRET_ENV = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)


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

    def restore(self, worktree: Path, repo: GitRepo) -> None:
        """Put the baseline's sealed files back in ``worktree`` and remove sealed files it does not have."""
        listed = repo.git("ls-files", "--cached", "--others", cwd=worktree).stdout.splitlines()
        for path in self.sealed.filter(listed):
            if path not in self._content:
                (worktree / path).unlink(missing_ok=True)
        for path, data in self._content.items():
            target = worktree / path
            if not target.is_file() or target.read_bytes() != data:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)

    def verify(self, worktree: Path, repo: GitRepo) -> list[str]:
        """Sealed paths whose content in ``worktree`` differs from the manifest (added, changed or missing)."""
        bad = []
        for path, digest in self.digests.items():
            target = worktree / path
            if not target.is_file() or hashlib.sha256(target.read_bytes()).hexdigest() != digest:
                bad.append(path)
        listed = repo.git("ls-files", "--cached", "--others", cwd=worktree).stdout.splitlines()
        bad.extend(p for p in self.sealed.filter(listed) if p not in self.digests and (worktree / p).exists())
        return sorted(set(bad))


@dataclass
class RunOutcome:
    """One benchmark run: ``kind`` is ok, error, timeout, oom or parse_error."""

    kind: str
    score: float | None = None
    sub_scores: dict[str, float] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    seconds: float = 0.0
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def benchmark_argv(spec: BenchmarkSpec) -> list[str]:
    return [part.replace("{python}", sys.executable) for part in shlex.split(spec.command)]


def _clean_env(worktree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _SECRET_ENV.search(k)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["HARNESS_WORKTREE"] = str(worktree)
    env.pop("PYTHONPATH", None)
    return env


def run_benchmark(spec: BenchmarkSpec, worktree: Path, *, cancel: threading.Event | None = None) -> RunOutcome:
    """Run the benchmark command once in ``worktree`` and read its score."""
    argv = benchmark_argv(spec)
    started = time.monotonic()
    with BENCHMARK_LOCK:
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt
        try:
            proc = subprocess.Popen(argv, cwd=worktree, env=_clean_env(worktree), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as exc:
            return RunOutcome("error", detail=f"cannot start {argv[0]!r}: {exc.strerror or exc}")
        with _ACTIVE_LOCK:
            _ACTIVE.add(proc)
        try:
            stdout, stderr = proc.communicate(timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            stdout, stderr = proc.communicate()
            return RunOutcome("timeout", stdout=stdout, stderr=stderr, seconds=time.monotonic() - started,
                              detail=f"the benchmark ran longer than {spec.timeout_s:g} s and was stopped")
        except BaseException:
            _kill_group(proc)
            proc.communicate()
            raise
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE.discard(proc)
    if cancel is not None and cancel.is_set():
        raise KeyboardInterrupt
    seconds = time.monotonic() - started
    code = proc.returncode
    if code in (137, -signal.SIGKILL):
        return RunOutcome("oom", stdout=stdout, stderr=stderr, exit_code=code, seconds=seconds,
                          detail=f"the benchmark was killed (exit {code}), most likely out of memory")
    if code != 0:
        tail = _last_line(stderr) or _last_line(stdout) or "no output"
        return RunOutcome("error", stdout=stdout, stderr=stderr, exit_code=code, seconds=seconds,
                          detail=f"the benchmark exited {code}: {tail}")
    try:
        score, subs = parse_output(spec, stdout)
    except ValueError as exc:
        return RunOutcome("parse_error", stdout=stdout, stderr=stderr, exit_code=code, seconds=seconds,
                          detail=str(exc))
    return RunOutcome("ok", score=score, sub_scores=subs, stdout=stdout, stderr=stderr, exit_code=code,
                      seconds=seconds)


def kill_active() -> None:
    """Stop every benchmark still running (Ctrl-C: they run in their own sessions and miss SIGINT)."""
    with _ACTIVE_LOCK:
        procs = list(_ACTIVE)
    for proc in procs:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


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
