"""``LLM_JSON_GENERATION``: the document's generation flow, and the GenerationResult each attempt writes.

The input was validated against the skill's ``input_schema`` before this runs (a bad input makes no call). The
prompt's variables (the input) are checked against its ``vars_schema`` and the template rendered; the model is
asked for an answer matching the skill's ``output_schema`` (a forced tool call), the answer validated, and, unless
``retry_on_validation_failure: false``, asked once more with the validation errors shown. The GenerationResult
(:func:`generation_result`: the document's field names, the harness's additions) is recorded through the event
stream as ``attempt-{n}.generation.json``; an answer that is still invalid ends the attempt as
``validation_failed``, exit code 84.
"""

from __future__ import annotations

import re
import time
from typing import Any

from harness.base import jsonschemas
from harness.base.errors import ValidationFailed
from harness.base.events import Generated
from harness.evaluation.runners import RunnerOutput
from harness.evaluation.steps import Attempt
from harness.llm import GenerationResult, ModelClient
from harness.loading.skills import Skill

TOOL_NAME = "submit_result"
_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def generate(skill: Skill, inputs: dict[str, Any], attempt: Attempt, client: ModelClient) -> Any:
    """The generation flow for one attempt: the validated answer, recorded; ValidationFailed when there is none."""
    config = skill.generation
    assert config is not None and skill.output_schema is not None
    started = time.perf_counter()
    prompt = config.prompt.render(inputs)
    render_ms = (time.perf_counter() - started) * 1000
    result = client.generate_json(
        system="", prompt=prompt, schema=skill.output_schema, tool_name=TOOL_NAME,
        retry=config.retry_on_validation_failure,
        cache_extra={"skill": f"{skill.skill_id}@{skill.version}",
                     "prompt": f"{config.prompt.prompt_id}@{config.prompt.version}"})
    attempt.outputs.append(RunnerOutput(spend=result.spend))  # billed whatever the answer was worth
    record = generation_result(result, skill, client, render_ms=render_ms, prompt=prompt)
    problems = jsonschemas.contract_errors("generation_result", record)
    if problems:
        raise RuntimeError(f"harness bug: the GenerationResult of {skill.skill_id} breaks the generation contract: "
                           f"{'; '.join(problems)}")
    run = attempt.run
    run.events.emit(Generated(run.nodeid, attempt.number, record, location=run.location))
    if not result.success:
        tries = f"{result.attempts} attempt{'s' * (result.attempts != 1)}"
        retry = "" if config.retry_on_validation_failure else " (retry_on_validation_failure is off)"
        where = run.location.shown_directory or str(run.location.directory)
        raise ValidationFailed(f"the model's answer does not match {skill.skill_id}'s output_schema "
                               f"after {tries}{retry}: {'; '.join(result.validation_errors[:3])} (its answer: "
                               f"{where}/attempt-{attempt.number}.generation.json)",
                               list(result.validation_errors), result.raw_response)
    return result.data


def generation_result(result: GenerationResult, skill: Skill, client: ModelClient, *, render_ms: float,
                      prompt: str) -> dict[str, Any]:
    """The GenerationResult as the generation contract writes it: ``success``, ``data`` (when it succeeded),
    ``rawResponse``, ``validationErrors`` (when it failed), ``attempts``, ``timings_ms`` (``prompt_render``,
    ``llm_call``, ``validation``, ``total``); and the harness's ``firstAttemptErrors``, ``skill``, ``prompt`` and
    ``model``."""
    config = skill.generation
    assert config is not None
    timings = dict(result.timings_ms)
    timings["prompt_render"] = round(render_ms, 3)
    timings["total"] = round(timings.get("total", 0.0) + render_ms, 3)
    out: dict[str, Any] = {"success": result.success}
    if result.success:
        out["data"] = result.data
    if skill.observability.record_raw_response and result.raw_response is not None:
        out["rawResponse"] = result.raw_response
    if not result.success:
        out["validationErrors"] = [schema_error(line) for line in result.validation_errors]
    out["attempts"] = result.attempts
    out["timings_ms"] = {key: timings.get(key, 0.0) for key in ("prompt_render", "llm_call", "validation", "total")}
    if result.first_errors:
        out["firstAttemptErrors"] = [schema_error(line) for line in result.first_errors]
    out["skill"] = {"skill_id": skill.skill_id, "version": skill.version}
    out["prompt"] = {"prompt_id": config.prompt.prompt_id, "version": config.prompt.version,
                     **({"text": prompt} if skill.observability.record_prompt else {})}
    settings = client.settings
    out["model"] = {"name": client.model, "temperature": settings.temperature, "max_tokens": settings.max_tokens,
                    "temperature_sent": client.temperature_sent}
    return out


def schema_error(line: str) -> dict[str, str]:
    """A validation error line (``key_points[2]: missing``) as a SchemaValidationError: ``instancePath`` (a JSON
    Pointer, as Ajv gives it), ``message``, and the harness's dotted ``path``."""
    where, _, message = line.partition(": ")
    if where == "(root)":
        where = ""
    steps = [m[1] or m[2] for m in _STEP.finditer(where)]
    pointer = "".join("/" + step.replace("~", "~0").replace("/", "~1") for step in steps)
    return {"instancePath": pointer, "message": message or line, "path": where}
