"""The tournament's parts on their own: statistics, sealed paths, critic, schemas (benchmark runs:
test_tournament_benchmark.py)."""

from __future__ import annotations

import json
import math
import sys
import threading
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest
from jsonschema import Draft202012Validator

from harness.apps.tournament import critic, schemas
from harness.apps.tournament.benchmark import SealedManifest, SealedPaths
from harness.apps.tournament.confine import GoalSandbox
from harness.apps.tournament.costs import cost_record, cost_said, no_cost, total_cost
from harness.apps.tournament.executors import ModelExecutor
from harness.apps.tournament.gitops import GitRepo
from harness.apps.tournament.ideas import list_ideas
from harness.apps.tournament.testing import goal_repo, synth_goal_md
from harness.base import stats
from harness.base.jsonschemas import contract, contract_errors
from harness.base.usage import Spend, Usage
from harness.loading.goal_file import load_goal

DEMO = Path(__file__).resolve().parent.parent / "goals" / "demo_primes"

# ---------------------------------------------------------------------------------------------- statistics


def test_mann_whitney_exact_and_with_ties() -> None:
    assert stats.mann_whitney_p([5, 6, 7, 8, 9], [0, 1, 2, 3, 4]) == pytest.approx(1 / math.comb(10, 5))
    assert stats.mann_whitney_p([1, 1, 1], [1, 1, 1]) == 1.0
    assert stats.mann_whitney_p([0, 1, 2], [5, 6, 7]) == 1.0
    big = stats.mann_whitney_p([x + 0.5 for x in range(30)], list(range(30)))  # normal approximation
    assert 0.2 < big < 0.6


def test_spread() -> None:
    assert stats.spread([10.0]) == stats.spread([10.0, 10.0, 10.0]) == 0.0
    assert stats.spread([9.0, 10.0, 11.0]) == pytest.approx(1.0)


def test_decide_needs_both_the_minimum_effect_and_significance() -> None:
    base, noisy = [10.0, 10.2, 9.8, 10.1, 9.9], [10.1, 10.3, 9.9, 10.2, 10.0]
    small = stats.decide(base, noisy, noise_spread=0.2, min_effect_multiple=2.0, test="mann_whitney", alpha=0.05)
    assert not small.accepted and small.decided_by == "min_effect" and "within the measured noise" in small.reason
    tight = stats.decide([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], noise_spread=0.0, min_effect_multiple=2.0,
                         test="mann_whitney", alpha=0.05)
    assert not tight.accepted and tight.decided_by == "mann_whitney" and tight.p_value == pytest.approx(0.05)
    real = stats.decide(base, [x + 5 for x in base], noise_spread=0.2, min_effect_multiple=2.0, test="bootstrap",
                        alpha=0.05)
    assert real.accepted and real.decided_by == "min_effect+bootstrap" and real.ci_lower > 4


# ---------------------------------------------------------------------------------------------- sealed paths


def test_whether_the_exact_test_can_reach_alpha() -> None:
    # the smallest exact p-value is 1 / C(n1 + n2, n1)
    assert stats.exact_test_can_reach(5, 2, 0.05)  # 1/21
    assert not stats.exact_test_can_reach(3, 3, 0.05)  # 1/20 is not below 0.05
    assert stats.exact_test_can_reach(4, 4, 0.05)  # 1/70
    assert not stats.exact_test_can_reach(2, 1, 0.05)


def test_a_loss_is_significant_only_when_the_runs_separate() -> None:
    base = [10.0, 10.2, 9.9, 10.1, 10.0]
    worse = stats.significance(base, [8.0, 8.1], test="mann_whitney", alpha=0.05, difference="loss")
    assert worse.significant and worse.text == "Mann-Whitney U p=0.04762 < alpha 0.05"
    assert not stats.significance(base, [8.0, 10.1], test="mann_whitney", alpha=0.05).significant
    by_bootstrap = stats.significance(base, [8.0, 8.1, 7.9], test="bootstrap", alpha=0.05, difference="loss")
    assert by_bootstrap.significant and by_bootstrap.text.startswith("bootstrap 95% lower bound of the loss 1.")
    assert not stats.significance(base, [10.0, 10.1, 9.9], test="bootstrap", alpha=0.05).significant


def test_sealed_globs() -> None:
    sealed = SealedPaths(["goals/x/bench/**", "goals/x/goal.md", "data/", "*.lock"])
    assert sealed.match("goals/x/bench/run.py") and sealed.match("goals/x/bench/a/b.json")
    assert sealed.match("goals/x/goal.md") and not sealed.match("goals/x/goal.md.bak")
    assert sealed.match("data/a.csv") and sealed.match("poetry.lock") and not sealed.match("sub/poetry.lock")
    assert not sealed.match("goals/x/benchmark.py")


def test_the_manifest_restores_sealed_files_and_notices_changes(tmp_path: Path) -> None:
    goal_repo(tmp_path / "r", ideas={})
    repo = GitRepo(tmp_path / "r")
    manifest = SealedManifest.take(repo, repo.head(), SealedPaths(["goals/synth/bench.py", "goals/synth/goal.md"]))
    assert set(manifest.digests) == {"goals/synth/bench.py", "goals/synth/goal.md"}
    bench = tmp_path / "r" / "goals" / "synth" / "bench.py"
    original = bench.read_text()
    bench.write_text("print('{\"score\": 1e9}')\n")
    (tmp_path / "r" / "goals" / "synth" / "goal.md").unlink()
    assert manifest.verify(tmp_path / "r", repo) == ["goals/synth/bench.py", "goals/synth/goal.md"]
    manifest.restore(tmp_path / "r", repo)
    assert bench.read_text() == original and manifest.verify(tmp_path / "r", repo) == []


# ---------------------------------------------------------------------------------------------- critic


def _goal(tmp_path: Path):  # noqa: ANN202
    path = tmp_path / "goals" / "synth" / "goal.md"
    path.parent.mkdir(parents=True)
    path.write_text(synth_goal_md())
    return load_goal(path)


def _plan(pid: str, family: str, hypothesis: str = "Doing X should raise the value because Y.", diff: str | None = None):  # noqa: ANN202
    return {"plan_id": f"round_4_{pid}", "planner_id": pid, "round": 4, "hypothesis": hypothesis,
            "approach_family": family, "critic_approved": False, "target_files": ["a.py"],
            "steps": [{"step": 1, "file": "a.py", "change": "x"}],
            "expected_outcome": {"metric": "value", "estimated_impact": "+1", "rationale": "r",
                                 "sub_score_expectations": {}},
            "history_reference": {"builds_on": "none", "avoids": "none"}, "diff": diff}


def _history(*families: str) -> list[dict]:
    return [{"iteration": i, "baseline_score": 1.0, "losers": [], "research_brief_id": None,
             "winner": {"plan_id": f"round_{i}_p", "score": 2.0, "approach_family": f, "hypothesis": f"h{i}",
                        "sub_scores": {}, "diff_sha256": critic.diff_digest(f"diff {i}")}}
            for i, f in enumerate(families, 1)]


@pytest.mark.parametrize(("text", "count"), [
    ("Caching the sieve should cut runtime because it would skip work that will repeat.", 1),
    ("Caching should help and batching will help.", 2),
    ("Caching should help. Batching should help too.", 3),
    ("Caching should help; batching too.", 2),
    ("", 0),
])
def test_counting_hypotheses(text: str, count: int) -> None:
    assert critic.count_hypotheses(text) == count


def test_critic_checks_each_with_a_reason(tmp_path: Path) -> None:
    goal = _goal(tmp_path)
    history = _history("data", "data", "data")
    plans = [
        _plan("planner_a", "optimization", "Caching should help; batching will help too."),
        _plan("planner_b", "data"),
        _plan("planner_c", "optimization", "Inlining should raise the value because calls cost."),
        _plan("user_x", "testing", "h1", diff="diff 9"),
        _plan("user_y", "alchemy"),
        _plan("user_z", "documentation", "Docs should help.", diff="diff 2"),
    ]
    plans[3]["hypothesis"] = "h1"
    critic.review_round(plans, goal, history, critic.prior_attempts(history))
    review = {p["planner_id"]: p["critic_review"] for p in plans}
    assert review["planner_a"]["h001_hypothesis_count"] == "fail"
    assert "hypotheses in one plan" in review["planner_a"]["reasons"]["h001_hypothesis_count"]
    assert review["planner_b"]["h002_family_streak"] == "fail"
    assert review["planner_b"]["reasons"]["h002_family_streak"] == "'data' won the last 3 iterations; try another " \
                                                                   "approach family"
    assert review["planner_c"]["h003_intra_round_diversity"] == "fail"
    assert "round_4_planner_a already covers 'optimization'" in review["planner_c"]["rejection_reason"]
    assert review["user_x"]["history_aware"] == "fail"
    assert review["user_x"]["reasons"]["history_aware"] == "repeats the hypothesis of round_1_p (winner)"
    assert review["user_y"]["schema_valid"] == "fail"
    assert review["user_z"]["history_aware"] == "fail" and "repeats the change of round_2_p" in \
        review["user_z"]["reasons"]["history_aware"]
    assert [p["critic_approved"] for p in plans] == [False] * 6
    ok = [_plan("planner_a", "optimization")]
    critic.review_round(ok, goal, [], [])
    assert ok[0]["critic_review"]["verdict"] == "approved" and ok[0]["critic_review"]["rejection_reason"] is None
    assert set(ok[0]["critic_review"]["reasons"]) == set(critic.CHECKS)
    assert contract_errors("plan", ok[0]) == []


def test_the_critic_flags_what_reaches_into_the_measurement_and_not_ordinary_code() -> None:
    added = ["import __main__", "__main__.CLOCK = lambda: 0.0", "sys.modules['__main__'].limits = None",
             "from __main__ import CLOCK", "open('/proc/1/fd/3', 'w')", "time.process_time = lambda: 0.0",
             'if __name__ == "__main__":', "    main()", "total = sum(sieve)"]
    diff = "--- a/p.py\n+++ b/p.py\n@@ -1 +1,9 @@\n" + "".join(f"+{line}\n" for line in added)
    assert critic.measurement_flags(diff) == [
        "the benchmark's own module: p.py: +import __main__",
        "the benchmark's own module: p.py: +sys.modules['__main__'].limits = None",
        "the benchmark's own module: p.py: +from __main__ import CLOCK",
        "the result channel: p.py: +open('/proc/1/fd/3', 'w')",
        "a timer: p.py: +time.process_time = lambda: 0.0",
    ]


def test_history_reference_to_an_unknown_plan_fails(tmp_path: Path) -> None:
    plan = _plan("planner_a", "optimization")
    plan["history_reference"]["builds_on"] = "round_7_planner_q"
    critic.review_round([plan], _goal(tmp_path), [], [])
    assert plan["critic_review"]["history_aware"] == "fail"


# ---------------------------------------------------------------------------------------------- schemas


TOURNAMENT_CONTRACTS = ("agent_settings", "approach_families", "baseline", "benchmark_result", "cost", "event_log",
                        "failure_analysis", "goal_phase", "iteration_history", "iteration_state", "merge_report",
                        "plan", "plan_archive", "raw_data", "research_brief", "safety_guard")


def test_every_seed_contract_ships_as_a_valid_schema() -> None:
    shipped = {p.name for p in resources.files("harness.base").joinpath("contracts").iterdir()
               if p.name.endswith(".json")}
    assert {f"{n}.json" for n in TOURNAMENT_CONTRACTS} <= shipped
    for name in TOURNAMENT_CONTRACTS:
        Draft202012Validator.check_schema(contract(name))
    assert {row["tag"] for row in contract("approach_families")["default"]} == {
        "architecture", "training_config", "data", "infrastructure", "optimization", "testing", "documentation",
        "other"}


def test_merge_report_reason_rule() -> None:
    report = {"iteration": 1, "goal_slug": "g", "winner": None, "archived": [], "regressions_detected": False,
              "re_benchmark_score": None, "status": "no_winner", "reason": None}
    assert contract_errors("merge_report", report) == ["reason: None is null, not text"]
    report.update(reason="all failed")
    assert contract_errors("merge_report", report) == []
    report.update(status="merged")
    assert contract_errors("merge_report", report)  # merged needs a winner and a null reason
    with pytest.raises(schemas.RecordInvalid, match="does not match the merge_report schema"):
        schemas.write_record(Path("/nonexistent/x.json"), "merge_report", report)


def test_failure_analysis_categories_are_the_seeds() -> None:
    enum = contract("failure_analysis")["properties"]["category"]["enum"]
    assert enum == ["oom", "timeout", "regression", "logic_error", "scope_error", "infrastructure",
                    "benchmark_parse_error", "sealed_file_violation"]


def test_demo_ideas_make_schema_valid_plans() -> None:
    for idea in list_ideas(DEMO):
        assert contract_errors("plan", idea.to_plan(1, "runtime_ms")) == []


# ---------------------------------------------------------------------------------------------- costs


def test_costs_sum_per_model_and_a_model_without_a_price_makes_the_total_unknown_never_zero() -> None:
    priced, unpriced = Spend(), Spend()
    priced.add("claude-haiku-4-5", Usage(1000, 200), 0.002)
    unpriced.add("local/qwen", Usage(500, 50), None)
    one, other = cost_record(priced), cost_record(unpriced)
    total = total_cost(one, other, None)
    assert contract_errors("cost", total) == [] and contract_errors("cost", other) == []
    assert total["input_tokens"] == 1500 and total["output_tokens"] == 250 and total["calls"] == 2
    assert total["cost_known"] is False and total["cost_usd"] == 0.002  # the priced part only, a lower bound
    assert total["model_usage"]["local/qwen"]["cost_usd"] is None
    assert total["model_usage"]["claude-haiku-4-5"]["cost_usd"] == 0.002
    assert cost_said(one) == "$0.0020"
    assert cost_said(other) == "cost unknown (local/qwen has no price)"
    assert cost_said(total) == "$0.0020 and an unknown cost (local/qwen has no price)"
    again = total_cost(total, one)  # a total summed again stays per model
    assert again["model_usage"]["claude-haiku-4-5"]["calls"] == 2 and again["cost_known"] is False


def test_a_cost_record_written_before_model_usage_still_sums() -> None:
    old = {"input_tokens": 100, "output_tokens": 10, "cache_write_tokens": 0, "cache_read_tokens": 0,
           "cost_usd": 0.5, "model": "m", "calls": 1}
    total = total_cost(old, old)
    assert total["cost_usd"] == 1.0 and total["calls"] == 2 and total["cost_known"] is True
    assert total["model_usage"]["m"]["input_tokens"] == 200
    assert total_cost(None, no_cost()) == no_cost() and "model_usage" not in no_cost()
    assert contract_errors("cost", no_cost()) == []


# ---------------------------------------------------------------------------------------------- model executor tools


def test_model_executor_tools_stay_in_the_worktree(tmp_path: Path) -> None:
    goal_dir = goal_repo(tmp_path / "r", ideas={})
    goal = load_goal(goal_dir / "goal.md")
    access = SimpleNamespace(available=True, model="m", client=None)
    box = GoalSandbox(goal, tmp_path / "r", tmp_path / "r" / ".git", tmp_path / "r")
    ex = ModelExecutor(goal, {"plan_id": "round_1_x"}, tmp_path / "r", tmp_path / "log", access, threading.Event(),
                       box)
    assert ex.call_tool("read_file", {"path": "goals/synth/app/value.py"}) == ("VALUE = 10.0\n", False)
    assert ex.call_tool("read_file", {"path": "../../etc/passwd"})[0].startswith("refused: ../../etc/passwd: outside")
    assert ex.call_tool("read_file", {"path": ".git/config"})[0].startswith("refused")
    assert "sealed path" in ex.call_tool("write_file", {"path": "goals/synth/bench.py", "content": "x"})[0]
    assert ex.call_tool("replace_in_file", {"path": "goals/synth/app/value.py", "old": "10.0", "new": "11.0"}) == (
        "edited goals/synth/app/value.py", False)
    out, is_error = ex.call_tool("run_command", {"command": "rm -rf goals"})
    assert is_error and out.startswith("blocked by SafetyGuard: destructive: rm -r -f on goals (recursive delete)")
    assert ex.blocked == ["rm -rf goals"] and (tmp_path / "r" / "goals").exists()
    out, is_error = ex.call_tool("run_command", {"command": f"{sys.executable} -c \"print(6*7)\""})
    assert not is_error and "42" in out
    assert "goals/synth/bench.py" in ex.call_tool("list_files", {})[0]
    assert json.loads(json.dumps([t.schema for t in ModelExecutor.TOOLS]))  # tool schemas are plain JSON
