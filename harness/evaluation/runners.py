"""The built-in kinds of producer, reviser and evaluator: ``prompt``, ``python`` and ``command``.

Every runner takes one typed request (:mod:`harness.base.requests`) and returns a ``RunnerOutput``. A ``command``
runner reads the request's JSON on stdin and a ``python`` runner's function receives it as a dict, so the
three kinds see the same thing.

A producer or reviser answers with the artifact text, or a JSON object
``{"artifact": "...", "flags": ["exec_level_partner"]}`` where flags can trigger escalation.
An evaluator answers with EvaluatorOutput JSON (seed 000 section 2), which the judges validate.

On a conversation case (docs/conversations.md) the producer is asked once per user turn
(:class:`harness.evaluation.conversation.Conversing`), the conversation so far in the request's ``messages``: a
``prompt`` or ``template`` runner sends them as chat messages, a ``python`` or ``command`` runner reads them in its
request's JSON.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import sys
import sysconfig
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.base import exit_codes
from harness.base.conversation import ChatMessage
from harness.base.errors import AgentRunError, ExitCode, ValidationFailed
from harness.base.models import AgentConfig, PromptTemplate, RunnerSpec
from harness.base.redaction import child_environment
from harness.base.requests import AgentRequest, JudgeRequest, render_messages
from harness.base.usage import Spend
from harness.checks import import_callable
from harness.llm import Message, ModelClient
from harness.safety import SafetyGuard
from harness.sandbox import Confinement, Finished, Limits, Sandbox, sandbox, unconfined

DEFAULT_COMMAND_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class RunnerOutput:
    text: str = ""
    flags: tuple[str, ...] = ()
    data: dict[str, Any] | None = None  # an evaluator's EvaluatorOutput
    # the model calls behind this output, per model (answers the response cache replayed count no tokens, $0)
    spend: Spend = field(default_factory=Spend)
    commands: tuple[CommandRun, ...] = ()  # the commands run to make it
    # the JSON Schema ``data`` was validated against as it came (an LLM judge's answer): not checked twice
    checked_against: dict[str, Any] | None = field(default=None, compare=False, repr=False)


Request = AgentRequest | JudgeRequest


class Runner(Protocol):
    def run(self, request: Request) -> RunnerOutput: ...


def output_from_answer(answer: Any, role: str, source: str) -> RunnerOutput:
    """Normalise what a callable or command returned into a RunnerOutput."""
    if role == "evaluator":
        if not isinstance(answer, dict):
            raise AgentRunError(f"{source}: evaluator returned {type(answer).__name__}, expected EvaluatorOutput JSON",
                                ExitCode.VALIDATION_FAILED)
        return RunnerOutput(data=answer)
    if role == "stage":  # a pipeline stage answers with its output: a mapping, a pydantic model, or JSON text
        dumped = getattr(answer, "model_dump", None)
        if callable(dumped):
            answer = dumped(mode="json")
        if isinstance(answer, dict):
            return RunnerOutput(data=answer, text=json.dumps(answer, ensure_ascii=False, default=str))
        if isinstance(answer, str):
            return RunnerOutput(text=answer)
        raise AgentRunError(f"{source}: the stage returned {type(answer).__name__}; expected its output (a mapping "
                            "or a pydantic model)", ExitCode.VALIDATION_FAILED)
    if isinstance(answer, str):
        return RunnerOutput(text=answer)
    if isinstance(answer, dict) and isinstance(answer.get("artifact"), str):
        flags = answer.get("flags") or []
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise AgentRunError(f"{source}: 'flags' must be a list of text")
        return RunnerOutput(text=answer["artifact"], flags=tuple(flags))
    raise AgentRunError(f"{source}: {role} returned {type(answer).__name__}; expected the artifact text "
                        "or {\"artifact\": text, \"flags\": [...]}")


# --- python ------------------------------------------------------------------------------------

class PythonRunner:
    def __init__(self, spec: RunnerSpec, role: str, import_root: Path):
        self.role = role
        self.source = spec.target
        self.import_root = import_root
        self.function = import_callable(spec.target, path=spec.file, field=spec.field, import_root=import_root)
        self.options = spec.options

    def run(self, request: Request) -> RunnerOutput:
        try:
            answer = self.function(request.wire(), **self.options)
        except Exception as exc:  # the user's code: one line, then the user's own frames (not ours, not libraries')
            frames = user_frames(exc, self.import_root)
            raise AgentRunError(f"{self.role} {self.source} raised {type(exc).__name__}: {exc}"
                                + (f"\n{frames}" if frames else "")) from exc
        return output_from_answer(answer, request.role, self.source)


_NOT_USER_CODE = tuple({str(Path(p).resolve()) for key, p in sysconfig.get_paths().items()
                        if key in ("stdlib", "platstdlib", "purelib", "platlib")} | {str(Path(__file__).parent)})


def user_frames(exc: BaseException, root: Path, limit: int = 8) -> str:
    """The traceback's frames in the user's code, pytest-style (``file:line in function`` and the line),
    the innermost ``limit`` of them; files under the project root are named relative to it."""
    shown = []
    for frame in traceback.extract_tb(exc.__traceback__):
        path = str(Path(frame.filename).resolve())
        if path.startswith(_NOT_USER_CODE) or frame.filename.startswith("<"):
            continue
        name = os.path.relpath(path, root) if path.startswith(str(root.resolve()) + os.sep) else path
        shown.append(f"  {name}:{frame.lineno} in {frame.name}" + (f"\n      {frame.line}" if frame.line else ""))
    return "\n".join(shown[-limit:])


# --- command -----------------------------------------------------------------------------------

# What a command may print: an artifact larger than this is cut, and a cut artifact is an error, never scored.
COMMAND_OUTPUT_KB = 8192


@dataclass(frozen=True)
class CommandRun:
    """What the records keep of one command run (``attempt_details.commands``)."""

    role: str
    confined: bool
    network: bool
    exit_code: int | None
    seconds: float
    limits_hit: tuple[str, ...] = ()
    leftovers: int = 0  # processes still running when it ended, stopped

    def wire(self) -> dict[str, Any]:
        return {"role": self.role, "confined": self.confined, "network": self.network, "exit_code": self.exit_code,
                "seconds": round(self.seconds, 3), "limits_hit": list(self.limits_hit), "leftovers": self.leftovers}


class CommandRunner:
    """A shell command: the request as JSON on stdin, the artifact (or JSON) on stdout.

    It runs in the sandbox (:mod:`harness.sandbox`): the project read-only (the work folder out of sight), its
    ``read`` and ``write`` folders, a private ``/tmp`` and ``$HOME``, no network unless ``network: true``, the
    allowlisted environment plus its ``env`` names, its time and memory bounds; nothing it starts outlives it.
    Where no sandbox can be made it is refused, unless the project's ini ``harness_unconfined`` names it. The
    SafetyGuard reads the command line first, as it would a plan's: what it blocks does not run, sandbox or not,
    until the project names the runner in ``harness_approved_commands`` (a person's approval; it still runs in
    the sandbox).
    """

    def __init__(self, spec: RunnerSpec, role: str, agent: str, project: Path, work_dir: Path,
                 unconfined_names: tuple[str, ...] = (), *, approved_names: tuple[str, ...] = ()):
        self.role = role
        self.name = f"{agent}.{role}"
        self.command = _own_python(spec.target)
        self.project = project
        self.work_dir = work_dir
        options = spec.options
        self.timeout_s = float(options.get("timeout_s", DEFAULT_COMMAND_TIMEOUT_S))
        self.env_names = tuple(options.get("env", ()))
        self.network = bool(options.get("network", False))
        # like the command itself, which runs in the project root
        self.read = tuple((project / os.path.expanduser(p)).resolve() for p in options.get("read", ()))
        self.write = tuple((project / os.path.expanduser(p)).resolve() for p in options.get("write", ()))
        self.memory_mb = int(options.get("memory_mb", Limits.memory_mb))
        self.unconfined = self.name in unconfined_names or agent in unconfined_names
        self.approved = self.name in approved_names or agent in approved_names
        # where the project is does not matter here (the sandbox decides what the command sees): only what it runs
        self.verdict = SafetyGuard(workspace=None).check(self.command)

    def engine(self) -> Sandbox:
        if self.unconfined:
            return unconfined(f"ini harness_unconfined names {self.name}")
        return sandbox()

    def run(self, request: Request) -> RunnerOutput:
        if not self.verdict.safe and not self.approved:
            raise AgentRunError(f"{self.role} command refused by the SafetyGuard: {self.verdict.reason()}; the sandbox "
                                "would have confined it, but the command needs a person's approval (fix: change the "
                                f"command, or list {self.name} in ini harness_approved_commands: it still runs in "
                                "the sandbox)", ExitCode.BLOCKED)
        box = self.engine()
        if not box.available and not self.unconfined:
            raise AgentRunError(f"{self.role} command refused: no sandbox can be made here ({box.reason}); commands "
                                f"run confined or not at all (fix: install bubblewrap, or list {self.name} in ini "
                                "harness_unconfined to run it without the sandbox)", ExitCode.NO_PERMISSION)
        # the allowlist plus what the runner's env: declares, read now: never the API keys of the session
        confinement = Confinement(workdir=self.project, workdir_writable=False, env=child_environment(self.env_names),
                                  hidden=(self.work_dir,), read_only=self.read, writable=self.write,
                                  network=self.network)
        limits = Limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb, output_kb=COMMAND_OUTPUT_KB)
        done = box.run(["/bin/sh", "-c", self.command], confinement, limits, stdin=json.dumps(request.wire()))
        record = CommandRun(self.role, box.available, self.network and box.available, done.exit_code,
                            done.wall_ms / 1000.0, done.limits_hit, done.leftovers)
        try:
            return self._answer(done, limits, record, request.role)
        except AgentRunError as exc:
            exc.commands = (record,)
            raise

    def _answer(self, done: Finished, limits: Limits, record: CommandRun, asked: str) -> RunnerOutput:
        """What the command answered, read as what it was asked for (``asked``: the request's role)."""
        if done.timed_out:
            raise AgentRunError(f"{self.role} command timed out after {self.timeout_s:g}s: {self.command}",
                                ExitCode.TIMEOUT)
        problem = done.limit_problem(limits)
        if problem:
            raise AgentRunError(f"{self.role} command stopped: it {problem}: {self.command}",
                                ExitCode.QUOTA_EXCEEDED)
        if done.exit_code != 0:
            # the command's own code is the item's (65 stays 65; a signal N is 128+N): its triage depends on it
            tail = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            how = f"exited {done.exit_code} ({exit_codes.name(done.exit_code)})"
            if done.exit_code > exit_codes.SIGNAL_BASE:
                how = f"was killed by {signal_name(done.exit_code - exit_codes.SIGNAL_BASE)} (exit {done.exit_code})"
            raise AgentRunError(f"{self.role} command {how}: {self.command}: {tail}", done.exit_code)
        out = done.stdout
        stripped = out.strip()
        if stripped.startswith("{"):
            try:
                answer = output_from_answer(json.loads(stripped), asked, self.command)
                return dataclasses.replace(answer, commands=(record,))
            except json.JSONDecodeError:
                pass
        if asked == "evaluator":
            raise AgentRunError(f"evaluator command printed no JSON: {self.command}", ExitCode.VALIDATION_FAILED)
        return RunnerOutput(text=out, commands=(record,))


def _own_python(command: str) -> str:
    """A command starting with ``python`` or ``python3`` runs on the interpreter running pytest.

    That is the virtual environment the project was installed in, and it exists even where the
    machine has only ``python3`` (or neither on PATH).
    """
    first, _, rest = command.partition(" ")
    if first in ("python", "python3"):
        return f"{shlex.quote(sys.executable)} {rest}".rstrip()
    return command


# --- prompt ------------------------------------------------------------------------------------


class PromptRunner:
    """An LLM producer or reviser: the prompt file is the system prompt, the request the message."""

    def __init__(self, agent: AgentConfig, role: str, client: ModelClient):
        self.prompt = agent.prompts[role]
        self.role = role
        self.client = client

    def run(self, request: AgentRequest) -> RunnerOutput:
        if request.role == "stage":
            return self._stage(request)
        if request.messages:  # a conversation's turn: the prompt, the case's system prompt and inputs are the system
            inputs = (f"The case's inputs:\n```json\n{json.dumps(request.inputs, indent=2, default=str)}\n```"
                      if request.inputs else "")
            system, chat = chat_messages(request.messages)
            reply = self.client.complete(system="\n\n".join(filter(None, [self.prompt.text, system, inputs])),
                                         messages=chat, batch=False)
            return RunnerOutput(text=reply.text, spend=reply.spend)
        if request.role == "producer":
            ask = "Produce the artifact for these inputs. Answer with the artifact only."
            body: dict[str, Any] = {"inputs": request.inputs}
        else:
            ask = ("Revise the artifact so that it meets the rubric. Apply every suggested fix. "
                   "Answer with the revised artifact only.")
            body = {"inputs": request.inputs, "artifact": request.artifact, "evaluation": request.evaluation,
                    "suggested_fixes": list(request.suggested_fixes)}
        message = f"{ask}\n\n```json\n{json.dumps(body, indent=2, default=str)}\n```"
        # batch=False: --harness-batch sends the judges' requests as batches; producers and revisers
        # answer directly, since the loop cannot go on without them.
        reply = self.client.complete(system=self.prompt.text, messages=[Message.user(message)], batch=False)
        return RunnerOutput(text=reply.text, spend=reply.spend)

    def _stage(self, request: AgentRequest) -> RunnerOutput:
        """A pipeline stage on a model: its output asked for as JSON of the stage's type (a forced tool call, or
        the server's JSON Schema output), checked, and asked once more with the errors shown when it does not fit;
        a stage that declares no type answers in text, read as JSON by the stage."""
        body = {key: request.inputs[key] for key in request.inputs if key != "pipeline"}
        message = (f"Answer for stage {request.inputs.get('pipeline', {}).get('stage', request.agent)} of this run. "
                   f"The request, and what the stages before this one made (context):\n\n"
                   f"```json\n{json.dumps(body, indent=2, default=str)}\n```")
        if request.schema is None:
            reply = self.client.complete(system=self.prompt.text, messages=[Message.user(message)], batch=False)
            return RunnerOutput(text=reply.text, spend=reply.spend)
        result = self.client.generate_json(system=self.prompt.text, prompt=message, schema=request.schema,
                                           cache_extra={"stage": request.agent}, batch=False)
        if not result.success:
            raise ValidationFailed(f"{request.agent}: the model's answer does not match the stage's output type after "
                                   f"{result.attempts} attempts: {'; '.join(result.validation_errors[:3])}",
                                   list(result.validation_errors), result.raw_response, spend=result.spend)
        return RunnerOutput(data=result.data, text=json.dumps(result.data, ensure_ascii=False), spend=result.spend)


class TemplateRunner:
    """An LLM producer or reviser whose prompt is a template used as written (promptfoo's prompts, a published task
    prompt), and the answer is the artifact. A text template filled is the whole message; a chat template's
    messages are sent in their roles, its system message as the system prompt."""

    def __init__(self, template: PromptTemplate, client: ModelClient):
        self.template = template
        self.client = client

    def run(self, request: AgentRequest) -> RunnerOutput:
        own = render_messages(self.template, request)
        if not request.messages:
            system, chat = chat_messages(own)
            reply = self.client.complete(system=system, messages=chat, batch=False)
            return RunnerOutput(text=reply.text, spend=reply.spend)
        # a conversation's turn: the template's system message and its messages before its last (a few-shot
        # exchange), then the conversation, each user turn filled into the template's last message as {input}
        template = self.template

        def filled(text: str) -> str:
            return render_messages(template, request, input_text=text)[-1].content

        own_system, preamble = chat_messages(own[:-1])
        system, chat = chat_messages(request.messages, filled)
        reply = self.client.complete(system="\n\n".join(filter(None, [own_system, system])),
                                     messages=[*preamble, *chat], batch=False)
        return RunnerOutput(text=reply.text, spend=reply.spend)


def chat_messages(messages: tuple[ChatMessage, ...], user: Callable[[str], str] = str) -> tuple[str, list[Message]]:
    """A conversation's (or a filled chat template's) system prompt, and its other messages as a model's chat
    messages (each user message's text through ``user``), in the order they were said."""
    system = "\n\n".join(message.content for message in messages if message.role == "system")
    return system, [Message.user(user(message.content)) if message.role == "user"
                    else Message.assistant(message.content) for message in messages if message.role != "system"]


def signal_name(number: int) -> str:
    """``SIGTERM`` for 15; ``signal 99`` for a number no signal has."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
