"""``mock/...``: an in-process model, deterministic and scriptable, with no network and no key.

It answers through the same client and policy as a real model (the response cache, usage, the records), so a
suite, a test of the harness or a user's own test can run whole and offline. Built-in models:

* ``mock/echo``: a text request is answered with the last user message; a request for JSON (a forced tool
  or an output schema) with a value the schema accepts. A judge's answer scores every dimension 1.0.
* ``mock/score-X`` (``mock/score-0.4``): as ``echo``, but a judge's answer scores every dimension X (on a
  ``scale``, the nearest rating; with exhaustive levels, the nearest level; with ``choices``, the first label).

Every model honours the request's ``stop`` sequences: a text answer ends before the first one found in it. None
returns log probabilities.

Script a model of your own in a conftest.py or a plugin::

    from harness.llm.providers.mock import MockAnswer, mock_model

    @mock_model("strict-judge")
    def strict_judge(request):             # a harness.llm.types.ModelRequest
        return {"overallScore": 0.2, ...}  # a dict answers a JSON request; a str is text; or a MockAnswer

and name it ``judge: {model: mock/strict-judge}``. Usage is counted at 4 characters a token; a mock model has
no price, so its cost is unknown unless a price file gives one.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.base.errors import ExitCode, ModelCallError
from harness.base.usage import Usage
from harness.llm.providers import Provider, status_error
from harness.llm.schema_fill import evaluator_output, placeholder
from harness.llm.types import ModelReply, ModelRequest, ToolCall


@dataclass(frozen=True)
class MockAnswer:
    """What a scripted mock model answers: text, a JSON value for a JSON request, or an error status."""

    text: str = ""
    data: dict[str, Any] | None = None
    error_status: int | None = None
    stop_reason: str = "end_turn"


Responder = Callable[[ModelRequest], "MockAnswer | dict[str, Any] | str"]
_SCORE = re.compile(r"^score-(?P<score>0(\.\d+)?|1(\.0+)?)$")
_scripted: dict[str, Responder] = {}
_lock = threading.Lock()
_ids = itertools.count(1)


def mock_model(name: str) -> Callable[[Responder], Responder]:
    """Register ``mock/NAME`` answered by the decorated function (replacing an earlier one of that name)."""

    def register(responder: Responder) -> Responder:
        with _lock:
            _scripted[name] = responder
        return responder

    return register


def forget_mock_model(name: str) -> None:
    with _lock:
        _scripted.pop(name, None)


class MockProvider(Provider):
    name = "mock"

    @classmethod
    def check_name(cls, name: str) -> str | None:
        """One line when ``mock/NAME`` is no model this provider has (known without a call)."""
        with _lock:
            known = sorted(_scripted)
        if name == "echo" or _SCORE.match(name) or name in known:
            return None
        scripted = f"; scripted: {', '.join(known)}" if known else ""
        return (f"no mock model {name!r}: use mock/echo, mock/score-X (X from 0 to 1), or script one with "
                f"@mock_model({name!r}) in a conftest.py{scripted}")

    @property
    def base_url(self) -> str:
        return "mock://"

    def sends(self, setting: str, model: str) -> bool:
        """Every setting but log probabilities, which the mock has none of (a weighted judge falls back to its plain
        rating). It honours ``stop``; ``temperature``, ``top_p`` and ``seed`` change nothing of its answers."""
        return setting != "logprobs"

    def send(self, request: ModelRequest, *, batch: bool = False) -> ModelReply:
        model = self.settings.name
        problem = self.check_name(model)
        if problem:
            raise ModelCallError(problem, ExitCode.CONFIG_ERROR)
        body = {"model": model, "messages": [m.text for m in request.messages], "max_tokens": request.max_tokens}
        return self.policy.http_attempt(lambda: self._answer(request), model_call=True, retry=False, body=body,
                                        tokens_used=lambda reply: (reply.usage.input_tokens,
                                                                   reply.usage.output_tokens))

    def _answer(self, request: ModelRequest) -> ModelReply:
        model = self.settings.name
        with _lock:
            responder = _scripted.get(model)
        answer = responder(request) if responder is not None else _built_in(model, request)
        if isinstance(answer, str):
            answer = MockAnswer(text=answer)
        elif isinstance(answer, dict):
            answer = MockAnswer(data=answer)
        if answer.error_status is not None:
            raise status_error(answer.error_status, str(answer.error_status), "the mock model was scripted to fail",
                               model=model, after="retries off", key_variable="(none)")
        schema_tool = request.tool_choice if request.tool_choice not in (None, "any") else None
        if answer.data is not None and (schema_tool or request.tools) and request.output_schema is None:
            name = schema_tool or request.tools[0].name
            calls: tuple[ToolCall, ...] = (ToolCall(f"mock_{next(_ids)}", name, answer.data),)
            text, stop = answer.text, "tool_use"
        else:
            calls = ()
            text = answer.text if answer.data is None else json.dumps(answer.data)
            stop = answer.stop_reason
            cut = min((at for at in (text.find(sequence) for sequence in request.stop) if at >= 0), default=-1)
            if cut >= 0:  # as a real model: the answer ends before the first stop sequence, which it leaves out
                text, stop = text[:cut], "stop_sequence"
        sent = json.dumps([request.system, request.cached_system_prefix, request.cache_payload()["messages"]])
        usage = Usage(input_tokens=max(1, len(sent) // 4), output_tokens=max(1, (len(text) + len(
            json.dumps([c.input for c in calls]))) // 4))
        return ModelReply(text=text, tool_calls=calls, usage=usage, model=f"mock/{model}", stop_reason=stop)


def _built_in(model: str, request: ModelRequest) -> MockAnswer:
    schema = _wanted_schema(request)
    if schema is None:
        last = next((m.text for m in reversed(request.messages) if m.role == "user" and m.text), "")
        return MockAnswer(text=last)
    match = _SCORE.match(model)
    score = float(match.group("score")) if match else 1.0
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    if "dimensionScores" in props:  # a judge's answer
        return MockAnswer(data=evaluator_output(schema, {}, score, 0.0))
    value = placeholder(schema, schema)
    return MockAnswer(data=value if isinstance(value, dict) else {"value": value})


def _wanted_schema(request: ModelRequest) -> dict[str, Any] | None:
    if request.output_schema is not None:
        return request.output_schema
    forced = next((t for t in request.tools if t.name == request.tool_choice), None)
    return forced.schema if forced is not None else None
