"""``anthropic/...`` (and every bare model name): the Messages API through the official ``anthropic`` SDK.

Prompt caching (the stable system prefix is marked ``cache_control: ephemeral``) and Message Batches (through
:class:`~harness.llm.batching.Batcher`) are used where the policy asks. The SDK is imported on the first call,
or in the background by :meth:`AnthropicProvider.preload`: ``import anthropic`` alone takes over a second.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.base.usage import Usage
from harness.llm.providers import ProviderPolicy, SdkErrors, SdkProvider
from harness.llm.types import Message, ModelReply, ModelRequest, ToolCall

if TYPE_CHECKING:
    import anthropic

    from harness.base.models import ModelSettings

DEFAULT_BASE_URL = "https://api.anthropic.com"
KEY_VARIABLE = "ANTHROPIC_API_KEY"

_PRELOAD_LOCK = threading.Lock()
_IMPORT_LOCK = threading.Lock()
_preloading: threading.Thread | None = None


def import_sdk() -> Any:
    """``import anthropic`` with the garbage collector paused, then ``gc.freeze()``.

    The import builds hundreds of thousands of long-lived objects (the SDK's pydantic types): collecting
    while they are built only walks them again and again (the import takes about 1.2 s instead of
    1.4-1.8 s without), and once frozen, no full collection of the session walks them any more. They
    live as long as the process anyway.
    """
    with _IMPORT_LOCK:
        if "anthropic" not in sys.modules:  # else imported already (or being imported: the import waits)
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                importlib.import_module("anthropic")
            finally:
                gc.freeze()
                if was_enabled:
                    gc.enable()
    return importlib.import_module("anthropic")


def _import_quietly() -> None:
    """The background import: a broken install is said by the call that needs the SDK, not by a thread."""
    try:
        import_sdk()
    except Exception:  # noqa: BLE001 - the call imports it again and says why it cannot, as one line
        pass


def _preload_sdk() -> None:
    global _preloading
    with _PRELOAD_LOCK:
        if _preloading is None:
            _preloading = threading.Thread(target=_import_quietly, name="harness-sdk-import")
            _preloading.start()


class AnthropicProvider(SdkProvider):
    name = "anthropic"
    supports_batch = True
    url_variable = "ANTHROPIC_BASE_URL"
    api_name = "the Messages API"
    call_path = "/v1/messages"

    def __init__(self, settings: ModelSettings, policy: ProviderPolicy, *, api_key: str | None = None,
                 base_url: str | None = None):
        variable = settings.api_key_env or KEY_VARIABLE
        super().__init__(settings, policy, api_key=api_key if api_key is not None else os.environ.get(variable),
                         base_url=base_url or settings.base_url or os.environ.get(self.url_variable)
                         or DEFAULT_BASE_URL, key_variable=variable)

    def preload(self) -> None:
        _preload_sdk()

    def sends_temperature(self, model: str) -> bool:
        """Never: the installed SDK (anthropic 2.x) has no sampling parameters and sends API version 2026-10-21,
        which rejects ``temperature``, ``top_p`` and ``top_k`` with a 400 on every model (even at the default
        1.0). Under the older version 2023-06-01, Opus 4.7 and later reject them too. A model on Anthropic samples
        at its own default; the response cache is what makes a rerun reproducible (docs/model-calls.md)."""
        return False

    def sends(self, setting: str, model: str) -> bool:
        """Only ``stop`` (as ``stop_sequences``): ``temperature`` and ``top_p`` are refused (above), and the Messages
        API has no seed and no log probabilities."""
        return setting == "stop"

    def _make_sdk(self) -> anthropic.Anthropic:
        sdk = import_sdk()
        return sdk.Anthropic(api_key=self._api_key, base_url=self._base_url, timeout=self.settings.timeout_s,
                             max_retries=self.settings.max_retries, http_client=self.http_client(sdk))

    def usage_tokens(self, usage: Mapping[str, Any]) -> tuple[int, int]:
        written = int(usage.get("cache_creation_input_tokens") or 0)
        return int(usage.get("input_tokens") or 0) + written, int(usage.get("output_tokens") or 0)

    # -- one request ---------------------------------------------------------------------------------

    def send(self, request: ModelRequest, *, batch: bool = False) -> ModelReply:
        params = wire_params(request)
        sdk = self._client()
        try:
            if batch:
                batcher = self.policy.batcher
                assert batcher is not None
                future = batcher.submit(params, api=sdk.messages.batches, map_error=self.failure,
                                        group=(self._base_url, self._api_key), key=request.key,
                                        endpoint=self._base_url)
                message = future.result()  # the answer's JSON
            else:
                message = self.post_call(params)
        except Exception as err:
            raise self.failure(err) from None
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            raise self.not_the_api("without message content")
        return reply_from_message(message, request.model)

    def sdk_errors(self) -> SdkErrors:
        sdk = import_sdk()
        return SdkErrors(base=sdk.AnthropicError, timeout=sdk.APITimeoutError, connection=sdk.APIConnectionError,
                         status=sdk.APIStatusError, unreadable=sdk.APIResponseValidationError, overloaded=(529,))


# ---------------------------------------------------------------------------------------------------
# Wire format


def wire_params(request: ModelRequest) -> dict[str, Any]:
    """The Messages API parameters of a neutral request (``temperature``, ``top_p``, ``seed`` and log probabilities
    are not among them: :meth:`AnthropicProvider.sends`)."""
    params: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens,
                              "messages": [_wire_message(m) for m in request.messages]}
    if request.stop:
        params["stop_sequences"] = list(request.stop)
    system = _system_param(request.system, request.cached_system_prefix)
    if system:
        params["system"] = system
    tools = [{"name": t.name, "description": t.description, "input_schema": t.schema} for t in request.tools]
    choice: dict[str, Any] | None = None
    if request.tool_choice == "any":
        choice = {"type": "any"}
    elif request.tool_choice:
        choice = {"type": "tool", "name": request.tool_choice}
    if request.output_schema is not None:  # structured output as a forced tool: every Messages model has tools
        tools.append({"name": request.output_name, "description": "Submit the result as this JSON.",
                      "input_schema": request.output_schema})
        choice = {"type": "tool", "name": request.output_name}
    if tools:
        params["tools"] = tools
        if not request.parallel_tools:
            choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice:
        params["tool_choice"] = choice
    return params


def _wire_message(message: Message) -> dict[str, Any]:
    if not message.tool_calls and not message.tool_results:
        head = min(message.cache_head, len(message.text))
        if head <= 0:
            return {"role": message.role, "content": message.text}
        # the stable start of the prompt ends inside this message: a breakpoint there (no empty block after it)
        blocks = [{"type": "text", "text": message.text[:head], "cache_control": {"type": "ephemeral"}}]
        return {"role": message.role, "content": blocks + [{"type": "text", "text": message.text[head:]}] * (
            head < len(message.text))}
    blocks: list[dict[str, Any]] = []
    for result in message.tool_results:
        blocks.append({"type": "tool_result", "tool_use_id": result.call_id, "content": result.content,
                       **({"is_error": True} if result.is_error else {})})
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
    return {"role": message.role, "content": blocks}


def _system_param(system: str, prefix: str | None) -> str | list[dict[str, Any]]:
    if not prefix:
        return system
    blocks: list[dict[str, Any]] = [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}}]
    if system:
        blocks.append({"type": "text", "text": system})
    return blocks


def reply_from_message(message: Mapping[str, Any], requested_model: str) -> ModelReply:
    """A ModelReply from a Messages API answer (its JSON, as a dict)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.get("content") or []:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            raw_input = block.get("input")
            calls.append(ToolCall(str(block.get("id") or ""), str(block.get("name") or ""),
                                  dict(raw_input) if isinstance(raw_input, Mapping) else {"_": raw_input}))
    u = message.get("usage") or {}
    usage = Usage(input_tokens=int(u.get("input_tokens") or 0), output_tokens=int(u.get("output_tokens") or 0),
                  cache_write_tokens=int(u.get("cache_creation_input_tokens") or 0),
                  cache_read_tokens=int(u.get("cache_read_input_tokens") or 0))
    return ModelReply(text="".join(texts), tool_calls=tuple(calls), usage=usage,
                      model=str(message.get("model") or requested_model), stop_reason=message.get("stop_reason"))
