"""The model-driven roles of an iteration: the researcher, the planners and the architect.

All of them go through :mod:`harness.llm`. Without a model to call (no key) each is skipped and says
so; a failed model call is recorded and the iteration goes on with what it has.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.apps.tournament.benchmark import SealedPaths
from harness.apps.tournament.costs import cost_record
from harness.apps.tournament.gitops import GitRepo
from harness.base.errors import HarnessError
from harness.base.jsonschemas import contract
from harness.base.usage import Spend
from harness.llm import CallPolicy, GenerationResult, ModelClient, ModelReply, ModelSettings
from harness.loading.goal import Goal

_TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".js", ".ts", ".go",
                  ".rs", ".c", ".h", ".cpp", ".java", ".sh", ".rb"}


@dataclass
class CostMeter:
    """What the calls of one step took (thread-safe), priced by the client's policy (the user's price table
    included); ``cost`` is the step's ``cost`` record (:mod:`~harness.apps.tournament.costs`)."""

    spend: Spend = field(default_factory=Spend)

    def add(self, answer: ModelReply | GenerationResult) -> None:
        self.spend.merge(answer.spend)

    def add_failed(self, error: BaseException) -> None:
        """The calls of an operation that failed and still cost (a JSON generation whose retry failed)."""
        spent = getattr(error, "spend", None)
        if isinstance(spent, Spend):
            self.spend.merge(spent)

    @property
    def cost(self) -> dict[str, Any]:
        return cost_record(self.spend)


class RoleFailed(HarnessError):
    """A role's model call failed or its answer failed validation; ``cost`` is what its calls took all the
    same (they were billed)."""

    def __init__(self, message: str, cost: dict[str, Any]):
        super().__init__(message)
        self.cost = cost


class ModelAccess:
    """The goal's model settings and one shared client; ``skip_reason`` says why a role cannot run.

    The client runs under ``policy`` (the response cache, limits, prices and cost cap of the run), like every
    model call of the harness."""

    def __init__(self, goal: Goal, client: ModelClient | None = None, policy: CallPolicy | None = None):
        self.goal = goal
        if client is None:
            settings = ModelSettings(temperature=goal.agents.temperature, max_tokens=goal.agents.max_tokens,
                                     **({"model": goal.agents.model} if goal.agents.model else {}))
            client = ModelClient(settings, policy=policy)
        self.client = client
        self.skip_reason: str | None = client.unavailable_reason

    @property
    def available(self) -> bool:
        return self.skip_reason is None

    @property
    def model(self) -> str:
        return self.client.model

    def generate(self, meter: CostMeter, *, system: str, prompt: str, schema: dict[str, Any],
                 tool_name: str) -> dict[str, Any]:
        """The role's answer; :class:`RoleFailed`, with what the calls cost, when there is none."""
        try:
            result = self.client.generate_json(system=system, prompt=prompt, schema=schema, tool_name=tool_name)
        except HarnessError as exc:
            meter.add_failed(exc)
            raise RoleFailed(str(exc), meter.cost) from None
        meter.add(result)
        if not result.success or result.data is None:
            raise RoleFailed(f"the model's {tool_name} answer failed validation: "
                             f"{'; '.join(result.validation_errors[:3])}", meter.cost)
        return result.data


# ---------------------------------------------------------------------------------------------- context


def repository_digest(root: Path, goal: Goal, *, budget: int = 60_000, per_file: int = 20_000) -> str:
    """A listing of the repository and the text of its small files (sealed files named, not shown)."""
    sealed = SealedPaths(goal.sealed_paths)
    try:
        files = GitRepo(root).git("ls-files").stdout.splitlines()
    except HarnessError:
        files = []
    ideas = f"goals/{goal.slug}/ideas/"
    mentioned = [f for f in files if f in goal.objective]
    ordered = mentioned + [f for f in files if f not in mentioned]
    parts = ["Files in the repository (sealed ones marked):"]
    parts += [f"- {f}{'  [SEALED: do not change]' if sealed.match(f) else ''}" for f in files[:400]]
    used = 0
    for name in ordered:
        if sealed.match(name) or name.startswith(ideas) or Path(name).suffix not in _TEXT_SUFFIXES:
            continue
        path = root / name
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if len(text) > per_file or used + len(text) > budget:
            continue
        used += len(text)
        parts.append(f"\n=== {name} ===\n{text}")
    return "\n".join(parts)


def goal_summary(goal: Goal) -> str:
    families = "\n".join(f"- {tag}: {desc}" for tag, desc in goal.families)
    phases = "\n".join(f"- {p.phase} ({p.status}): {p.focus}; targets {', '.join(map(str, p.targets)) or 'none'}"
                       for p in goal.phases) or "- none"
    return (f"Goal: {goal.title}\nObjective: {goal.objective}\n"
            f"Metric: {goal.metric.name} ({goal.metric.direction})\n"
            f"Sealed paths (never change them): {', '.join(goal.sealed_paths)}\n"
            f"Phases:\n{phases}\nApproach families:\n{families}")


def history_summary(history: list[dict[str, Any]]) -> str:
    if not history:
        return "No earlier iterations."
    lines = []
    for h in history:
        w = h.get("winner")
        lines.append(f"Iteration {h['iteration']} (baseline {h.get('baseline_score')}): "
                     + (f"winner {w['plan_id']} [{w['approach_family']}] score {w['score']}: {w['hypothesis']}"
                        if w else "no winner"))
        for loser in h.get("losers", []):
            fa = loser.get("failure_analysis") or {}
            lines.append(f"  lost {loser['plan_id']} [{loser['approach_family']}] score {loser.get('score')}: "
                         f"{fa.get('category')}: {fa.get('what')} Lesson: {fa.get('lesson')}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- roles


def _brief_schema(goal: Goal) -> dict[str, Any]:
    item = contract("research_brief")["properties"]["ideas"]["items"]
    item = json.loads(json.dumps(item))
    item["properties"]["approach_family"] = {"enum": goal.family_tags}
    return {"type": "object", "required": ["repo_analysis_summary", "ideas"],
            "properties": {"repo_analysis_summary": {"type": "string"},
                           "ideas": {"type": "array", "items": item, "minItems": 1, "maxItems": 8}}}


def research(access: ModelAccess, goal: Goal, root: Path, iteration: int, history: list[dict[str, Any]]
             ) -> dict[str, Any]:
    """Seed 001's research brief for ``iteration``."""
    meter = CostMeter()
    data = access.generate(
        meter,
        system=("You are the researcher of a self-improvement tournament. Study the repository and the history, "
                "then list concrete, evidence-backed ideas that could move the metric. Never propose changing "
                "sealed paths."),
        prompt=f"{goal_summary(goal)}\n\nHistory:\n{history_summary(history)}\n\n{repository_digest(root, goal)}",
        schema=_brief_schema(goal), tool_name="submit_research_brief")
    return {"iteration": iteration, "researcher_id": "researcher", **data, "cost": meter.cost}


def _planner_schema(goal: Goal) -> dict[str, Any]:
    plan = json.loads(json.dumps(contract("plan")))
    props = {k: plan["properties"][k] for k in ("hypothesis", "target_files", "steps", "expected_outcome",
                                                  "history_reference")}
    props["approach_family"] = {"enum": goal.family_tags}
    props["diff"] = {"type": "string", "description": "optional: a unified diff (--- a/path, +++ b/path) "
                     "relative to the repository root that carries out the plan exactly"}
    return {"type": "object", "required": ["hypothesis", "approach_family", "target_files", "steps",
                                           "expected_outcome", "history_reference"], "properties": props}


def plan(access: ModelAccess, goal: Goal, root: Path, iteration: int, planner_id: str,
         brief: dict[str, Any] | None, history: list[dict[str, Any]], taken_families: list[str]) -> dict[str, Any]:
    """One model planner's plan document (critic fields not set yet)."""
    meter = CostMeter()
    brief_text = json.dumps({k: brief[k] for k in ("repo_analysis_summary", "ideas")}, indent=1) if brief else "none"
    data = access.generate(
        meter,
        system=(f"You are {planner_id}, one of several planners working in parallel in a self-improvement "
                "tournament. Propose exactly ONE hypothesis ('Doing X should improve Y because Z'), one approach "
                "family, and concrete steps. Learn from the history: build on winners, avoid repeating failures. "
                "Never touch sealed paths. If you can, include a unified diff that carries the plan out."),
        prompt=(f"{goal_summary(goal)}\n\nResearch brief:\n{brief_text}\n\nHistory:\n{history_summary(history)}\n\n"
                f"Approach families other plans of this round already use (pick another if you can): "
                f"{', '.join(taken_families) or 'none'}\n\n{repository_digest(root, goal)}"),
        schema=_planner_schema(goal), tool_name="submit_plan")
    out = {"plan_id": f"round_{iteration}_{planner_id}", "planner_id": planner_id, "round": iteration,
           "critic_approved": False, **data, "source": f"model planner {planner_id}", "cost": meter.cost}
    out.setdefault("diff", None)
    out["expected_outcome"].setdefault("sub_score_expectations", {})
    return out


def architect_review(access: ModelAccess, goal: Goal, plan_doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The architect's verdict on one approved plan, and its cost."""
    meter = CostMeter()
    schema = json.loads(json.dumps(contract("plan")["properties"]["architect_review"]))
    schema.pop("additionalProperties", None)
    schema["properties"].pop("reviewed", None)  # the harness's to set, not the model's
    shown = {k: v for k, v in plan_doc.items() if k not in ("cost", "critic_review")}
    data = access.generate(
        meter,
        system=("You are the architect. Review a plan for structural problems: does it change the right files, keep "
                "the code coherent, stay out of sealed paths, and test one idea? Reject only for real concerns."),
        prompt=f"{goal_summary(goal)}\n\nPlan:\n{json.dumps(shown, indent=1)}",
        schema=schema, tool_name="submit_architect_review")
    return data, meter.cost


def run_parallel(jobs: dict[str, Any], workers: int) -> dict[str, tuple[Any, BaseException | None]]:
    """Run ``{name: callable}`` in threads; return ``{name: (result, error)}`` in the jobs' order."""
    out: dict[str, tuple[Any, BaseException | None]] = {}
    if not jobs:
        return out
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs))), thread_name_prefix="harness-model") as pool:
        futures = {name: pool.submit(fn) for name, fn in jobs.items()}
        for name, future in futures.items():
            try:
                out[name] = (future.result(), None)
            except Exception as exc:  # noqa: BLE001 - recorded per job
                out[name] = (None, exc)
    return out
