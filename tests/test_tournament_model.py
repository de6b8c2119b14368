"""The model path against the fake Anthropic server: research brief, planner, architect, model-driven executor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.apps.tournament.loop import improve
from harness.apps.tournament.testing import git, goal_repo, load, synth_goal_md, value_idea
from harness.testing.fake_anthropic import FakeAnthropic, Reply

BRIEF = {"repo_analysis_summary": "VALUE is read by the benchmark.",
         "ideas": [{"title": "Raise VALUE", "source": "goals/synth/app/value.py", "evidence": "bench reads it",
                    "approach_family": "optimization", "confidence": "high", "estimated_impact": "+100%"}]}
PLAN = {"hypothesis": "Raising VALUE to 25 should raise the value because the benchmark reports it.",
        "approach_family": "optimization", "target_files": ["goals/synth/app/value.py"],
        "steps": [{"step": 1, "file": "goals/synth/app/value.py", "change": "VALUE = 25.0"}],
        "expected_outcome": {"metric": "value", "estimated_impact": "+15", "rationale": "read directly",
                             "sub_score_expectations": {}},
        "history_reference": {"builds_on": "none", "avoids": "none"}}


def responder(request: dict[str, Any]) -> Reply:
    tools = [t["name"] for t in request.get("tools", [])]
    usage = {"input_tokens": 1000, "output_tokens": 200}
    if "submit_research_brief" in tools:
        return Reply.tool(BRIEF, usage=usage)
    if "submit_plan" in tools:
        return Reply.tool(PLAN, usage=usage)
    if "submit_architect_review" in tools:
        return Reply.tool({"verdict": "approve", "feedback": "small and focused", "structural_concerns": []},
                          usage=usage)
    step = len(request["messages"])  # the model-driven executor: one tool per turn
    script = [
        ("run_command", {"command": "rm -rf / --no-preserve-root"}),
        ("read_file", {"path": "goals/synth/app/value.py"}),
        ("write_file", {"path": "goals/synth/bench.py", "content": "print('{\"score\": 1e9}')"}),
        ("replace_in_file", {"path": "goals/synth/app/value.py", "old": "VALUE = 10.0", "new": "VALUE = 25.0"}),
        ("finish", {"summary": "VALUE is 25"}),
    ]
    name, args = script[min(step // 2, len(script) - 1)]
    return Reply.tool(args, name=name, usage=usage)


def one_iteration(root: Path, model: str) -> tuple[Path, list[str]]:
    """One merged iteration with a model planner and the architect on ``model``: its records folder and lines."""
    md = synth_goal_md().replace("- planners: 0", f"- planners: 1\n- architect_review: on\n- model: {model}")
    goal = goal_repo(root, ideas={}, goal_md=md)
    lines: list[str] = []
    summary = improve(goal, 1, echo=lines.append, plots=False)
    assert summary.statuses == ["merged"], "\n".join(lines)
    return root / "WORK" / "improve" / "synth", lines


def test_the_model_path_end_to_end(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = responder
    root = tmp_path / "r"
    base, lines = one_iteration(root, "claude-haiku-4-5")

    brief = load(base / "research" / "round_1.json")
    assert brief["ideas"][0]["title"] == "Raise VALUE" and brief["cost"]["input_tokens"] == 1000
    plan = load(base / "state" / "plan_archive" / "round_1" / "round_1_planner_a.json")
    assert plan["critic_approved"] and plan["architect_review"]["verdict"] == "approve"
    assert plan["architect_review"]["reviewed"] is True and plan["architect_review"]["feedback"] == "small and focused"
    assert plan["cost"]["calls"] == 2 and plan["cost"]["cost_usd"] > 0  # planner + architect
    result = load(base / "results" / "round_1" / "executor_1.json")
    assert result["executor_kind"] == "model" and result["status"] == "success"
    assert result["blocked_commands"] == ["rm -rf / --no-preserve-root"]
    assert result["cost"]["calls"] == 5
    assert (root / "goals/synth/app/value.py").read_text() == "VALUE = 25.0\n"
    assert "1e9" not in (root / "goals/synth/bench.py").read_text()  # the sealed write was refused
    history = load(base / "history" / "iteration_1.json")
    assert history["research_brief_id"] == "round_1"
    total = history["cost"]["total"]
    assert total["calls"] == 8 and total["input_tokens"] == 8000
    assert total["cost_usd"] == round(8000 * 1e-6 + 1600 * 5e-6, 6)
    assert any("cost: 9600 tokens, $0.0160" in ln for ln in lines)
    log = (base / "logs" / "round_1" / "executor_1.log").read_text()
    assert "blocked by SafetyGuard" in log and "sealed path" in log
    executor_calls = [r for r in fake_anthropic.requests if any(t["name"] == "write_file" for t in r.get("tools", []))]
    assert "ANTHROPIC" not in json.dumps(executor_calls)
    assert git(root, "status", "--porcelain") == ""


def test_a_failing_model_does_not_fail_the_run(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.responder = lambda request: Reply.error(400, message="bad request")
    md = synth_goal_md().replace("- planners: 0", "- planners: 2")
    goal = goal_repo(tmp_path / "r", ideas={"a.md": value_idea("Up", "optimization", 10.0, 20.0)}, goal_md=md)
    lines: list[str] = []
    summary = improve(goal, 1, echo=lines.append, plots=False)
    assert summary.statuses == ["merged"]
    assert any(ln.startswith("  research brief: failed (") for ln in lines)
    assert any(ln.startswith("  planner_a: failed (") for ln in lines)
    state = load(tmp_path / "r/WORK/improve/synth/state/iteration_state.json")
    assert state["research"]["status"] == "failed"
    assert state["planning"]["plans"]["planner_b"]["status"] == "failed"


def test_a_model_without_a_price_shows_an_unknown_cost_never_zero(tmp_path: Path, fake_anthropic: FakeAnthropic
                                                                  ) -> None:
    def unpriced(request: dict[str, Any]) -> Reply:
        if "submit_research_brief" in [t["name"] for t in request.get("tools", [])]:  # invalid twice: no brief
            return Reply.tool({"ideas": []}, usage={"input_tokens": 300, "output_tokens": 30})
        return responder(request)

    fake_anthropic.responder = unpriced
    base, lines = one_iteration(tmp_path / "r", "claude-unpriced-1")

    state = load(base / "state" / "iteration_state.json")
    research = state["research"]
    assert research["status"] == "failed"  # its two calls were billed all the same
    assert research["cost"]["calls"] == 2 and research["cost"]["input_tokens"] == 600
    plan = load(base / "state" / "plan_archive" / "round_1" / "round_1_planner_a.json")
    assert plan["cost"]["cost_known"] is False and plan["cost"]["calls"] == 2
    assert plan["cost"]["model_usage"]["claude-unpriced-1"]["cost_usd"] is None
    assert any(ln.startswith("  planner_a: plan [optimization], cost unknown (claude-unpriced-1 has no price)")
               for ln in lines)
    total = load(base / "history" / "iteration_1.json")["cost"]["total"]
    assert total["calls"] == 2 + 2 + 5 and total["input_tokens"] == 600 + 7000  # the failed research counted
    assert total["cost_known"] is False
    assert any(ln == "  cost: 9060 tokens, cost unknown (claude-unpriced-1 has no price)" for ln in lines)
    assert any("claude-unpriced-1 has no price: its tokens are recorded, its cost is unknown" in ln for ln in lines)
    assert not any("$0.0000" in ln for ln in lines)
