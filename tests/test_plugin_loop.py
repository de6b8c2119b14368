"""The produce-evaluate-revise loop as a user sees it: outcomes, exit codes, records, runners and hooks."""

from __future__ import annotations

import json

import pytest

from conftest import PYTHON, Project


def one_case(text: str, *, case_id: str = "greet", extra: str = "") -> str:
    return f"""\
agent: writer
cases:
  - id: {case_id}
    inputs: {{text: "{text}"}}
{extra}"""


def agents(*, reviser: str | None = "agentlib:revise", producer: str = "{python: \"agentlib:produce\"}",
           defaults: str = "", **policy: object) -> str:
    lines = [defaults, "agents:", "  writer:", "    rubric: quality", f"    producer: {producer}"]
    if reviser:
        lines.append(f'    reviser: {{python: "{reviser}"}}')
    for key, value in policy.items():
        lines.append(f"    {key}: {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def test_passes_on_the_first_attempt(project: Project) -> None:
    project.standard(one_case("hello there"))
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "suites/writer.cases.yaml::greet PASSED*",
        "*= harness summary =*",
        "cycle *-001 - records in *WORK",
        "rubric * items * passed * pass rate * mean score * mean attempts * tokens in/out * cost",
        "quality * 1 * 1 * 100% * 1.000 * 1.0 * 0/0 * $0.0000",
    ])
    (row,) = project.rows()
    assert (row["agent_name"], row["attempt"], row["status"], row["overall_score"]) == ("writer", 1, "passed", 1.0)
    folder = project.cycle_dir() / "writer"
    assert (folder / "final.md").read_text() == (folder / "attempt-1.md").read_text() == "hello there"


def test_fails_then_passes_after_the_reviser_applies_the_fixes(project: Project) -> None:
    project.standard(one_case("goodbye friend"))
    project.agents(agents(reviser="agentlib:spy_revise"))
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["quality * 1 * 1 * 100% * 1.000 * 2.0 *"])

    first, second = project.rows()
    assert (first["attempt"], first["status"], first["overall_score"]) == (1, "failed", 0.4)
    assert (second["attempt"], second["status"], second["overall_score"]) == (2, "passed", 1.0)
    folder = project.cycle_dir() / "writer"
    assert (folder / "attempt-1.md").read_text() == "goodbye friend"
    assert (folder / "attempt-2.md").read_text() == "hello goodbye friend"
    assert (folder / "final.md").read_text() == "hello goodbye friend"

    # The reviser saw the artifact, the evaluation and the suggested fixes of attempt 1.
    (request,) = [json.loads(line) for line in (project.root / "revise-requests.jsonl").read_text().splitlines()]
    assert request["role"] == "reviser" and request["attempt"] == 2 and request["case"] == "greet"
    assert request["artifact"] == "goodbye friend"
    assert request["suggested_fixes"] == ["Add 'hello'"]
    assert request["evaluation"]["overallScore"] == 0.4
    assert request["evaluation"]["dimensionScores"]["greeting"]["score"] == 0.0


def test_a_case_that_can_never_pass_exits_1_and_records_every_attempt(project: Project) -> None:
    project.standard(one_case("goodbye friend"))
    project.agents(agents(reviser="agentlib:stubborn", max_attempts=3))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert result.ret == 1

    cycle = project.cycles()[0]
    rows = project.runs()
    assert [(r["attempt"], r["status"], r["overall_score"]) for r in rows] == [
        (1, "failed", 0.4), (2, "failed", 0.4), (3, "escalated", 0.4)]
    assert [r["outcome"] for r in rows] == ["failed", "failed", "escalated"]
    log = project.run_log()
    assert [(e["attempt"], e["status"]) for e in log] == [(1, "failed"), (2, "failed"), (3, "escalated")]
    folder = project.cycle_dir() / "writer"
    for n in (1, 2, 3):
        assert (folder / f"attempt-{n}.md").read_text() == "goodbye friend"
        assert json.loads((folder / f"attempt-{n}.eval.json").read_text())["overallScore"] == 0.4
    assert not (folder / "final.md").exists()

    # The failure shows each dimension (score, weight, reason), the fixes and the artifact paths.
    result.stdout.fnmatch_lines([
        "writer[greet] ESCALATED after 3 attempts: below threshold 0.80 after 3 attempts",
        "*dimension*score*weight*reason",
        "*greeting*0.00*0.60*0/1 required phrases present; missing: 'hello'",
        "*concise*1.00*0.40*2 words (max 12)",
        "*overall*0.40*threshold 0.80*",
        "*suggested fixes:",
        "*- Add 'hello'",
        "*artifacts:",
        f"*attempt 1 (failed, 0.40): WORK/runs/{cycle}/writer/attempt-1.md",
        f"*attempt 2 (failed, 0.40): WORK/runs/{cycle}/writer/attempt-2.md",
        f"*attempt 3 (escalated, 0.40): WORK/runs/{cycle}/writer/attempt-3.md",
    ])
    result.stdout.fnmatch_lines(["FAILED suites/writer.cases.yaml::greet*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(("escalate", "status", "headline"), [
    (True, "escalated", "writer[greet] ESCALATED after 2 attempts: below threshold 0.80 after 2 attempts"),
    (False, "failed", "writer[greet] FAILED after 2 attempts: overall 0.40 < threshold 0.80"),
])
def test_escalate_on_fail(project: Project, escalate: bool, status: str, headline: str) -> None:
    project.standard(one_case("goodbye"))
    project.agents(agents(reviser="agentlib:stubborn", max_attempts=2, escalate_on_fail=escalate))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines([headline])
    assert [r["status"] for r in project.rows()] == ["failed", status]
    assert project.run_log()[-1]["status"] == status


def test_escalation_need_not_fail_the_gate(project: Project) -> None:
    project.standard(one_case("goodbye"))
    project.agents(agents(reviser="agentlib:stubborn", max_attempts=2,
                          defaults="defaults:\n  escalation_fails_gate: false\n"))
    result = project.run("suites/", "-rx")
    result.assert_outcomes(xfailed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["XFAIL *greet*escalated: below threshold 0.80 after 2 attempts*"])
    assert [r["status"] for r in project.rows()] == ["failed", "escalated"]


@pytest.mark.parametrize("how", ["case flags", "producer flags"])
def test_an_escalate_condition_escalates_even_a_passing_artifact(project: Project, how: str) -> None:
    if how == "case flags":
        project.standard(one_case("hello there", extra="    flags: [exec_level_partner]\n"))
        project.agents(agents(escalate_conditions=["exec_level_partner"]))
    else:
        project.standard("""\
agent: writer
cases:
  - id: greet
    inputs: {text: "hello there", raise: [exec_level_partner]}
""")
        project.agents(agents(producer='{python: "agentlib:flagged"}', escalate_conditions=["exec_level_partner"]))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["writer[greet] ESCALATED after 1 attempt: escalate condition raised: exec_level_partner"])
    (row,) = project.runs()
    assert (row["status"], row["outcome"], row["overall_score"]) == ("escalated", "escalated", 1.0)
    assert (project.cycle_dir() / "writer" / "attempt-1.md").read_text() == "hello there"


def test_a_flag_that_is_not_an_escalate_condition_is_ignored(project: Project) -> None:
    project.standard(one_case("hello there", extra="    flags: [something_else]\n"))
    project.agents(agents(escalate_conditions=["exec_level_partner"]))
    project.run("suites/").assert_outcomes(passed=1)


@pytest.mark.parametrize(("text", "outcome", "status"), [
    ("hello there", "passed", "passed"),  # 1.00 clears 0.50 by 0.50
    ("hello " + "word " * 12, "failed", "escalated"),  # 0.60 clears 0.50 by only 0.10
])
def test_borderline_margin(project: Project, text: str, outcome: str, status: str) -> None:
    project.standard(one_case(text.strip()))
    project.agents(agents(threshold=0.5, borderline_margin=0.15))
    result = project.run("suites/")
    result.assert_outcomes(**{outcome: 1})
    assert [r["status"] for r in project.rows()] == [status]
    if status == "escalated":
        result.stdout.fnmatch_lines([
            "*ESCALATED after 1 attempt: score 0.60 clears threshold 0.50 by less than borderline_margin 0.15*"])


@pytest.mark.parametrize("max_attempts", [1, 2, 4])
def test_max_attempts_bounds_the_loop(project: Project, max_attempts: int) -> None:
    project.standard(one_case("goodbye"))
    project.agents(agents(reviser="agentlib:stubborn", max_attempts=max_attempts))
    project.run("suites/").assert_outcomes(failed=1)
    assert [r["attempt"] for r in project.rows()] == list(range(1, max_attempts + 1))
    assert len(project.run_log()) == max_attempts


def test_without_a_reviser_there_is_one_attempt(project: Project) -> None:
    project.standard(one_case("goodbye"))
    project.agents(agents(reviser=None, max_attempts=3))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ESCALATED after 1 attempt*(no reviser configured, so no revision was tried)*"])
    assert [r["attempt"] for r in project.rows()] == [1]


def test_command_runners_get_the_request_as_json_on_stdin(project: Project) -> None:
    project.standard(one_case("goodbye"))
    project.write("produce_cmd.py", """\
        import json, sys
        request = json.load(sys.stdin)
        with open(f"out/{request['role']}-request.json", "w") as handle:
            json.dump(request, handle)
        print("goodbye" if request["role"] == "producer" else "hello " + request["artifact"].strip())
        """)
    (project.root / "out").mkdir()
    command = f'{{command: "{PYTHON} produce_cmd.py", write: [out]}}'  # the project is read-only but for out/
    project.agents(f"""\
agents:
  writer:
    rubric: quality
    producer: {command}
    reviser: {command}
""")
    result = project.run("suites/")
    result.assert_outcomes(passed=1)
    producer = json.loads((project.root / "out" / "producer-request.json").read_text())
    assert producer == {"agent": "writer", "case": "greet", "inputs": {"text": "goodbye"}, "role": "producer",
                        "attempt": 1}
    reviser = json.loads((project.root / "out" / "reviser-request.json").read_text())
    assert reviser["role"] == "reviser" and reviser["attempt"] == 2
    assert reviser["artifact"] == "goodbye\n" and reviser["suggested_fixes"] == ["Add 'hello'"]
    assert (project.cycle_dir() / "writer" / "final.md").read_text() == "hello goodbye\n"


def test_a_failing_command_ends_as_an_error_with_one_line(project: Project) -> None:
    project.standard(one_case("hello"))
    project.write("fail_cmd.py", "import sys\nsys.stderr.write('warming up\\nboom: no input file\\n')\nsys.exit(3)\n")
    project.agents(agents(producer=f'{{command: "{PYTHON} fail_cmd.py"}}'))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        f"writer[greet] ERROR on attempt 1: producer command exited 3 (incomplete): {PYTHON} fail_cmd.py: boom: no "
        "input file"])
    assert "Traceback" not in result.stdout.str()
    (row,) = project.runs()
    assert (row["status"], row["outcome"], row["overall_score"]) == ("escalated", "error", None)
    assert row["exit_code"] == 3  # the command's own code, not a flattened 1
    assert "producer command exited 3" in row["feedback"]
    assert not (project.cycle_dir() / "writer" / "attempt-1.md").exists()


def test_a_python_producer_that_raises_shows_the_users_frames_not_ours(project: Project) -> None:
    project.standard(one_case("hello"))
    project.write("crashy.py", "def helper(inputs):\n    return inputs['missing']\n\n\n"
                               "def produce(request):\n    return helper(request['inputs'])\n")
    project.agents(agents(producer='{python: "crashy:produce"}'))
    result = project.run("suites/")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "writer[greet] ERROR on attempt 1: producer crashy:produce raised KeyError: 'missing'",
        "  crashy.py:6 in produce",
        "      return helper(request['inputs'])",
        "  crashy.py:2 in helper",
        "      return inputs['missing']",
        "  artifacts:",
        "    attempt 1 (error, -): none (the attempt made no artifact)"])
    out = result.stdout.str()
    assert "Traceback" not in out and "harness/evaluation/runners.py" not in out and "escalated" not in out
    (row,) = project.runs()
    assert (row["outcome"], row["artifact_path"]) == ("error", "")
    assert not (project.cycle_dir() / "writer" / "attempt-1.md").exists()


CUSTOM_KIND_CONFTEST = """\
from harness.evaluation.runners import RunnerOutput


class Shout:
    def __init__(self, spec, role):
        self.spec, self.role = spec, role

    def run(self, request):
        word = self.spec.options.get("word", "hello")
        if self.role == "producer":
            return RunnerOutput(text=f"{self.spec.target} {request['inputs']['text']}")
        return RunnerOutput(text=f"{word} {request['artifact']}")


def pytest_harness_runner_kinds():
    return ["shout"]


def pytest_harness_make_runner(spec, role, agent, config):
    if spec.kind == "shout":
        return Shout(spec, role)
    return None
"""


def test_a_custom_runner_kind_from_a_conftest(project: Project) -> None:
    project.standard(one_case("world"))
    project.write("conftest.py", CUSTOM_KIND_CONFTEST)
    project.agents("""\
agents:
  writer:
    rubric: quality
    producer: {shout: "goodbye"}
    reviser: {kind: shout, target: unused, word: hello}
""")
    result = project.run("suites/", "-v")
    result.assert_outcomes(passed=1)
    folder = project.cycle_dir() / "writer"
    assert (folder / "attempt-1.md").read_text() == "goodbye world"
    assert (folder / "attempt-2.md").read_text() == "hello goodbye world"
    assert [r["status"] for r in project.rows()] == ["failed", "passed"]


ATTEMPT_HOOK_CONFTEST = """\
import json


def pytest_harness_attempt_finished(record, details):
    with open("attempts.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"record": record, "details": details}) + "\\n")
"""


def test_the_attempt_finished_hook_is_called_once_per_attempt(project: Project) -> None:
    project.standard("""\
agent: writer
cases:
  - id: first-try
    inputs: {text: "hello"}
  - id: second-try
    inputs: {text: "goodbye"}
""")
    project.write("conftest.py", ATTEMPT_HOOK_CONFTEST)
    project.run("suites/").assert_outcomes(passed=2)
    calls = [json.loads(line) for line in (project.root / "attempts.jsonl").read_text().splitlines()]
    seen = sorted((c["details"]["case_id"], c["record"]["attempt"], c["record"]["status"]) for c in calls)
    assert seen == [("first-try", 1, "passed"), ("second-try", 1, "failed"), ("second-try", 2, "passed")]
    assert all(c["record"]["cycle_id"] == project.cycles()[0] for c in calls)
    assert len(calls) == len(project.rows()) == len(project.run_log()) == 3


def test_summary_per_rubric_with_pass_rate_mean_score_and_attempts(project: Project) -> None:
    project.standard("""\
agent: writer
cases:
  - id: a
    inputs: {text: "hello"}
  - id: b
    inputs: {text: "goodbye"}
  - id: c
    inputs: {text: "hello hello hello hello hello hello hello hello hello hello hello hello hello"}
""")
    project.agents(agents(reviser="agentlib:stubborn", max_attempts=2))
    result = project.run("suites/")
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == 1
    # a: 1.0 in 1 attempt; b: 0.4 in 2; c: 0.6 in 2 -> pass rate 1/3, mean 0.667, mean attempts 1.7
    result.stdout.fnmatch_lines([
        "*= harness summary =*",
        "*",
        "rubric * items * passed * pass rate * mean score * mean attempts*",
        "quality * 3 * 1 * 33% * 0.667 * 1.7 *",
        "quality: 2 escalated to a human",
    ])
