"""What the staged kinds share (a construct's phases, a pipeline's stages): how one step runs and is scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.base.errors import HarnessConfigError
from harness.base.models import DEFAULT_THRESHOLD, AgentConfig, Rubric
from harness.evaluation.items.kinds import ItemContext, role_runner
from harness.evaluation.items.skill import skill_models, skill_rubric
from harness.loading.skills import Skill


def step_runners(context: ItemContext, *, own: Rubric, skill: Skill | None, agent: AgentConfig | None,
                 rubric_path: Path | None, file: Path, field: str, what: str) -> dict[str, Any]:
    """How one step of a staged item (a construct's phase, a pipeline's stage) runs and is scored: its ``rubric``
    (its goal's, its skill's, or the item's ``own``, not scored), ``scored``, ``threshold``, and its ``runner`` and
    ``judge``. ``skill`` is a loaded skill (None: run by ``agent``, or an optional skill the project lacks); ``what``
    names the step in an error (``phase``, ``stage``)."""
    if skill is not None:
        if skill.review is not None:
            rubric = context.rubric(skill.review.rubric_path)
            return dict(rubric=rubric, scored=True, threshold=rubric.effective_threshold(DEFAULT_THRESHOLD))
        return dict(rubric=skill_rubric(skill), scored=True, threshold=skill.policy.threshold)
    if agent is None:  # an optional skill the project does not have: the step is skipped, nothing to score
        return dict(rubric=own, scored=False, threshold=1.0)
    runner = role_runner(context, agent, "producer")
    if rubric_path is None:
        return dict(rubric=own, scored=False, threshold=1.0, runner=runner)
    rubric = context.rubric(rubric_path)
    if rubric.judged_dimensions and agent.evaluator is None:
        names = ", ".join(d.id for d in rubric.judged_dimensions)
        raise HarnessConfigError(file, field, f"rubric {rubric.name} has dimensions without a check ({names}) but "
                                 f"the {what} has no evaluator", "add `evaluator:` (an evaluator prompt .md, or "
                                 "{python: module:function}), or give those dimensions checks")
    judge = role_runner(context, agent, "evaluator") if agent.evaluator is not None else None
    return dict(rubric=rubric, scored=True, threshold=rubric.effective_threshold(DEFAULT_THRESHOLD), runner=runner,
                judge=judge)


def step_models(context: ItemContext, agent: AgentConfig | None, skill: Skill | None) -> list[str]:
    """The models one step may call (``provider/name``): its runners', or its skill's."""
    if agent is not None:
        return [context.model_name(agent, role) for role in agent.models]
    return [model.qualified for model in skill_models(skill, context)] if skill is not None else []
