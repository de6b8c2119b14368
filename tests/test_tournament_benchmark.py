"""One run of a goal's sealed benchmark: the measured run and the sealed check, never in one process.

The measured run (``command``) runs the candidate's code and holds no result channel; the harness measures it
from outside. The check (``check``) sees the sealed files only, reads the run's stdout and writes the result to
the channel only it holds. Both get the same fresh challenge. Tests marked ``needs_sandbox`` check what only the
sandbox can keep apart; the others hold with or without it.
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from conftest import needs_sandbox
from harness.apps.tournament.benchmark import BenchmarkSite, RunOutcome, check_sealed_check, parse_output, run_benchmark
from harness.apps.tournament.confine import GoalSandbox
from harness.apps.tournament.testing import synth_goal_md
from harness.base.errors import HarnessConfigError
from harness.loading.goal import BenchmarkSpec
from harness.loading.goal_file import load_goal

# A check that turns the number the run printed into the score.
ECHO_CHECK = """\
    import json, os, sys
    printed = sys.stdin.read().split()
    with open(os.environ["HARNESS_RESULT_FILE"], "w") as out:
        out.write(json.dumps({"score": float(printed[-1]), "sub_scores": {"a": 1}}) + "\\n")
    """


def _site(tmp_path: Path, run: str, check: str | None = ECHO_CHECK, sandbox: str = "",
          **benchmark: str) -> tuple[GoalSandbox, BenchmarkSite]:
    """A goal in ``tmp_path/project`` whose measured run is ``run`` (run.py) and whose check is ``check`` (check.py,
    in the sealed copy ``tmp_path/sealed`` it is run from), with 10 s to run (a loaded machine starts Python
    slowly; only the timeout case asks for less). Without a check, ``benchmark`` must say where the score comes
    from. ``sandbox`` is added to the goal's ## Sandbox section."""
    project, sealed = tmp_path / "project", tmp_path / "sealed"
    (project / "goals" / "synth").mkdir(parents=True)
    sealed.mkdir()
    (project / "run.py").write_text(textwrap.dedent(run))
    lines = {"timeout": "10", **benchmark}
    if check is not None:
        (sealed / "check.py").write_text(textwrap.dedent(check))
        lines["check"] = "{python} check.py"
    fields = "".join(f"- {k}: {v}\n" for k, v in lines.items())
    md = synth_goal_md().replace("- command: {python} goals/synth/bench.py\n- timeout: 20\n"
                                 "- check: {python} goals/synth/check.py\n", f"- command: {{python}} run.py\n{fields}")
    path = project / "goals" / "synth" / "goal.md"
    path.write_text(md + sandbox)
    box = GoalSandbox(load_goal(path), project, project / ".git", project)
    return box, BenchmarkSite(project, sealed_root=sealed)


def _run(box_site: tuple[GoalSandbox, BenchmarkSite], cancel: threading.Event | None = None) -> RunOutcome:
    box, site = box_site
    return run_benchmark(box, site, cancel=cancel)


@pytest.mark.parametrize(("run", "check", "kind", "detail"), [
    ("print(3)", ECHO_CHECK, "ok", ""),
    ("print(3)", "import os; open(os.environ['HARNESS_RESULT_FILE'], 'w').write('no score here')", "parse_error",
     "no JSON object line in the check's result"),
    ("print(3)", "import os; open(os.environ['HARNESS_RESULT_FILE'], 'w').write('{\"score\": \"fast\"}')",
     "parse_error", "score is not a number"),
    ("print(3)", "print('{\"score\": 3}')", "parse_error",
     "the check wrote no result to its channel (HARNESS_RESULT_FILE) (it printed one on stdout"),
    ("import sys; sys.exit(3)", ECHO_CHECK, "error", "the benchmark exited 3"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", ECHO_CHECK, "oom", "most likely out of memory"),
    ("import sys; sys.exit(137)", ECHO_CHECK, "oom", "exit 137"),
    ("import time; time.sleep(30)", ECHO_CHECK, "timeout", "ran longer than 0.5 s"),
    ("print(2)", "import sys; print('wrong answer: 2 is not 3', file=sys.stderr); sys.exit(1)", "error",
     "the check rejected the run's output: wrong answer: 2 is not 3"),
])
def test_a_run_and_its_check_are_classified(tmp_path: Path, run: str, check: str, kind: str, detail: str) -> None:
    outcome = _run(_site(tmp_path, run, check, **({"timeout": "0.5"} if kind == "timeout" else {})))
    assert outcome.kind == kind and detail in outcome.detail, outcome
    if kind == "ok":
        assert outcome.score == 3 and outcome.sub_scores == {"a": 1.0}


def test_the_checks_stdout_is_read_when_the_goal_says_so(tmp_path: Path) -> None:
    outcome = _run(_site(tmp_path, "print(3)", "import sys; print('{\"score\": %s}' % sys.stdin.read().strip())",
                         result="stdout"))
    assert outcome.kind == "ok" and outcome.score == 3


def test_the_measured_run_holds_no_result_channel(tmp_path: Path) -> None:
    # the candidate's process looks for any way to write a result: the variables, and every descriptor it holds
    run = """\
        import json, os
        found = {k: v for k, v in os.environ.items() if k.startswith("HARNESS_RESULT")}
        fds = {}
        for fd in os.listdir("/proc/self/fd"):
            try:
                fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                pass
        print(json.dumps({"env": found, "fds": fds}))
        print(1)
        """
    outcome = _run(_site(tmp_path, run))
    assert outcome.kind == "ok", outcome
    seen = json.loads(outcome.stdout.splitlines()[0])
    assert seen["env"] == {}
    extra = {fd: target for fd, target in seen["fds"].items() if fd not in ("0", "1", "2")}
    # what is left is the folder listing itself, never a pipe the harness reads
    assert all("pipe:" not in target and "socket:" not in target for target in extra.values()), extra


def test_the_run_and_the_check_get_the_same_fresh_challenge(tmp_path: Path) -> None:
    run = "import os; print(os.environ['HARNESS_CHALLENGE'])"
    check = """\
        import json, os, sys
        same = sys.stdin.read().strip() == os.environ["HARNESS_CHALLENGE"]
        open(os.environ["HARNESS_RESULT_FILE"], "w").write(json.dumps({"score": int(same)}))
        """
    box_site = _site(tmp_path, run, check)
    first, second = _run(box_site), _run(box_site)
    assert first.score == second.score == 1
    assert len(first.stdout.strip()) == 32 and first.stdout != second.stdout


@needs_sandbox
def test_the_check_sees_the_sealed_files_and_nothing_of_the_candidates(tmp_path: Path) -> None:
    project = tmp_path / "project"
    run = """\
        open("candidate.txt", "w").write("the candidate's file")
        print(1)
        """
    check = f"""\
        import json, os, sys
        sys.stdin.read()
        seen = {{"worktree": os.path.exists({str(project)!r}),
                "its_file": os.path.exists({str(project / 'candidate.txt')!r}),
                "sealed": sorted(os.listdir(os.environ["HARNESS_SEALED"])),
                "writable": os.access(os.environ["HARNESS_SEALED"], os.W_OK),
                "worktree_env": "HARNESS_WORKTREE" in os.environ}}
        print(json.dumps(seen))
        open(os.environ["HARNESS_RESULT_FILE"], "w").write(json.dumps({{"score": 1}}))
        """
    outcome = _run(_site(tmp_path, run, check))
    assert outcome.kind == "ok", outcome
    assert (project / "candidate.txt").exists()  # the run wrote it, in its worktree
    assert json.loads(outcome.check_output.splitlines()[0]) == {
        "worktree": False, "its_file": False, "sealed": ["check.py"], "writable": False, "worktree_env": False}


def test_a_measured_score_is_the_harnesss_and_counts_background_work(tmp_path: Path) -> None:
    # the program hands its work to a child it never waits for, and prints a fast time of its own
    run = """\
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"])
        print('{"score": 0.001, "sub_scores": {"value": 0.001}}')
        time.sleep(0.6)
        """
    outcome = _run(_site(tmp_path, run, None, score_from="cpu_time", timeout="20"))
    assert outcome.kind == "ok", outcome
    assert outcome.score is not None and outcome.score > 100.0, outcome  # ms: the child's work counts
    assert outcome.sub_scores == {"value": outcome.score}  # the metric's name: what phase targets read


def test_a_measured_score_keeps_the_checks_sub_scores_and_its_own_metric(tmp_path: Path) -> None:
    check = """\
        import json, os, sys
        sys.stdin.read()
        spent = float(os.environ["HARNESS_RUN_WALL_MS"])
        open(os.environ["HARNESS_RESULT_FILE"], "w").write(json.dumps({"sub_scores": {"correct": 1, "spent": spent}}))
        """
    outcome = _run(_site(tmp_path, "print(1)", check, score_from="wall_time"))
    assert outcome.kind == "ok", outcome
    assert outcome.sub_scores["correct"] == 1 and outcome.sub_scores["value"] == outcome.score
    assert outcome.sub_scores["spent"] == pytest.approx(outcome.score, abs=0.01)  # the check was told the time


def test_output_the_check_cannot_read_whole_fails_the_run(tmp_path: Path) -> None:
    run = """\
        import sys
        sys.stdout.write("x" * 3_000_000 + "\\n3\\n")
        """
    outcome = _run(_site(tmp_path, run, sandbox="- output_kb: 64\n"))
    assert outcome.kind == "error" and "its check cannot read what it printed" in outcome.detail, outcome.detail
    assert len(outcome.stdout) <= 2 * 64 * 1024 + 1024  # what the harness holds of it: a head and a tail


def test_benchmark_secrets_reach_neither_the_run_nor_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("DB_PASS", "hunter2-hunter2")
    run = "import os; print(len(os.environ.get('ANTHROPIC_API_KEY', '') + os.environ.get('DB_PASS', '')))"
    check = """\
        import json, os, sys
        leaked = len(os.environ.get("ANTHROPIC_API_KEY", "") + os.environ.get("DB_PASS", ""))
        open(os.environ["HARNESS_RESULT_FILE"], "w").write(json.dumps({"score": float(sys.stdin.read()) + leaked}))
        """
    assert _run(_site(tmp_path, run, check)).score == 0


def test_a_check_that_runs_a_file_no_one_sealed_is_refused(tmp_path: Path) -> None:
    goal = load_goal(_site(tmp_path, "print(1)")[0].goal.path)
    sealed_check = goal.model_copy(update={"benchmark": goal.benchmark.model_copy(
        update={"check": f"{sys.executable} goals/synth/check.py"})})
    check_sealed_check(sealed_check, ["goals/synth/check.py", "goals/synth/bench.py"])  # sealed: fine
    loose = goal.model_copy(update={"benchmark": goal.benchmark.model_copy(
        update={"check": "{python} tools/verify.py --strict"})})
    with pytest.raises(HarnessConfigError, match=r"benchmark.check: runs tools/verify.py, which is not sealed: a "
                                                 r"candidate could change what checks it \(fix: list it under "
                                                 r"## Sealed paths\)"):
        check_sealed_check(loose, ["tools/verify.py", "goals/synth/check.py"])


def test_regex_scores() -> None:
    spec = BenchmarkSpec(command="x", check="y", parse="regex", score_regex=r"score=([0-9.]+)",
                         sub_score_regexes=(("speed", r"speed: ([0-9.]+)"),))
    assert parse_output(spec, "speed: 2\nscore=1.5\nscore=2.5\n") == (2.5, {"speed": 2.0})
    with pytest.raises(ValueError, match="sub_score_regex.speed matched nothing"):
        parse_output(spec, "score=1")
    measured = spec.model_copy(update={"score_regex": None, "score_from": "cpu_time"})
    assert parse_output(measured, "speed: 2\n", need_score=False) == (None, {"speed": 2.0})


def test_a_cancelled_run_stops(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(KeyboardInterrupt):
        _run(_site(tmp_path, "print(1)"), cancel)
