"""The tournament's records exactly as seed 001 writes them: every record of a real (offline) run checked against
the shipped schemas, the schemas against the document's own examples, fields and enums, and the records of the
earlier layout (state outside ``state/``) moved once so that a stopped run still resumes."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_tournament_runs import quiet

from harness.apps.tournament.benchmark import RAW_CHARS, bounded
from harness.apps.tournament.loop import INTERRUPT_ENV, ImproveInterrupted, improve
from harness.apps.tournament.migrate import migrate
from harness.apps.tournament.store import Layout
from harness.apps.tournament.testing import goal_repo, load, synth_goal_md, value_idea
from harness.base.jsonschemas import contract, contract_errors
from harness.loading.goal_file import load_goal

# Every JSON file a run writes under WORK/improve/<slug>/, by where it is, and the schema it answers to.
SCHEMA_OF = (
    ("state/iteration_state.json", "iteration_state"),
    ("state/plan_archive/", "plan_archive"),
    ("agent-settings.json", "agent_settings"),
    ("baseline.json", "baseline"),
    ("research/", "research_brief"),
    ("results/", "benchmark_result"),
    ("history/", "iteration_history"),
    ("merge_reports/", "merge_report"),
)
# ...and the files that are not records: the sealed manifest, its files, the logs, the lock.
NOT_RECORDS = ("sealed/", ".sealed/", "logs/", ".lock")


def _schema_of(rel: str) -> str | None:
    for where, name in SCHEMA_OF:
        if rel == where or (where.endswith("/") and rel.startswith(where)):
            return name
    assert rel.startswith(NOT_RECORDS), f"{rel}: a file no schema or rule accounts for"
    return None


def check_every_record(root: Path, slug: str) -> dict[str, int]:
    """Every file the run wrote for ``slug`` against its schema (none is left unaccounted for); how many of
    each."""
    base = root / "WORK" / "improve" / slug
    counts: dict[str, int] = {}
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        name = _schema_of(path.relative_to(base).as_posix())
        if name is None:
            continue
        assert contract_errors(name, load(path)) == [], path
        counts[name] = counts.get(name, 0) + 1
    for file, name in (("raw_data.json", "raw_data"), ("events.json", "event_log")):
        path = root / "tracking" / file
        if path.exists():
            assert contract_errors(name, load(path)) == [], path
            counts[name] = len(load(path))
    return counts


def _ideas() -> dict[str, str]:
    return {
        "a_up.md": value_idea("Up", "optimization", 10.0, 20.0),
        "b_down.md": value_idea("Down", "data", 10.0, 2.0),
        "c_broken.md": value_idea("Broken", "architecture", 10.0, 0.0, body="VALUE = undefined_name"),
        "d_again.md": value_idea("Up again", "optimization", 10.0, 30.0),   # h003: a second optimization plan
        # prints a key-shaped secret it builds at run time (the idea's own text holds none)
        "e_loud.md": value_idea("Loud", "testing", 10.0, 10.5, body="VALUE = 10.5; print('sk-ant-' + 'x' * 30)"),
    }


def test_every_record_of_a_run_matches_the_schemas_written_from_the_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    root = tmp_path / "r"
    goal_dir = goal_repo(root, ideas=_ideas(), goal_md=synth_goal_md(executors=5))
    summary = improve(goal_dir, 2, echo=quiet([]), plots=False)
    assert summary.statuses == ["merged", "all_rejected"]

    counts = check_every_record(root, "synth")
    assert counts == {"iteration_state": 1, "plan_archive": 5, "agent_settings": 1, "baseline": 1,
                      "benchmark_result": 4, "iteration_history": 2, "merge_report": 2, "raw_data": 5,
                      "event_log": 1}
    base = root / "WORK" / "improve" / "synth"
    # section 8 and 10: under state/, and nowhere else
    assert not (base / "iteration_state.json").exists() and not (base / "plan_archive").exists()
    state = load(base / "state" / "iteration_state.json")
    assert state["iteration"] == 2 and state["status"] == "completed"

    # section 1: every plan has an architect_review in the document's shape, saying why none ran
    plans = {p.stem: load(p) for p in (base / "state" / "plan_archive" / "round_1").glob("*.json")}
    assert set(plans) == {f"round_1_user_{n}" for n in ("a_up", "b_down", "c_broken", "d_again", "e_loud")}
    for plan_id, plan in plans.items():
        review = plan["architect_review"]
        assert {"verdict", "feedback", "structural_concerns"} <= set(review), plan_id
        assert review["verdict"] == "approve" and review["reviewed"] is False
    rejected = plans["round_1_user_d_again"]
    assert not rejected["critic_approved"] and rejected["critic_review"]["h003_intra_round_diversity"] == "fail"
    assert rejected["architect_review"]["feedback"] == "no architect review: the critic rejected the plan"
    assert plans["round_1_user_a_up"]["architect_review"]["feedback"] == (
        "no architect review: skipped (no ANTHROPIC_API_KEY)")

    # section 2: benchmark_raw is the run's full stdout, verbatim, and redacted
    results = {load(p)["plan_id"]: load(p) for p in (base / "results" / "round_1").glob("*.json")}
    up = results["round_1_user_a_up"]
    assert up["benchmark_raw"] == "benchmark of goals/synth\nvalue: 20.0\n"
    assert json.loads(up["check_result"])["score"] == 20.0
    loud = results["round_1_user_e_loud"]
    assert loud["status"] == "success"
    assert loud["benchmark_raw"] == "[REDACTED:anthropic-key]\nbenchmark of goals/synth\nvalue: 10.5\n"
    assert "benchmark_raw_dropped" not in loud
    broken = results["round_1_user_c_broken"]
    # it printed nothing on stdout before it failed (the NameError is on stderr), and no check ran
    assert broken["status"] == "error" and broken["benchmark_raw"] == "" and "check_result" not in broken
    assert results["round_1_user_b_down"]["status"] == "regression"

    # section 5: every family is the taxonomy's or the goal's own; the baseline is iteration 0, 'other'
    families = set(load_goal(goal_dir / "goal.md").family_tags)
    raw = load(root / "tracking" / "raw_data.json")
    assert all(entry["approach_family"] in families for entry in raw), raw
    assert raw[0] == {"iteration": 0, "plan_id": "baseline", "benchmark_score": 10.0, "is_winner": False,
                      "approach_family": "other", "sub_scores": {"value": 10.0, "ok": 1.0}, "goal": "synth"}
    assert [e["is_winner"] for e in raw[1:]] == [True, False, False, False]

    # section 9: a merge, then a round without plans
    reports = [load(base / "merge_reports" / f"iteration_{n}.json") for n in (1, 2)]
    assert reports[0]["status"] == "merged" and reports[0]["reason"] is None
    assert reports[0]["winner"]["branch"] == "experiment/round_1_executor_1"
    assert reports[1]["status"] == "all_rejected" and reports[1]["winner"] is None and reports[1]["reason"]


# ---------------------------------------------------------------------------------------------- the schemas

# Seed 001's examples, with its placeholders ("<taxonomy value>", "a|b") filled in with values of their kind.
DOCUMENT_EXAMPLES: dict[str, Any] = {
    "plan_archive": {
        "plan_id": "round_1_planner_a", "planner_id": "planner_a", "round": 1,
        "hypothesis": "Doing X should improve Y because Z", "approach_family": "optimization",
        "critic_approved": False, "target_files": ["path/to/file1"],
        "steps": [{"step": 1, "file": "path/to/file", "change": "exact description"}],
        "expected_outcome": {"metric": "runtime_ms", "estimated_impact": "-10%", "rationale": "why",
                             "sub_score_expectations": {}},
        "history_reference": {"builds_on": "none", "avoids": "none"},
        "critic_review": {"h001_hypothesis_count": "pass", "h002_family_streak": "pass",
                          "h003_intra_round_diversity": "pass", "schema_valid": "pass", "history_aware": "pass",
                          "verdict": "approved", "rejection_reason": None},
        "architect_review": {"verdict": "approve", "feedback": "", "structural_concerns": []},
    },
    "benchmark_result": {
        "executor_id": "executor_1", "plan_id": "round_1_planner_a", "benchmark_score": 85.2,
        "benchmark_raw": "full stdout verbatim", "status": "success", "sub_scores": {"dim_a": 85.2, "dim_b": 42.3},
        "failure_analysis": None, "timestamp": "2026-01-31T10:00:00Z",
    },
    "research_brief": {
        "iteration": 1, "researcher_id": "researcher", "repo_analysis_summary": "...",
        "ideas": [{"title": "Short action name", "source": "Specific origin", "evidence": "Concrete evidence",
                   "approach_family": "data", "confidence": "high", "estimated_impact": "3-5%"}],
    },
    "iteration_history": {
        "iteration": 1, "baseline_score": 80.0,
        "winner": {"plan_id": "round_1_planner_a", "score": 85.2, "approach_family": "training_config",
                   "hypothesis": "...", "sub_scores": {}},
        "losers": [{"plan_id": "round_1_planner_b", "score": 78.5, "approach_family": "architecture",
                    "hypothesis": "...", "sub_scores": {},
                    "failure_analysis": {"what": "Score dropped", "why": "Root cause", "category": "regression",
                                         "lesson": "Actionable lesson"}}],
        "research_brief_id": "round_1",
    },
    "raw_data": [{"iteration": 1, "plan_id": "round_1_planner_a", "benchmark_score": 85.2, "is_winner": True,
                  "approach_family": "training_config", "sub_scores": {}, "goal": "g"}],
    "iteration_state": {
        "iteration": 1, "status": "in_progress", "current_step": "research",
        "started_at": "2026-01-31T10:00:00Z", "updated_at": "2026-01-31T10:00:00Z",
        "research": {"status": "pending", "output_path": None, "completed_at": None},
        "planning": {"status": "pending",
                     "plans": {"planner_a": {"status": "completed", "output_path": "...", "critic_approved": True}},
                     "approved_count": 2, "completed_at": None},
        "execution": {"status": "pending",
                      "executors": {"executor_1": {"status": "running", "plan_id": "...", "output_path": None,
                                                   "benchmark_score": None}},
                      "completed_at": None},
        "tournament": {"status": "pending", "winner": None, "winner_score": None, "completed_at": None},
        "recording": {"status": "pending", "history_path": None, "visualization_updated": False,
                      "cleanup_done": False},
        "user_ideas_consumed": [],
    },
    "merge_report": {
        "iteration": 3, "goal_slug": "reduce_latency",
        "winner": {"executor_id": "executor_2", "branch": "experiment/round_3_executor_2",
                   "hypothesis": "Cache intermediate results", "score_before": 142.3, "score_after": 118.7,
                   "sub_scores": {}},
        "archived": ["archive/round_3_executor_1"], "regressions_detected": False, "re_benchmark_score": 118.7,
        "status": "merged", "reason": None,
    },
    "event_log": [{"timestamp": "2026-01-31T10:00:00Z", "event_type": "config_change", "iteration": 5,
                   "details": {"field": "number_of_agents", "old_value": 2, "new_value": 3, "source": "user"}}],
    "failure_analysis": {"what": "Factual description with scores/errors", "why": "Root cause mechanism",
                         "category": "oom", "lesson": "Actionable lesson for future planners"},
}
# The fields the harness requires beside the document's (written down in docs/contracts.md).
HARNESS_REQUIRED = {"raw_data": {"goal"}}
# The document's enums, field by field.
DOCUMENT_ENUMS = {
    ("benchmark_result", "status"): ["success", "regression", "error", "timeout"],
    ("iteration_state", "status"): ["in_progress", "completed", "failed", "interrupted"],
    ("iteration_state", "current_step"): ["research", "planning", "critic_review", "execution", "tournament",
                                          "recording", "stop_check"],
    ("merge_report", "status"): ["merged", "no_improvement", "no_winner", "all_rejected"],
    ("failure_analysis", "category"): ["oom", "timeout", "regression", "logic_error", "scope_error",
                                       "infrastructure", "benchmark_parse_error", "sealed_file_violation"],
    ("event_log", "event_type"): ["config_change", "phase_transition"],
}


def _entry_schema(name: str) -> dict[str, Any]:
    schema = contract(name)
    if schema.get("type") == "array":
        return schema["$defs"][schema["items"]["$ref"].split("/")[-1]]
    if name == "plan_archive":
        return {**contract("plan"), "required": contract("plan")["required"] + schema["allOf"][1]["required"]}
    return schema


@pytest.mark.parametrize("name", sorted(DOCUMENT_EXAMPLES))
def test_the_documents_own_examples_match_and_its_fields_are_the_required_ones(name: str) -> None:
    example = DOCUMENT_EXAMPLES[name]
    assert contract_errors(name, example) == []
    fields = set((example[0] if isinstance(example, list) else example))
    assert set(_entry_schema(name)["required"]) == fields | HARNESS_REQUIRED.get(name, set())


@pytest.mark.parametrize(("name", "field"), sorted(DOCUMENT_ENUMS))
def test_the_documents_enums(name: str, field: str) -> None:
    assert _entry_schema(name)["properties"][field]["enum"] == DOCUMENT_ENUMS[(name, field)]


def test_the_nested_parts_follow_the_document() -> None:
    plan = contract("plan")["properties"]
    assert plan["critic_review"]["required"] == ["h001_hypothesis_count", "h002_family_streak",
                                                 "h003_intra_round_diversity", "schema_valid", "history_aware",
                                                 "verdict", "rejection_reason"]
    assert plan["critic_review"]["properties"]["verdict"]["enum"] == ["approved", "rejected"]
    assert plan["architect_review"]["required"] == ["verdict", "feedback", "structural_concerns"]
    assert plan["architect_review"]["properties"]["verdict"]["enum"] == ["approve", "reject"]
    brief_idea = contract("research_brief")["properties"]["ideas"]["items"]["properties"]
    assert brief_idea["confidence"]["enum"] == ["high", "medium", "low"]
    # a plan without its reviews is a plan, not yet an archived one
    bare = {k: v for k, v in DOCUMENT_EXAMPLES["plan_archive"].items() if not k.endswith("_review")}
    assert contract_errors("plan", bare) == []
    assert contract_errors("plan_archive", bare)
    wrong = copy.deepcopy(DOCUMENT_EXAMPLES["raw_data"])
    wrong[0]["approach_family"] = "Not A Tag"
    assert contract_errors("raw_data", wrong)


def test_benchmark_raw_is_kept_whole_up_to_its_bound_then_head_and_tail() -> None:
    short = "line\n" * 100
    assert bounded(short) == (short, 0)
    long = "".join(f"{i}\n" for i in range(20_000))
    kept, dropped = bounded(long)
    assert dropped == len(long) - RAW_CHARS
    assert kept.startswith("0\n1\n") and kept.endswith("19998\n19999\n")
    assert f"[... {dropped:,} characters dropped ...]" in kept
    assert len(kept) < RAW_CHARS + 100


# ---------------------------------------------------------------------------------------------- the old layout


def to_old_layout(base: Path) -> None:
    """Put a goal's records back as the harness wrote them before ``state/``: the state and the plan archive
    straight under the goal's folder, the state's plans pointing there, no architect_review where no architect
    ran, and the check's result as benchmark_raw."""
    state = load(base / "state" / "iteration_state.json")
    for entry in state["planning"]["plans"].values():
        if entry.get("output_path"):
            entry["output_path"] = entry["output_path"].replace("/state/plan_archive/", "/plan_archive/")
    (base / "iteration_state.json").write_text(json.dumps(state))
    (base / "state" / "iteration_state.json").unlink()
    shutil.move(base / "state" / "plan_archive", base / "plan_archive")
    (base / "state").rmdir()
    for path in (base / "plan_archive").rglob("*.json"):
        plan = load(path)
        if plan.get("architect_review", {}).get("reviewed") is False:
            del plan["architect_review"]
            path.write_text(json.dumps(plan))
    for path in (base / "results").rglob("*.json"):
        result = load(path)
        result["benchmark_raw"] = result.pop("check_result", result["benchmark_raw"])
        path.write_text(json.dumps(result))


def test_a_run_stopped_under_the_old_layout_resumes_under_the_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    ideas = {"a_big.md": value_idea("Big", "optimization", 10.0, 20.0),
             "b_small.md": value_idea("Small", "data", 10.0, 12.0)}
    root = tmp_path / "r"
    goal = goal_repo(root, ideas=ideas)
    monkeypatch.setenv(INTERRUPT_ENV, "1")
    with pytest.raises(ImproveInterrupted):
        improve(goal, 1, echo=quiet([]), plots=False)
    monkeypatch.delenv(INTERRUPT_ENV)
    base = root / "WORK" / "improve" / "synth"
    to_old_layout(base)
    kept = load(base / "results" / "round_1" / "executor_1.json")

    lines: list[str] = []
    summary = improve(goal, 1, echo=lines.append, plots=False)
    assert summary.statuses == ["merged"]
    assert "moved 2 archived plan(s) from WORK/improve/synth/plan_archive/ to WORK/improve/synth/state/plan_archive/" \
        in lines
    assert "moved WORK/improve/synth/iteration_state.json to WORK/improve/synth/state/iteration_state.json" in lines
    assert any("executor_1 round_1_user_a_big: finished earlier, kept" in ln for ln in lines)
    assert load(base / "results" / "round_1" / "executor_1.json") == kept  # read as it was written
    assert not (base / "iteration_state.json").exists() and not (base / "plan_archive").exists()
    state = load(base / "state" / "iteration_state.json")
    assert state["status"] == "completed" and state["run"]["finished"] is True
    assert {e["output_path"] for e in state["planning"]["plans"].values()} == {
        f"WORK/improve/synth/state/plan_archive/round_1/round_1_user_{n}.json" for n in ("a_big", "b_small")}
    plan = load(base / "state" / "plan_archive" / "round_1" / "round_1_user_a_big.json")
    assert plan["architect_review"]["reviewed"] is False
    assert "archived by an earlier harness" in plan["architect_review"]["feedback"]
    check_every_record(root, "synth")

    # the next run has nothing to move
    lines.clear()
    improve(goal, 1, echo=lines.append, plots=False)
    assert not [ln for ln in lines if ln.startswith(("moved", "left", "the plans"))]


def _old_state(layout: Layout, plans: dict[str, str]) -> dict[str, Any]:
    stamp = "2026-01-31T10:00:00.000Z"
    old = {pid: {"status": "completed", "critic_approved": None, "plan_id": plan_id,
                 "output_path": layout.rel(layout.base / "plan_archive" / "round_1" / f"{plan_id}.json")}
           for pid, plan_id in plans.items()}
    state = copy.deepcopy(DOCUMENT_EXAMPLES["iteration_state"])
    state.update(started_at=stamp, updated_at=stamp, current_step="critic_review")
    state["planning"].update(status="completed", plans=old, approved_count=0)
    state["execution"]["executors"] = {}
    return state


def test_the_migration_moves_each_thing_once_and_finishes_one_that_was_stopped(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "g")
    old_archive = layout.base / "plan_archive" / "round_1"
    old_archive.mkdir(parents=True)
    reviewed = {k: v for k, v in DOCUMENT_EXAMPLES["plan_archive"].items() if k != "architect_review"}
    unreviewed = {k: v for k, v in reviewed.items() if k != "critic_review"} | {"plan_id": "round_1_planner_b",
                                                                                "planner_id": "planner_b"}
    (old_archive / "round_1_planner_a.json").write_text(json.dumps(reviewed))
    (old_archive / "round_1_planner_b.json").write_text(json.dumps(unreviewed))
    state = _old_state(layout, {"planner_a": "round_1_planner_a", "planner_b": "round_1_planner_b"})
    (layout.base / "iteration_state.json").write_text(json.dumps(state))

    # stopped halfway: the archive moved, the state not yet (it is put back after the first migration)
    old_state = layout.base / "iteration_state.json"
    old_state.rename(tmp_path / "aside.json")
    assert migrate(layout) == ["moved 2 archived plan(s) from WORK/improve/g/plan_archive/ to "
                               "WORK/improve/g/state/plan_archive/"]
    (tmp_path / "aside.json").rename(old_state)
    assert migrate(layout) == [
        "moved WORK/improve/g/iteration_state.json to WORK/improve/g/state/iteration_state.json",
        "the plans in WORK/improve/g/state/iteration_state.json now point to WORK/improve/g/state/plan_archive/"]
    assert migrate(layout) == []

    moved = load(layout.state_file)
    assert [e["output_path"] for e in moved["planning"]["plans"].values()] == [
        "WORK/improve/g/state/plan_archive/round_1/round_1_planner_a.json",
        "WORK/improve/g/state/plan_archive/round_1/round_1_planner_b.json"]
    assert moved["started_at"] == state["started_at"]  # nothing else changed
    a = load(layout.plan(1, "round_1_planner_a"))
    assert a["architect_review"]["reviewed"] is False and contract_errors("plan_archive", a) == []
    assert load(layout.plan(1, "round_1_planner_b")) == unreviewed  # not reviewed yet: the resumed run reviews it
    assert not (layout.base / "plan_archive").exists() and not (layout.base / "iteration_state.json").exists()

    # an old state beside a new one is left alone, and said so
    (layout.base / "iteration_state.json").write_text(json.dumps(state))
    assert migrate(layout) == ["left WORK/improve/g/iteration_state.json as it is: "
                               "WORK/improve/g/state/iteration_state.json is the iteration state (remove the old one)"]
    assert load(layout.state_file) == moved
