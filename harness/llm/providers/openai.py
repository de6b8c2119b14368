"""``openai/...``: chat completions through the official ``openai`` SDK (``pip install -e ".[openai]"``).

The same path serves OpenAI and every OpenAI-compatible server (vLLM, Ollama, llama.cpp's server, a LiteLLM
proxy): the base URL comes from the settings' ``base_url`` or ``OPENAI_BASE_URL``, the key from the variable
the settings name or ``OPENAI_API_KEY``. A server of one's own often needs no key: with a base URL that is
not OpenAI's and no key, a placeholder key is sent.

The policy's bound and rate limits hold per HTTP attempt through the SDK client's send, as for every SDK
provider (:meth:`~harness.llm.providers.SdkProvider.http_client`). Note that ``prompt_tokens`` includes the
cached tokens, which are recorded as cache reads.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.base.errors import ExitCode, ModelCallError
from harness.base.usage import Usage
from harness.llm.providers import ProviderPolicy, SdkErrors, SdkProvider
from harness.llm.types import Message, ModelReply, ModelRequest, TokenLogprob, ToolCall

if TYPE_CHECKING:
    import openai

    from harness.base.models import ModelSettings

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VARIABLE = "OPENAI_API_KEY"
_LOCAL_SERVER_KEY = "no-key-needed"  # OpenAI-compatible servers of one's own accept any key
# OpenAI's models that take only the default temperature (the reasoning models): o1, o3, o4-mini, gpt-5, gpt-6, ...
_DEFAULT_TEMPERATURE_ONLY = re.compile(r"^(o\d|gpt-([5-9]|\d{2,}))")
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                 "content_filter": "refusal"}
_preloading: threading.Thread | None = None
_preload_lock = threading.Lock()


MISSING_SDK = ("openai/... models need the openai package, which is not installed: pip install "
               "'pytest-rubric[openai]' (or pip install openai)")


def import_sdk() -> Any:
    try:
        return importlib.import_module("openai")
    except ImportError:
        raise ModelCallError(MISSING_SDK, ExitCode.CONFIG_ERROR) from None


def sdk_installed() -> bool:
    """Whether ``import openai`` can work, known without importing it (the import takes a second)."""
    try:
        return importlib.util.find_spec("openai") is not None
    except (ImportError, ValueError):
        return False


def _preload_quietly() -> None:
    """The background import: a failure is said once, by the collection error or the call, not by a thread."""
    try:
        import_sdk()
    except Exception:  # noqa: BLE001 - the call that needs the SDK raises it again, as one line
        pass


class OpenAIProvider(SdkProvider):
    name = "openai"
    url_variable = "OPENAI_BASE_URL"
    api_name = "a chat completions API"
    call_path = "/chat/completions"
    key_hint = " (nor OPENAI_BASE_URL for a server of your own)"

    def __init__(self, settings: ModelSettings, policy: ProviderPolicy, *, api_key: str | None = None,
                 base_url: str | None = None):
        variable = settings.api_key_env or KEY_VARIABLE
        given_url = base_url or settings.base_url or os.environ.get(self.url_variable)
        key = api_key if api_key is not None else os.environ.get(variable)
        if not key and given_url and not given_url.startswith(DEFAULT_BASE_URL):
            key = _LOCAL_SERVER_KEY
        super().__init__(settings, policy, api_key=key, base_url=given_url or DEFAULT_BASE_URL,
                         key_variable=variable)

    @classmethod
    def check_name(cls, name: str) -> str | None:
        """What is known before any call: without the optional SDK, no openai/... model can be called."""
        return None if sdk_installed() else MISSING_SDK

    @property
    def _is_openai(self) -> bool:
        return self._base_url.startswith(DEFAULT_BASE_URL)

    def sends_temperature(self, model: str) -> bool:
        """OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 and later) accept only the default temperature, 1,
        and answer any other value with a 400: on OpenAI's API they get none (they sample at their default).
        Other models, and every server of your own (vLLM, Ollama, a proxy), get the setting."""
        return not (self._is_openai and _DEFAULT_TEMPERATURE_ONLY.match(model) is not None)

    def sends(self, setting: str, model: str) -> bool:
        """OpenAI's reasoning models refuse ``top_p``, ``stop`` and ``logprobs`` as they refuse ``temperature``:
        they get only ``seed``. Every other model and server gets them all."""
        return setting == "seed" or self.sends_temperature(model)

    def preload(self) -> None:
        global _preloading
        with _preload_lock:
            if _preloading is None:
                _preloading = threading.Thread(target=_preload_quietly, name="harness-openai-import", daemon=True)
                _preloading.start()

    def _make_sdk(self) -> openai.OpenAI:
        sdk = import_sdk()
        return sdk.OpenAI(api_key=self._api_key, base_url=self._base_url, timeout=self.settings.timeout_s,
                          max_retries=self.settings.max_retries, http_client=self.http_client(sdk))

    def usage_tokens(self, usage: Mapping[str, Any]) -> tuple[int, int]:
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)

    # -- one request ---------------------------------------------------------------------------------

    def send(self, request: ModelRequest, *, batch: bool = False) -> ModelReply:
        params = self.wire_params(request)
        try:
            body = self.post_call(params)
        except Exception as err:
            raise self.failure(err) from None
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise self.not_the_api("without choices")
        return reply_from_completion(body, request.model)

    def wire_params(self, request: ModelRequest) -> dict[str, Any]:
        """The chat completions parameters of a neutral request."""
        messages: list[dict[str, Any]] = []
        system = "\n\n".join(part for part in (request.cached_system_prefix, request.system) if part)
        if system:  # OpenAI caches a repeated prompt prefix by itself: the stable prefix goes first
            messages.append({"role": "system", "content": system})
        for message in request.messages:
            messages.extend(_wire_messages(message))
        # OpenAI's newer models take only max_completion_tokens; compatible servers know max_tokens
        limit = "max_completion_tokens" if self._is_openai else "max_tokens"
        params: dict[str, Any] = {"model": request.model, "messages": messages, limit: request.max_tokens}
        if self.sends_temperature(request.model):
            params["temperature"] = request.temperature
        sent = {"top_p": request.top_p, "stop": list(request.stop) or None, "seed": request.seed}
        params.update({key: value for key, value in sent.items()
                       if value is not None and self.sends(key, request.model)})
        if request.top_logprobs and self.sends("logprobs", request.model):
            params.update(logprobs=True, top_logprobs=request.top_logprobs)
        if request.tools:
            params["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                                 "parameters": t.schema}} for t in request.tools]
            if request.tool_choice == "any":
                params["tool_choice"] = "required"
            elif request.tool_choice:
                params["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
            if not request.parallel_tools:
                params["parallel_tool_calls"] = False
        if request.output_schema is not None:
            params["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.output_name, "schema": request.output_schema, "strict": False}}
        return params

    def sdk_errors(self) -> SdkErrors:
        sdk = import_sdk()
        # OpenAI says "overloaded" with 503 (its 529 is no status of OpenAI's: a server error, as any 5xx)
        return SdkErrors(base=sdk.OpenAIError, timeout=sdk.APITimeoutError, connection=sdk.APIConnectionError,
                         status=sdk.APIStatusError, unreadable=sdk.APIResponseValidationError, overloaded=(503,))


def _wire_messages(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": r.call_id, "content": r.content}
                                 for r in message.tool_results]
    if message.tool_calls:
        out.append({"role": "assistant", "content": message.text or None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.input)}}
            for c in message.tool_calls]})
    elif message.text or not out:
        out.append({"role": message.role, "content": message.text})
    return out


def reply_from_completion(body: Mapping[str, Any], requested_model: str) -> ModelReply:
    """A ModelReply from a chat.completion (its JSON, as a dict)."""
    choice = body["choices"][0]
    message = choice.get("message") if isinstance(choice.get("message"), Mapping) else {}
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (ValueError, RecursionError):
            arguments = None
        if not isinstance(arguments, dict):  # not an object: shown to validation as the answer's text
            text = text or str(function.get("arguments"))
            continue
        calls.append(ToolCall(str(call.get("id") or ""), str(function.get("name") or ""), arguments))
    stop = _STOP_REASONS.get(str(choice.get("finish_reason")), choice.get("finish_reason"))
    if message.get("refusal"):
        text, stop = text or str(message["refusal"]), "refusal"
    u = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
    details = u.get("prompt_tokens_details") if isinstance(u.get("prompt_tokens_details"), Mapping) else {}
    cached = int(details.get("cached_tokens") or 0)
    usage = Usage(input_tokens=max(0, int(u.get("prompt_tokens") or 0) - cached),
                  output_tokens=int(u.get("completion_tokens") or 0), cache_read_tokens=cached)
    return ModelReply(text=text, tool_calls=tuple(calls), usage=usage,
                      model=f"openai/{body.get('model') or requested_model}", stop_reason=stop,
                      logprobs=_logprobs(choice.get("logprobs")))


def _logprobs(given: Any) -> tuple[TokenLogprob, ...] | None:
    """The answer's tokens with their log probabilities (``choices[0].logprobs.content``), or None when the server
    sent none (it was not asked, or it ignores the parameter) or sent something else."""
    content = given.get("content") if isinstance(given, Mapping) else None
    if not isinstance(content, list) or not content:
        return None
    tokens = []
    for entry in content:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
            return None
        top = tuple((str(alt["token"]), float(alt["logprob"])) for alt in entry.get("top_logprobs") or []
                    if isinstance(alt, Mapping) and isinstance(alt.get("token"), str)
                    and isinstance(alt.get("logprob"), (int, float)))
        logprob = entry.get("logprob")
        tokens.append(TokenLogprob(entry["token"], float(logprob) if isinstance(logprob, (int, float)) else 0.0, top))
    return tuple(tokens)
