"""Helpers for tournament tests: real git repositories in a temporary folder.

``goal_repo(tmp_path, ...)`` writes a tiny goal (``goals/synth``): its measured run prints ``VALUE`` from
``goals/synth/app/value.py``, and its sealed check turns what the run printed into the score, adding
Gaussian noise of the given size; ideas are one-line diffs of that value. ``demo_repo(tmp_path)`` copies the
shipped demo goal into a fresh repo.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

GITIGNORE = "WORK/\ntracking/*\n!tracking/README.md\n__pycache__/\n.pytest_cache/\n"

SYNTH_BENCH = '''\
"""The measured run of goals/synth: prints VALUE (and whether it runs at a merge commit, when asked)."""
import os, subprocess, sys, time
sys.path.insert(0, "goals/synth/app")
import value

time.sleep(float(os.environ.get("SYNTH_BENCH_SLEEP", "0")))  # tests slow it down to interrupt a run

print("benchmark of goals/synth")
print(f"value: {{value.VALUE!r}}")
if {regress}:
    second_parent = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD^2"], capture_output=True)
    print(f"merge commit: {{'yes' if second_parent.returncode == 0 else 'no'}}")
'''

SYNTH_CHECK = '''\
"""The sealed check of goals/synth: the value the run printed plus Gaussian noise, 100 less at a merge commit."""
import json, os, random, re, sys

NOISE = {noise}
printed = sys.stdin.read()
found = re.search(r"^value: (.+)$", printed, re.MULTILINE)
if found is None:
    print("the run printed no value", file=sys.stderr)
    sys.exit(1)
counter = os.environ.get("SYNTH_NOISE_COUNTER")  # a file: the n-th check draws from Random(n), reproducibly
if counter:
    n = int(open(counter).read() or 0) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    rng = random.Random(n)
else:
    rng = random.Random()
score = float(found.group(1)) + (rng.gauss(0.0, NOISE) if NOISE else 0.0)
if "merge commit: yes" in printed:
    score -= 100.0
with open(os.environ["HARNESS_RESULT_FILE"], "w") as channel:
    channel.write(json.dumps({{"score": score, "sub_scores": {{"value": score, "ok": 1}}}}) + "\\n")
'''


def synth_goal_md(*, executors: int = 3, noise_runs: int = 3, confirm_pairs: int = 4, post_merge_runs: int = 1,
                  min_effect: float = 2.0, significance: str = "mann_whitney", extra: str = "",
                  writable: Path | None = None) -> str:
    """The synthetic goal; its sandbox passes the SYNTH_* variables the tests set, and ``writable`` (the
    folder of the SYNTH_NOISE_COUNTER file, which the check counts its runs in) is writable in it."""
    return textwrap.dedent(f"""\
        # Raise the value

        ## Objective
        Raise VALUE in goals/synth/app/value.py.

        ## Metric
        - name: value
        - direction: maximize

        ## Benchmark
        - command: {{python}} goals/synth/bench.py
        - timeout: 20
        - check: {{python}} goals/synth/check.py

        ## Sealed paths
        - goals/synth/bench.py
        - goals/synth/check.py
        - goals/synth/goal.md

        ## Phases
        | Phase | Focus | Sub-Score Targets | Status |
        |-------|-------|-------------------|--------|
        | phase_1 | Works | ok >= 1 | active |
        | phase_2 | High | value >= 15 | pending |

        ## Agents
        - planners: 0
        - executors: {executors}

        ## Acceptance
        - noise_runs: {noise_runs}
        - candidate_runs: 1
        - confirm_pairs: {confirm_pairs}
        - min_effect: {min_effect}
        - significance: {significance}
        - post_merge_runs: {post_merge_runs}

        ## Sandbox
        - env: SYNTH_NOISE_COUNTER, SYNTH_BENCH_SLEEP
        """) + (f"- write: {writable}\n" if writable else "") + extra


def value_idea(name: str, family: str, old: float, new: float, *, hypothesis: str | None = None,
               path: str = "goals/synth/app/value.py", body: str | None = None) -> str:
    new_line = body if body is not None else f"VALUE = {new!r}"
    return textwrap.dedent(f"""\
        # {name}

        - approach_family: {family}
        - hypothesis: {hypothesis or f'Setting VALUE to {new} should raise the value because the benchmark reads it.'}

        ## Diff
        ```diff
        --- a/{path}
        +++ b/{path}
        @@ -1 +1 @@
        -VALUE = {old!r}
        +{new_line}
        ```
        """)


def git(root: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def init_repo(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    git(root, "config", "commit.gpgsign", "false")
    (root / ".gitignore").write_text(GITIGNORE)


def commit_all(root: Path, message: str = "init") -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def goal_repo(root: Path, *, ideas: dict[str, str], value: float = 10.0, noise: float = 0.0,
              regress_on_merge: bool = False, goal_md: str | None = None) -> Path:
    """A committed repository with goals/synth; returns the goal folder."""
    init_repo(root)
    goal = root / "goals" / "synth"
    (goal / "app").mkdir(parents=True)
    (goal / "app" / "value.py").write_text(f"VALUE = {value!r}\n")
    (goal / "bench.py").write_text(SYNTH_BENCH.format(regress=regress_on_merge))
    (goal / "check.py").write_text(SYNTH_CHECK.format(noise=noise))
    (goal / "goal.md").write_text(goal_md or synth_goal_md())
    (goal / "ideas").mkdir()
    for name, text in ideas.items():
        (goal / "ideas" / name).write_text(text)
    commit_all(root)
    return goal


def demo_repo(root: Path, source: Path) -> Path:
    """A fresh repository holding a copy of the shipped demo goal ``source`` (goals/demo_primes)."""
    init_repo(root)
    shutil.copytree(source, root / "goals" / source.name,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    commit_all(root)
    return root / "goals" / source.name


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def change_diff(root: Path, changes: dict[str, str]) -> str:
    """A unified diff (``git apply``'s input) that turns each file of ``root`` into its text in ``changes``;
    a file ``root`` does not have is created."""
    out: list[str] = []
    for rel, new in changes.items():
        path = root / rel
        old = path.read_text().splitlines(keepends=True) if path.exists() else []
        out.extend(difflib.unified_diff(old, new.splitlines(keepends=True), f"a/{rel}" if old else "/dev/null",
                                        f"b/{rel}"))
    return "".join(out)


def diff_idea(title: str, family: str, hypothesis: str, diff: str) -> str:
    """An idea file carrying ``diff``."""
    return f"# {title}\n\n- approach_family: {family}\n- hypothesis: {hypothesis}\n\n## Diff\n```diff\n{diff}```\n"


# what differs between two runs that made the same decisions: when, and the hashes of commits made at another time
_VOLATILE = {"timestamp", "started_at", "updated_at", "completed_at", "commit", "merge_commit", "revert_commit",
             "base_commit"}


def without_times(data: Any) -> Any:
    """``data`` without its times and commit hashes, at any depth."""
    if isinstance(data, dict):
        return {k: without_times(v) for k, v in data.items() if k not in _VOLATILE}
    if isinstance(data, list):
        return [without_times(v) for v in data]
    return data


def synth_records(root: Path, *, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every record of a run of ``goals/synth`` in the repository ``root`` but the sealed manifests (and the files
    named in ``leave_out``, relative to its self-improve folder), without times and commit hashes: what two runs of
    the same decisions share (a worker's commit of the same change is another hash)."""
    base = root / "WORK" / "improve" / "synth"
    out = {str(p.relative_to(base)): without_times(load(p)) for p in sorted(base.rglob("*.json"))
           if p.parts[-2] != "sealed" and str(p.relative_to(base)) not in leave_out}
    for name in ("raw_data.json", "events.json"):
        path = root / "tracking" / name
        out[name] = without_times(load(path)) if path.exists() else None
    return out
