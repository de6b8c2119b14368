"""The one module that talks to a model: the ``anthropic`` SDK behind a small, typed, thread-safe client.

Everything model-shaped in the harness goes through :class:`ModelClient`:

* :meth:`ModelClient.complete` sends one Messages API request (the SDK retries 429, 529, 5xx and
  connection errors itself, honouring ``retry-after``) and maps what is left to
  :class:`~harness.errors.ModelCallError` with a seed-004 exit code. No SDK exception escapes.
* :meth:`ModelClient.generate_json` is seed 003's generation flow: a forced tool call, JSON Schema
  validation (Draft 2020-12), and ONE retry that shows the model its answer and the errors.

Constructing a client never touches the network; the SDK client is built on the first call, and the
SDK itself is imported then too, so a pytest session that never calls a model does not pay for it.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.errors import ExitCode, ModelCallError, ModelUnavailable

if TYPE_CHECKING:  # both are imported on first use: `import anthropic` alone takes seconds
    import anthropic
    import jsonschema

DEFAULT_BASE_URL = "https://api.anthropic.com"


@dataclass(frozen=True)
class ModelSettings:
    """How to call the model. ``max_retries`` is the SDK's own retry budget per request.

    ``temperature`` is recorded but NOT sent: API version 2026-10-21, which anthropic SDK 2.x sends,
    rejects ``temperature``/``top_p``/``top_k`` with a 400 on every model, even at their defaults.
    """

    model: str = "claude-sonnet-4-6"
    temperature: float = 0.0
    max_tokens: int = 4096
    timeout_s: float = 120.0
    max_retries: int = 2


@dataclass(frozen=True)
class Usage:
    """Tokens of one or more calls; ``+`` sums them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_write_tokens + self.cache_read_tokens


@dataclass(frozen=True)
class ModelReply:
    """One model answer. ``tool_use_id`` is the id of the first tool_use block (needed to answer it)."""

    text: str
    tool_input: dict[str, Any] | None
    usage: Usage
    model: str
    stop_reason: str | None
    tool_use_id: str | None = None


@dataclass(frozen=True)
class GenerationResult:
    """Seed 003's GenerationResult: the validated data, or the validation errors after the one retry."""

    success: bool
    data: dict[str, Any] | None
    raw_response: str | None
    validation_errors: list[str]
    attempts: int
    usage: Usage
    timings_ms: dict[str, float]


# ---------------------------------------------------------------------------------------------------
# Prices

# USD per million tokens: (input, output, cache write (5 min), cache read).
PRICES_PER_MTOK: dict[str, tuple[float, float, float, float]] = {
    "claude-sonnet-4-6": (3.0, 15.0, 3.75, 0.30),
    "claude-sonnet-4-5": (3.0, 15.0, 3.75, 0.30),
    "claude-opus-4-6": (5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-5": (5.0, 25.0, 6.25, 0.50),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 0.10),
}
_FALLBACK_PRICE_MODEL = "claude-sonnet-4-6"
_DATED_SNAPSHOT = re.compile(r"^(?P<alias>.+)-\d{8}$")


def _price_key(model: str) -> str | None:
    if model in PRICES_PER_MTOK:
        return model
    match = _DATED_SNAPSHOT.match(model)  # "claude-sonnet-4-5-20250929" is priced as its alias
    if match and match.group("alias") in PRICES_PER_MTOK:
        return match.group("alias")
    return None


def known_price(model: str) -> bool:
    """True when ``model`` (an alias or a dated snapshot of one) is in the price table."""
    return _price_key(model) is not None


def price_usd(model: str, usage: Usage) -> float:
    """Cost of ``usage`` on ``model`` in USD. An unknown model is priced as Sonnet (see :func:`known_price`)."""
    key = _price_key(model) or _FALLBACK_PRICE_MODEL
    p_in, p_out, p_write, p_read = PRICES_PER_MTOK[key]
    total = (
        usage.input_tokens * p_in
        + usage.output_tokens * p_out
        + usage.cache_write_tokens * p_write
        + usage.cache_read_tokens * p_read
    )
    return total / 1_000_000


# ---------------------------------------------------------------------------------------------------
# The client


def _one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split()).rstrip(".")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class ModelClient:
    """A thread-safe handle on the Messages API; several threads may share one instance."""

    def __init__(
        self,
        settings: ModelSettings = ModelSettings(),
        *,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        self.settings = settings
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self._api_key = key or None
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._sdk: anthropic.Anthropic | None = None
        self._sdk_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ModelClient(model={self.settings.model!r}, base_url={self.base_url!r}, available={self.available})"

    @property
    def available(self) -> bool:
        """True when an API key is set (nothing is checked over the network)."""
        return self._api_key is not None

    def _client(self) -> anthropic.Anthropic:
        if self._api_key is None:
            raise ModelUnavailable(
                "no ANTHROPIC_API_KEY: set it in the environment to run the model; "
                "anything that needs a model is indeterminate until then"
            )
        with self._sdk_lock:
            if self._sdk is None:
                import anthropic

                try:
                    self._sdk = anthropic.Anthropic(
                        api_key=self._api_key,
                        base_url=self.base_url,
                        timeout=self.settings.timeout_s,
                        max_retries=self.settings.max_retries,
                    )
                except Exception as err:  # e.g. a malformed ANTHROPIC_BASE_URL
                    raise ModelCallError(
                        f"could not set up the model client for {self.base_url}: {_one_line(err)}; "
                        "check ANTHROPIC_BASE_URL",
                        ExitCode.CONFIG_ERROR,
                    ) from None
            return self._sdk

    def close(self) -> None:
        """Close the SDK's connection pool (a later call opens a new one)."""
        with self._sdk_lock:
            sdk, self._sdk = self._sdk, None
        if sdk is not None:
            sdk.close()

    # -- one request ---------------------------------------------------------------------------------

    def complete(
        self,
        *,
        system: str | list[dict[str, Any]],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: dict[str, Any] | None = None,
        cached_system_prefix: str | None = None,
    ) -> ModelReply:
        """Send one Messages API request; raise ModelUnavailable / ModelCallError, never an SDK error.

        With ``cached_system_prefix`` the system prompt is sent as text blocks, the prefix first and
        marked ``cache_control: ephemeral``, so a stable prefix (rubric, evaluator prompt, examples)
        is written to the prompt cache once and read on later calls.
        """
        sdk = self._client()
        import anthropic

        params: dict[str, Any] = {
            "model": self.settings.model,
            "max_tokens": self.settings.max_tokens,
            "messages": messages,
        }
        system_param = _system_param(system, cached_system_prefix)
        if system_param:
            params["system"] = system_param
        if tools:
            params["tools"] = tools
        if tool_choice:
            params["tool_choice"] = tool_choice
        try:
            message = sdk.messages.create(**params)
        except anthropic.AnthropicError as err:
            raise self._map_error(err) from None
        except json.JSONDecodeError as err:
            raise ModelCallError(
                f"the model API at {self.base_url} answered with something that is not JSON ({_one_line(err)}); "
                "check ANTHROPIC_BASE_URL points at the Messages API",
                ExitCode.PROTOCOL,
            ) from None
        except (ValueError, TypeError) as err:  # the SDK refused the request before sending it
            raise ModelCallError(
                f"model call failed before an answer: {_one_line(err)}; check the model settings and message shapes",
                ExitCode.PROTOCOL,
            ) from None
        if not isinstance(getattr(message, "content", None), list):
            raise ModelCallError(
                f"the model API at {self.base_url} answered without message content; "
                "check ANTHROPIC_BASE_URL points at the Messages API",
                ExitCode.PROTOCOL,
            )
        return _reply_from_message(message, self.settings.model)

    def _map_error(self, err: anthropic.AnthropicError) -> ModelCallError:
        import anthropic

        retries = self.settings.max_retries
        after = f"after {retries} {'retry' if retries == 1 else 'retries'}" if retries > 0 else "retries off"
        model = self.settings.model
        if isinstance(err, anthropic.APITimeoutError):
            return ModelCallError(
                f"model call to {model} timed out after {self.settings.timeout_s:g}s ({after}); "
                "raise timeout_s or retry later",
                ExitCode.TIMEOUT,
            )
        if isinstance(err, anthropic.APIConnectionError):
            cause = err.__cause__ or err
            return ModelCallError(
                f"could not reach the model API at {self.base_url} ({after}): {_one_line(cause)}; "
                "check the network and ANTHROPIC_BASE_URL",
                ExitCode.UNAVAILABLE,
            )
        if isinstance(err, anthropic.APIStatusError):
            status = err.status_code
            detail = _one_line(err.api_message or err.message)
            kind = f"{status} {err.type}" if err.type else str(status)
            if status == 429:
                return ModelCallError(
                    f"model API rate limit ({kind}, {after}): {detail}; lower the concurrency or retry later",
                    ExitCode.TEMP_FAIL,
                )
            if status == 529:
                return ModelCallError(
                    f"model API overloaded ({kind}, {after}): {detail}; retry later",
                    ExitCode.TEMP_FAIL,
                )
            if status >= 500:
                return ModelCallError(
                    f"model API server error ({kind}, {after}): {detail}; retry later or check the API status",
                    ExitCode.UNAVAILABLE,
                )
            if status == 401:
                return ModelCallError(
                    f"the API key was refused ({kind}): {detail}; check ANTHROPIC_API_KEY",
                    ExitCode.PROTOCOL,
                )
            if status == 403:
                return ModelCallError(
                    f"the API key may not use {model} ({kind}): {detail}; check the key's permissions",
                    ExitCode.PROTOCOL,
                )
            return ModelCallError(
                f"model API rejected the request to {model} ({kind}): {detail}; "
                "check the model name and the request",
                ExitCode.PROTOCOL,
            )
        return ModelCallError(
            f"model API answer not understood ({type(err).__name__}): {_one_line(err)}; "
            "check ANTHROPIC_BASE_URL points at the Messages API",
            ExitCode.PROTOCOL,
        )

    # -- seed 003: JSON generation with one retry ----------------------------------------------------

    def generate_json(
        self,
        *,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        tool_name: str = "submit_result",
        cached_system_prefix: str | None = None,
    ) -> GenerationResult:
        """Ask for a JSON object matching ``schema`` through a forced tool call; retry once on errors.

        The retry's messages show the model its previous answer and the validation errors
        (``path: message``). ``success=False`` after the retry means validation_failed for the caller.
        Model call failures raise ModelCallError / ModelUnavailable as in :meth:`complete`.
        """
        started = time.perf_counter()
        validator = _validator_for(schema)
        schema_ms = (time.perf_counter() - started) * 1000
        t_render = time.perf_counter()
        tools = [
            {
                "name": tool_name,
                "description": "Submit the result. The input must match this JSON Schema exactly.",
                "input_schema": schema,
            }
        ]
        tool_choice = {"type": "tool", "name": tool_name}
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        timings = {"prompt_render": (time.perf_counter() - t_render) * 1000, "llm_call": 0.0, "validation": schema_ms}

        usage = Usage()
        data: dict[str, Any] | None = None
        raw: str | None = None
        errors: list[str] = []
        attempts = 0
        for attempt in (1, 2):
            attempts = attempt
            t_call = time.perf_counter()
            reply = self.complete(
                system=system,
                messages=messages,
                tools=tools,
                tool_choice=tool_choice,
                cached_system_prefix=cached_system_prefix,
            )
            timings["llm_call"] += (time.perf_counter() - t_call) * 1000
            usage = usage + reply.usage

            t_val = time.perf_counter()
            data, raw, errors = _validate_reply(reply, validator, tool_name)
            timings["validation"] += (time.perf_counter() - t_val) * 1000
            if not errors:
                break
            if attempt == 1:
                messages = messages + _retry_turns(reply, raw, errors, tool_name)

        timings["total"] = (time.perf_counter() - started) * 1000
        success = not errors
        return GenerationResult(
            success=success,
            data=data if success else None,
            raw_response=raw,
            validation_errors=errors,
            attempts=attempts,
            usage=usage,
            timings_ms={k: round(v, 3) for k, v in timings.items()},
        )


# ---------------------------------------------------------------------------------------------------
# Helpers


def _system_param(system: str | list[dict[str, Any]], prefix: str | None) -> str | list[dict[str, Any]]:
    if not prefix:
        return system
    blocks: list[dict[str, Any]] = [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}}]
    if isinstance(system, str):
        if system:
            blocks.append({"type": "text", "text": system})
    else:
        blocks.extend(system)
    return blocks


def _reply_from_message(message: Any, requested_model: str) -> ModelReply:
    texts: list[str] = []
    tool_input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    for block in message.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use" and tool_input is None:
            raw_input = block.input
            tool_input = dict(raw_input) if isinstance(raw_input, Mapping) else {"_": raw_input}
            tool_use_id = block.id
    u = message.usage
    usage = Usage(
        input_tokens=int(getattr(u, "input_tokens", 0) or 0),
        output_tokens=int(getattr(u, "output_tokens", 0) or 0),
        cache_write_tokens=int(getattr(u, "cache_creation_input_tokens", 0) or 0),
        cache_read_tokens=int(getattr(u, "cache_read_input_tokens", 0) or 0),
    )
    return ModelReply(
        text="".join(texts),
        tool_input=tool_input,
        usage=usage,
        model=str(message.model or requested_model),
        stop_reason=message.stop_reason,
        tool_use_id=tool_use_id,
    )


_VALIDATORS: dict[str, jsonschema.Draft202012Validator] = {}
_VALIDATORS_LOCK = threading.Lock()


def _validator_for(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A Draft 2020-12 validator, built once per distinct schema. A broken schema is a ValueError."""
    import jsonschema

    key = json.dumps(schema, sort_keys=True, default=str)
    with _VALIDATORS_LOCK:
        found = _VALIDATORS.get(key)
    if found is not None:
        return found
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        problem = _one_line(err.message)
        raise ValueError(f"generate_json: the schema is not valid JSON Schema 2020-12: {problem}") from None
    validator = jsonschema.Draft202012Validator(schema)
    with _VALIDATORS_LOCK:
        if len(_VALIDATORS) > 256:
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    return validator


_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``: inside a ```json fence first, else anywhere in the text."""
    decoder = json.JSONDecoder()
    for body in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        start = body.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(body, start)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                return value
            start = body.find("{", start + 1)
    return None


def _validate_reply(
    reply: ModelReply, validator: jsonschema.Draft202012Validator, tool_name: str
) -> tuple[dict[str, Any] | None, str | None, list[str]]:
    """(data, raw_response, errors) for one answer; errors are ``path: message`` strings."""
    if reply.tool_input is not None:
        data: dict[str, Any] | None = reply.tool_input
        raw: str | None = json.dumps(reply.tool_input, ensure_ascii=False)
    else:
        raw = reply.text or None
        data = extract_json_object(reply.text)
        if data is None:
            hint = " (the answer was cut off at max_tokens)" if reply.stop_reason == "max_tokens" else ""
            return None, raw, [f"$: no JSON object in the answer{hint}; call the `{tool_name}` tool with the result"]
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    messages = [f"{e.json_path}: {_one_line(e.message, 500)}" for e in errors]
    return data, raw, messages


def _retry_turns(reply: ModelReply, raw: str | None, errors: list[str], tool_name: str) -> list[dict[str, Any]]:
    """The turns that show the model its previous answer and what was wrong with it."""
    listing = "\n".join(f"- {e}" for e in errors)
    instruction = (
        "Your previous answer did not match the required JSON schema. Validation errors:\n"
        f"{listing}\n"
        f"Call the `{tool_name}` tool again with the complete, corrected answer. "
        "Fix every error listed; keep everything else as it was."
    )
    if reply.tool_input is not None and reply.tool_use_id:
        tool_use = {"type": "tool_use", "id": reply.tool_use_id, "name": tool_name, "input": reply.tool_input}
        return [
            {"role": "assistant", "content": [tool_use]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": reply.tool_use_id, "is_error": True, "content": instruction}
                ],
            },
        ]
    previous = raw if raw else "(empty answer)"
    return [
        {"role": "assistant", "content": previous},
        {"role": "user", "content": instruction},
    ]
