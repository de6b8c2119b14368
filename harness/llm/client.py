"""The client every caller uses: one model, any provider, under the session's call policy.

* :meth:`ModelClient.complete` sends one request. The policy's response cache may answer instead; else the
  provider sends it (its SDK retries 429, 5xx and connection errors itself, honouring ``retry-after``) and
  what is left becomes a :class:`~harness.base.errors.ModelCallError` with an exit code. No SDK exception escapes.
* :meth:`ModelClient.generate_json` is the structured generation flow: a forced tool call (or the server's
  JSON Schema output), validation, and ONE retry that shows the model its answer and the errors.

Constructing a client never touches the network and imports no SDK.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from harness.base import jsonschemas
from harness.base.errors import ExitCode, ModelCallError, ModelUnavailable
from harness.base.models import ModelSettings
from harness.base.usage import Usage, add_costs
from harness.llm.cache import cache_key
from harness.llm.policy import CallPolicy
from harness.llm.providers import Provider, UnknownProvider, make_provider, provider_failure
from harness.llm.types import (
    GenerationResult,
    Message,
    ModelReply,
    ModelRequest,
    TokenLogprob,
    ToolCall,
    ToolResult,
    ToolSpec,
)

_CACHE_KEY_VERSION = 2  # 2: provider-neutral requests, keyed by provider and base URL


class ModelClient:
    """A thread-safe handle on one model; several threads may share one instance.

    Without a ``policy`` the client gets one of its own (default concurrency bound, no rate limits, no cache,
    no batching); in a pytest session every client shares the session's policy. ``api_key`` and ``base_url``
    override the provider's environment variables (tests point them at a fake server).
    """

    def __init__(
        self,
        settings: ModelSettings = ModelSettings(),
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        policy: CallPolicy | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy if policy is not None else CallPolicy()
        try:
            self.provider: Provider = make_provider(settings, self.policy, api_key=api_key, base_url=base_url)
        except UnknownProvider as exc:
            raise ModelCallError(str(exc), ExitCode.CONFIG_ERROR) from None

    def __repr__(self) -> str:
        return f"ModelClient(model={self.model!r}, base_url={self.base_url!r}, available={self.available})"

    @property
    def model(self) -> str:
        """The model as records and prices name it (``openai/gpt-4.1-mini``; a bare name for Anthropic)."""
        return self.settings.qualified

    @property
    def base_url(self) -> str:
        return self.provider.base_url

    @property
    def temperature_sent(self) -> bool:
        """Whether calls carry ``settings.temperature`` (False where the provider's API rejects it for this model:
        the setting is then recorded, and the model samples at its own default)."""
        return self.provider.sends_temperature(self.settings.name)

    def sends(self, setting: str) -> bool:
        """Whether calls carry a generation setting (``temperature``, ``top_p``, ``stop``, ``seed``, ``logprobs``)
        where it is set: a setting the provider's API rejects is recorded and keyed, not sent."""
        return self.provider.sends(setting, self.settings.name)

    @property
    def available(self) -> bool:
        """True when a call can be made (e.g. an API key is set); nothing is checked over the network."""
        return self.provider.unavailable_reason is None

    @property
    def unavailable_reason(self) -> str | None:
        return self.provider.unavailable_reason

    def preload(self) -> None:
        """Start importing the provider's SDK in the background when a call is likely: a call can be made, and
        the response cache cannot answer (its mode does not read, or there is no cache file yet). A later run
        that the cache answers whole never pays for the import."""
        read, _, _ = self.policy.cache_access(self.settings.temperature)
        cache = self.policy.cache
        if read and cache is not None and cache.path.exists():
            return
        try:
            if self.available:
                self.provider.preload()
        except Exception:  # noqa: BLE001, S110 - only a head start: the call itself says what is wrong, in one line
            pass

    def close(self) -> None:
        """Close the provider's connection pool (a later call opens a new one). The policy stays open."""
        self.provider.close()

    # -- one request ---------------------------------------------------------------------------------

    def complete(
        self,
        *,
        system: str = "",
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        tool_choice: str | None = None,
        output_schema: dict[str, Any] | None = None,
        output_name: str = "result",
        cached_system_prefix: str | None = None,
        cache_extra: Mapping[str, Any] | None = None,
        batch: bool | None = None,
        parallel_tools: bool = True,
        top_logprobs: int | None = None,
    ) -> ModelReply:
        """Send one request; raise ModelUnavailable / ModelCallError, never an SDK error.

        ``tool_choice`` is None (the model chooses), ``"any"``, or a tool's name (forced). ``output_schema``
        asks for a JSON answer through the server's structured output. ``cached_system_prefix`` is a stable
        start of the system prompt (rubric, evaluator prompt, examples) that a provider with prompt caching
        writes once and reads on later calls.

        The policy's response cache may answer instead (``reply.cached``, no call, no cost); ``cache_extra``
        (JSON-able) goes into the cache key only, e.g. ``{"sample": 2}`` so K judge samples are K answers.
        With a batcher in the policy, a provider that supports batches sends the request in one (half price)
        unless ``batch=False``; the call blocks until its answer is back either way.

        The settings' ``top_p``, ``stop`` and ``seed`` go with every request. ``top_logprobs`` asks for the log
        probabilities of that many likeliest tokens at each place of the answer (``reply.logprobs``; None where the
        provider returns none).
        """
        started = time.perf_counter()
        settings = self.settings
        request = ModelRequest(
            model=settings.name, system=system, messages=tuple(messages), tools=tuple(tools),
            tool_choice=tool_choice, output_schema=output_schema, output_name=output_name,
            cached_system_prefix=cached_system_prefix, max_tokens=settings.max_tokens,
            temperature=settings.temperature, parallel_tools=parallel_tools, top_p=settings.top_p,
            stop=settings.stop, seed=settings.seed, top_logprobs=top_logprobs,
        )
        policy = self.policy
        read, write, overwrite = policy.cache_access(settings.temperature)
        batched = policy.batcher is not None and batch is not False and self.provider.supports_batch
        key: str | None = None
        if read or write or batched:  # a batched request is recorded by its key, to be found again after a kill
            key = cache_key({
                "v": _CACHE_KEY_VERSION, "provider": settings.provider, "base_url": self.provider.base_url,
                "request": request.cache_payload(), "temperature": settings.temperature,
                "extra": dict(cache_extra) if cache_extra else None,
            })
        if read and key is not None and policy.cache is not None:
            hit = _reply_from_cache(policy.cache.get(key))
            if hit is not None:
                policy.stats._add("cache_hits")
                policy.answered(hit, started)
                return hit

        try:
            reason = self.provider.unavailable_reason
        except Exception as exc:  # a plugin provider's property: one line, as when its send fails
            raise provider_failure(self.provider, exc) from None
        policy.check_budget(self.model)
        if reason is not None:
            raise ModelUnavailable(f"{reason}: set it in the environment to run the model; anything that needs a "
                                   "model is indeterminate until then")
        try:
            reply = policy.send(self.provider, dataclasses.replace(request, key=key) if batched else request,
                                batch=batched)
        except ModelCallError:
            policy.stats._add("failures")
            raise
        priced_as = reply.model if policy.has_price(reply.model) else self.model
        reply = dataclasses.replace(reply, batched=batched,
                                    cost_usd=policy.price(priced_as, reply.usage, batch=batched))
        policy.answered(reply, started)
        if write and key is not None and policy.cache is not None:
            policy.cache.put(key, _reply_to_cache(reply), model=self.model, overwrite=overwrite)
        return reply

    # -- structured generation with one retry --------------------------------------------------------

    def generate_json(
        self,
        *,
        system: str,
        prompt: str | Message,
        schema: dict[str, Any],
        tool_name: str = "submit_result",
        cached_system_prefix: str | None = None,
        cache_extra: Mapping[str, Any] | None = None,
        batch: bool | None = None,
        history: Sequence[Message] = (),
        retry: bool = True,
    ) -> GenerationResult:
        """Ask for a JSON object matching ``schema``; retry once on errors (unless ``retry`` is False).

        The answer is asked for through a forced tool call, or through the server's JSON Schema output when
        the settings say ``structured_output: json_schema``. The answer is validated with the schema's
        ``format`` keywords checked (``date``, ``email``, ...). The retry's messages show the model its previous
        answer and the validation errors. ``success=False`` after the retry means validation_failed for the
        caller. Model call failures raise ModelCallError / ModelUnavailable as in :meth:`complete`; when the
        retry call fails, the error's ``usage`` holds the first call's tokens. ``history`` is the conversation
        before ``prompt`` (a judge's own reasoning, say); ``prompt`` may be a user :class:`Message` (with its
        ``cache_head``).
        """
        started = time.perf_counter()
        try:
            validator = jsonschemas.validator_for(schema, formats=True)
        except jsonschemas.SchemaInvalid as err:
            raise ValueError(f"generate_json: the schema is {err}") from None
        schema_ms = (time.perf_counter() - started) * 1000
        as_tool = self.settings.structured_output != "json_schema"
        shape: dict[str, Any] = (
            {"tools": [ToolSpec(tool_name, "Submit the result. The input must match this JSON Schema exactly.",
                                schema)], "tool_choice": tool_name}
            if as_tool else {"output_schema": schema, "output_name": tool_name}
        )
        messages: list[Message] = [*history, prompt if isinstance(prompt, Message) else Message.user(prompt)]
        timings = {"prompt_render": 0.0, "llm_call": 0.0, "validation": schema_ms}

        usage = Usage()
        cost: float | None = 0.0
        cache_hits = 0
        data: dict[str, Any] | None = None
        raw: str | None = None
        errors: list[str] = []
        first_errors: list[str] = []
        attempts = 0
        for attempt in (1, 2) if retry else (1,):
            attempts = attempt
            t_call = time.perf_counter()
            try:
                reply = self.complete(system=system, messages=messages, cached_system_prefix=cached_system_prefix,
                                      cache_extra=cache_extra, batch=batch, **shape)
            except ModelCallError as err:
                if attempt > 1 and err.spend is None:  # the first call's tokens were spent: keep them accountable
                    err.spend = GenerationResult(False, None, None, [], 1, usage, {}, self.model, cost,
                                                 cache_hits).spend
                raise
            timings["llm_call"] += (time.perf_counter() - t_call) * 1000
            if not reply.cached:  # a replayed answer took no tokens this time
                usage = usage + reply.usage
            cost = add_costs(cost, reply.cost_usd)
            cache_hits += reply.cached

            t_val = time.perf_counter()
            data, raw, errors = _validate_reply(reply, validator, tool_name, as_tool)
            timings["validation"] += (time.perf_counter() - t_val) * 1000
            if not errors:
                break
            if attempt == 1:
                first_errors = errors
                messages += _retry_turns(reply, raw, errors, tool_name, as_tool)

        timings["total"] = (time.perf_counter() - started) * 1000
        success = not errors
        return GenerationResult(
            success=success, data=data if success else None, raw_response=raw, validation_errors=errors,
            attempts=attempts, usage=usage, timings_ms={k: round(v, 3) for k, v in timings.items()},
            model=self.model, cost_usd=cost, cache_hits=cache_hits,
            first_errors=tuple(first_errors) if attempts > 1 else (),
        )


# ---------------------------------------------------------------------------------------------------
# Helpers


def _reply_to_cache(reply: ModelReply) -> dict[str, Any]:
    return {
        "text": reply.text,
        "tool_calls": [{"id": c.id, "name": c.name, "input": c.input} for c in reply.tool_calls],
        "usage": reply.usage.as_dict(),
        "model": reply.model,
        "stop_reason": reply.stop_reason,
        **({"logprobs": [[t.token, t.logprob, [list(alt) for alt in t.top]] for t in reply.logprobs]}
           if reply.logprobs is not None else {}),
    }


def _reply_from_cache(entry: Mapping[str, Any] | None) -> ModelReply | None:
    """The cached reply (``cached=True``, free), or None when the entry is missing or not understood."""
    if entry is None:
        return None
    try:
        calls = tuple(ToolCall(str(c["id"]), str(c["name"]), dict(c["input"])) for c in entry.get("tool_calls") or [])
        logprobs = None if entry.get("logprobs") is None else tuple(
            TokenLogprob(str(token), float(logprob), tuple((str(alt), float(p)) for alt, p in top))
            for token, logprob, top in entry["logprobs"])
        return ModelReply(text=str(entry["text"]), tool_calls=calls, usage=Usage.from_dict(entry.get("usage")),
                          model=str(entry["model"]), stop_reason=entry.get("stop_reason"), cached=True,
                          logprobs=logprobs)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``: inside a ```json fence first, else anywhere in the text."""
    decoder = json.JSONDecoder()
    for body in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        start = body.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(body, start)
            except (json.JSONDecodeError, RecursionError):
                value = None
            if isinstance(value, dict):
                return value
            start = body.find("{", start + 1)
    return None


def _validate_reply(reply: ModelReply, validator: Any, tool_name: str,
                    as_tool: bool) -> tuple[dict[str, Any] | None, str | None, list[str]]:
    """(data, raw_response, errors) for one answer; errors are readable ``path: problem`` lines."""
    if reply.tool_input is not None:
        data: dict[str, Any] | None = reply.tool_input
        raw: str | None = json.dumps(reply.tool_input, ensure_ascii=False)
    else:
        raw = reply.text or None
        data = extract_json_object(reply.text)
        if data is None:
            hint = " (the answer was cut off at max_tokens)" if reply.stop_reason == "max_tokens" else ""
            how = f"call the `{tool_name}` tool with the result" if as_tool else "answer with the JSON object only"
            return None, raw, [f"(root): no JSON object in the answer{hint}; {how}"]
    return data, raw, jsonschemas.error_lines(validator.iter_errors(data))


def _retry_turns(reply: ModelReply, raw: str | None, errors: list[str], tool_name: str,
                 as_tool: bool) -> list[Message]:
    """The turns that show the model its previous answer and what was wrong with it."""
    listing = "\n".join(f"- {e}" for e in errors)
    again = (f"Call the `{tool_name}` tool again with the complete, corrected answer." if as_tool else
             "Answer again with the complete, corrected JSON object.")
    instruction = ("Your previous answer did not match the required JSON schema. Validation errors:\n"
                   f"{listing}\n{again} Fix every error listed; keep everything else as it was.")
    call = reply.tool_call
    if call is not None and call.id:
        return [Message("assistant", tool_calls=(call,)),
                Message("user", tool_results=(ToolResult(call.id, instruction, is_error=True),))]
    return [Message.assistant(raw if raw else "(empty answer)"), Message.user(instruction)]
