"""The built-in kinds of producer, reviser and evaluator (``prompt``, ``template``, ``python``, ``command``, and the
evaluator's ``steps``: a judge program), as a plugin of our own hooks: registered when the harness activates in a
session, last, so a plugin's kind of the same name wins."""

from __future__ import annotations

import dataclasses

import pytest

from harness.base.fields import Fields
from harness.base.models import AgentConfig, RunnerSpec
from harness.evaluation.judge_program import GeneratedOnce, JudgeProgramRunner
from harness.evaluation.llm_judge import LlmJudge
from harness.evaluation.runners import CommandRunner, PromptRunner, PythonRunner, Runner, TemplateRunner
from harness.face.session import HarnessSession, harness_session
from harness.loading.judge_programs import load_judge_program
from harness.loading.library import file_roots
from harness.loading.suites import BUILTIN_RUNNER_KINDS, model_name


@pytest.hookimpl(trylast=True)
def pytest_harness_make_runner(spec: RunnerSpec, role: str, agent: AgentConfig,
                               config: pytest.Config) -> Runner | None:
    session = harness_session(config)
    if spec.kind == "python":
        return PythonRunner(spec, role, session.import_root)
    if spec.kind == "command":
        return CommandRunner(spec, role, agent.name, session.import_root, session.work_dir,
                             session.unconfined_runners, approved_names=session.approved_runners)
    if spec.kind in ("prompt", "template"):
        client = session.model_client(session.model_for(agent, role))
        if not config.option.collectonly:
            client.preload()
        if role == "evaluator":
            return LlmJudge(agent.prompts.get(role), client, template=agent.templates.get(role),
                            style=agent.judge_style, notice=session.prefix_notes.add,
                            prompt_cache=session.prompt_cache)
        if spec.kind == "template":
            return TemplateRunner(agent.templates[role], client)
        return PromptRunner(agent, role, client)
    if spec.kind == "steps":
        return _judge_program(spec, role, agent, session, preload=not config.option.collectonly)
    return None


def _judge_program(spec: RunnerSpec, role: str, agent: AgentConfig, session: HarnessSession, *,
                   preload: bool) -> JudgeProgramRunner:
    """``evaluator: {steps: FILE, model: ...}``: the judge program (read once per session, like a rubric) on the
    judge's model, its steps made once per rubric kept for the session (docs/judge-programs.md)."""
    roots = file_roots(spec.file, tuple(session.input_roots or (session.import_root,)))  # a grader's: the library
    place = Fields.of(spec.file, spec.field, roots=roots)
    example = "`evaluator: {steps: judges/relevancy.steps.yaml}`"
    own = place.section(spec.options, known=("model",), example=example)
    if role != "evaluator":
        raise place.error("steps", f"a judge program scores an artifact, and this runner is the {role}",
                          f"name the program as the evaluator, {example}")
    path = place.project_path(spec.target, "steps", example=f"a judge program inside the project, relative to "
                              f"{spec.file.name}")
    if not path.is_file():
        raise place.error("steps", f"no judge program file {path}", f"fix the path; it is relative to "
                          f"{spec.file.name}")
    program = session.cached("judge-program", path, lambda: load_judge_program(path, roots=roots))
    settings = session.model_for(agent, role)
    if "model" in own:  # the evaluator's own model, as a prompt evaluator's; --harness-judge-model still wins
        named = model_name(own, "model", settings.model)
        settings = settings if session.judge_model else dataclasses.replace(settings, model=named)
    client = session.model_client(settings)
    if preload:
        client.preload()
    return JudgeProgramRunner(program, client, session.cached("judge-program-once", path, GeneratedOnce))


def pytest_harness_runner_kinds() -> list[str]:
    return list(BUILTIN_RUNNER_KINDS)
