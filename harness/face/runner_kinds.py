"""The built-in kinds of producer, reviser and evaluator (``prompt``, ``template``, ``python``, ``command``), as a
plugin of our own hooks: registered when the harness activates in a session, last, so a plugin's kind of the
same name wins."""

from __future__ import annotations

import pytest

from harness.base.models import AgentConfig, RunnerSpec
from harness.evaluation.llm_judge import LlmJudge
from harness.evaluation.runners import CommandRunner, PromptRunner, PythonRunner, Runner, TemplateRunner
from harness.face.session import harness_session
from harness.loading.suites import BUILTIN_RUNNER_KINDS


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
                            style=agent.judge_style)
        if spec.kind == "template":
            return TemplateRunner(agent.templates[role], client)
        return PromptRunner(agent, role, client)
    return None


def pytest_harness_runner_kinds() -> list[str]:
    return list(BUILTIN_RUNNER_KINDS)
