"""A skill's own handler (``implementation``): a Python callable, a command run in the sandbox, or an HTTP call.

Each gets the skill's input (the case's inputs, a JSON object) and gives back the skill's output (any JSON value):

* ``python_function``: ``handler(input) -> output``, called in the session's process;
* ``cli_command``: the input as JSON on stdin, the output as JSON on stdout; run as command runners are
  (:class:`~harness.evaluation.runners.CommandRunner`: in the sandbox, the project read-only, no network unless
  ``policy.network``, the allowlisted environment plus ``policy.env``, ``policy.timeout_s``), refused where no
  sandbox can be made unless ini ``harness_unconfined`` names the skill;
* ``http_call``: the input POSTed as JSON to the URL, the answer's JSON body the output (``policy.timeout_s``).

A handler that fails is an :class:`~harness.base.errors.AgentRunError` with its exit code (a command's own,
a timeout's 81, an unreachable server's 69), which ends the attempt as an error.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.errors import AgentRunError, ExitCode
from harness.base.fields import one_line
from harness.base.models import RunnerSpec
from harness.evaluation.runners import DEFAULT_COMMAND_TIMEOUT_S, CommandRun, CommandRunner, RunnerOutput, user_frames
from harness.loading.skills import Skill
from harness.sandbox import Finished, Limits

HTTP_ANSWER_LIMIT = 8 * 1024 * 1024  # bytes of an HTTP handler's answer read at most; more is an error


@dataclass(frozen=True)
class HandlerOutput:
    """What a handler gave back, and the commands it ran (for the records)."""

    output: Any
    commands: tuple[CommandRun, ...] = ()


@dataclass(frozen=True)
class _Input:
    """The request a command handler reads: the skill's input itself, as JSON on stdin."""

    role: str
    inputs: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        return self.inputs


class _CommandHandler(CommandRunner):
    """A command runner whose stdout is the skill's output, read as JSON by the caller."""

    def _answer(self, done: Finished, limits: Limits, record: CommandRun, asked: str) -> RunnerOutput:
        if done.exit_code == 0 and not done.timed_out and not done.limit_problem(limits):
            return RunnerOutput(text=done.stdout, commands=(record,))
        return super()._answer(done, limits, record, asked)  # the failure, worded as every command runner's is


def call_handler(skill: Skill, inputs: dict[str, Any], *, project: Path, work_dir: Path,
                 unconfined: tuple[str, ...]) -> HandlerOutput:
    """Run ``skill``'s handler on ``inputs``."""
    implementation = skill.implementation
    assert implementation is not None
    if implementation.type == "python_function":
        assert implementation.function is not None
        try:
            output = implementation.function(inputs)
        except Exception as exc:  # the user's code: one line, then the user's own frames
            frames = user_frames(exc, project)
            raise AgentRunError(f"handler {implementation.handler} raised {type(exc).__name__}: {exc}"
                                + (f"\n{frames}" if frames else "")) from exc
        return HandlerOutput(output)
    if implementation.type == "cli_command":
        return _command(skill, inputs, project, work_dir, unconfined)
    return HandlerOutput(_http(skill, inputs))


def _command(skill: Skill, inputs: dict[str, Any], project: Path, work_dir: Path,
             unconfined: tuple[str, ...]) -> HandlerOutput:
    assert skill.implementation is not None
    policy = skill.policy
    spec = RunnerSpec(kind="command", target=skill.implementation.handler, base_dir=skill.path.parent,
                      file=skill.path, field="implementation.handler",
                      options={"timeout_s": policy.timeout_s or DEFAULT_COMMAND_TIMEOUT_S, "env": list(policy.env),
                               "network": policy.network})
    runner = _CommandHandler(spec, "handler", skill.skill_id, project, work_dir, unconfined)
    made = runner.run(_Input("handler", inputs))  # type: ignore[arg-type]  # a command reads only wire()
    try:
        return HandlerOutput(json.loads(made.text), made.commands)
    except json.JSONDecodeError as exc:
        error = AgentRunError(f"handler command printed no JSON ({exc.msg} at line {exc.lineno}): "
                              f"{one_line(made.text, 120) or '(nothing)'}", ExitCode.PROTOCOL)
        error.commands = made.commands  # type: ignore[attr-defined]  # the attempt records the run
        raise error from None


def _http(skill: Skill, inputs: dict[str, Any]) -> Any:
    assert skill.implementation is not None
    url = skill.implementation.handler
    timeout = skill.policy.timeout_s or DEFAULT_COMMAND_TIMEOUT_S
    request = urllib.request.Request(url, data=json.dumps(inputs).encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the project's own URL
            body = response.read(HTTP_ANSWER_LIMIT + 1)
    except urllib.error.HTTPError as exc:
        code = ExitCode.TEMP_FAIL if exc.code >= 500 or exc.code == 429 else ExitCode.DATA_ERROR
        raise AgentRunError(f"handler {url} answered HTTP {exc.code} {exc.reason}", code) from None
    except TimeoutError:
        raise AgentRunError(f"handler {url} did not answer within {timeout:g}s", ExitCode.TIMEOUT) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise AgentRunError(f"handler {url} did not answer within {timeout:g}s", ExitCode.TIMEOUT) from None
        raise AgentRunError(f"handler {url} cannot be reached: {reason}", ExitCode.UNAVAILABLE) from None
    if len(body) > HTTP_ANSWER_LIMIT:
        raise AgentRunError(f"handler {url} answered more than {HTTP_ANSWER_LIMIT // (1024 * 1024)} MB",
                            ExitCode.PROTOCOL)
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AgentRunError(f"handler {url} answered no JSON: {one_line(str(exc), 120)}", ExitCode.PROTOCOL) from None
