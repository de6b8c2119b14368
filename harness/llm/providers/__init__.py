"""Providers: the one place a model's wire format lives, one module each, found by name.

A model is named ``provider/name`` (``openai/gpt-4.1-mini``); a bare name is Anthropic's. The built-in
providers are imported on first use (``anthropic`` and ``openai`` import their SDKs only when a call is
made). Others plug in without touching this package:

* a pytest plugin or conftest implements ``pytest_harness_providers()`` and returns ``{name: factory}``;
* an installed package declares an entry point in the ``harness.providers`` group (``name = "pkg.mod:Cls"``).

A factory is called as ``factory(settings, policy)`` and returns a :class:`Provider`. Every provider is
wrapped by the same :class:`~harness.llm.policy.CallPolicy` (cache, concurrency, rate limits, cost), which
the provider calls around each HTTP attempt through :meth:`CallPolicy.http_attempt`.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from harness.base import fields
from harness.base.errors import ExitCode, ModelCallError, did_you_mean
from harness.base.redaction import redact
from harness.llm.batching import Batcher
from harness.llm.deadline import call_timed_out, cap_retry_waits, http_event_hooks
from harness.llm.ratelimit import RateLimiter

if TYPE_CHECKING:
    from harness.base.models import ModelSettings
    from harness.llm.types import ModelReply, ModelRequest

Response = TypeVar("Response")


class ProviderPolicy(Protocol):
    """What a provider uses of the session's call policy (:class:`harness.llm.policy.CallPolicy` is one): each
    HTTP attempt runs inside ``http_attempt`` (the concurrency bound, the rate limits, the call's deadline);
    ``batcher`` sends requests through a batch API where the policy asks for it; ``limiter`` reserves tokens."""

    batcher: Batcher | None
    limiter: RateLimiter | None

    def http_attempt(self, send: Callable[[], Response], *, model_call: bool, retry: bool,
                     body: Mapping[str, Any] | None = None,
                     tokens_used: Callable[[Response], tuple[int, int]] | None = None) -> Response: ...

ENTRY_POINT_GROUP = "harness.providers"
# the settings of a request a provider may not send (:meth:`Provider.sends`); ``logprobs``: ``top_logprobs``
GENERATION_SETTINGS = ("temperature", "top_p", "stop", "seed", "logprobs")
_BUILTIN = {
    "anthropic": "harness.llm.providers.anthropic:AnthropicProvider",
    "openai": "harness.llm.providers.openai:OpenAIProvider",
    "mock": "harness.llm.providers.mock:MockProvider",
}

ProviderFactory = Callable[..., "Provider"]  # (settings, policy, *, api_key=None, base_url=None)
_registered: dict[str, ProviderFactory | str] = {}
_lock = threading.Lock()


class UnknownProvider(ValueError):
    """A model names a provider nobody registered."""


class Provider(ABC):
    """One model behind one endpoint: turns a :class:`ModelRequest` into its wire format and back.

    ``send`` returns a :class:`ModelReply` with ``usage`` and ``model`` filled and ``cost_usd`` left for the
    policy; every failure is a :class:`~harness.base.errors.ModelCallError` with an exit code (never an SDK error).
    """

    name: ClassVar[str]
    supports_batch: ClassVar[bool] = False

    def __init__(self, settings: ModelSettings, policy: ProviderPolicy, *, api_key: str | None = None,
                 base_url: str | None = None):
        """``api_key`` and ``base_url`` override the provider's environment (a test's fake server)."""
        self.settings = settings
        self.policy = policy

    @property
    def base_url(self) -> str:
        """Where the calls go; part of the response cache's key."""
        return ""

    @property
    def unavailable_reason(self) -> str | None:
        """Why no call can be made, in a few words (``no ANTHROPIC_API_KEY``), or None when one can."""
        return None

    def check_model(self) -> str | None:
        """A problem with the model name that is known without a call (one line), or None."""
        return None

    def sends_temperature(self, model: str) -> bool:
        """Whether a request's ``temperature`` is sent for ``model`` (the name this provider knows). A provider
        says False where its API rejects the parameter: a setting must never break a call."""
        return True

    def sends(self, setting: str, model: str) -> bool:
        """Whether a request's generation setting (:data:`GENERATION_SETTINGS`) is sent for ``model``: ``top_p``
        goes where ``temperature`` does, the others by default (a provider says False where its API rejects one;
        a setting it does not send is still recorded and in the response cache's key)."""
        return self.sends_temperature(model) if setting in ("temperature", "top_p") else True

    def ready(self) -> None:
        """Make what a call needs before its clock starts (an SDK's import, its client): ``timeout_s`` bounds
        the call, not a process's first import of a library. Raises what making it raises."""

    def bounds_its_calls(self) -> bool:
        """Whether :meth:`send` keeps every wait of a call within the call's clock itself
        (:func:`~harness.llm.deadline.current_clock`) and ends it with the clock's timeout error once the time is up,
        so that the call may run on the caller's thread. False (the default): the policy runs it on a thread of its
        own and stops waiting at ``timeout_s``, whatever the provider does."""
        return False

    def preload(self) -> None:
        """Start any slow import in the background (called when a call is likely)."""

    @abstractmethod
    def send(self, request: ModelRequest, *, batch: bool = False) -> ModelReply: ...

    def close(self) -> None:
        """Close connection pools; a later call opens new ones."""


@dataclass(frozen=True)
class SdkErrors:
    """A vendor SDK's exception classes, by what each says about a call (both official SDKs have the same
    ones): :meth:`SdkProvider.failure` words and classifies them the same way for every SDK."""

    base: type[BaseException]  # every error of the SDK (``anthropic.AnthropicError``)
    timeout: type[BaseException]  # the SDK's own timeout fired (a subclass of ``connection`` in both SDKs)
    connection: type[BaseException]  # no answer: refused, reset, no route, a proxy's failure
    status: type[BaseException]  # an HTTP error status; has ``status_code`` and the answer's ``body``
    unreadable: type[BaseException]  # an answer the SDK could not read (``APIResponseValidationError``)
    overloaded: tuple[int, ...] = (529,)  # the statuses by which the API says it is overloaded


class SdkProvider(Provider):
    """A provider behind a vendor SDK: the key and endpoint it resolved, and one SDK client built on the first
    call (never at construction: importing an SDK takes up to seconds) and closed with :meth:`close`.

    What the SDK raises becomes a :class:`ModelCallError` in one place, :meth:`failure`, from the SDK's
    exception classes (:meth:`sdk_errors`): every SDK provider words and classifies a failure the same way."""

    url_variable: ClassVar[str]  # the environment variable of the endpoint, named in errors
    api_name: ClassVar[str]  # the API the endpoint must serve, named in errors ("the Messages API")
    key_hint: ClassVar[str] = ""  # what else than the key would make a call possible
    call_path: ClassVar[str]  # the path of a model call on the API ("/v1/messages"): what the policy counts and limits

    def __init__(self, settings: ModelSettings, policy: ProviderPolicy, *, api_key: str | None, base_url: str,
                 key_variable: str):
        super().__init__(settings, policy)
        self._api_key = api_key or None
        self._base_url = base_url.rstrip("/")
        self._key_variable = key_variable
        self._sdk: Any = None
        self._raw_answer: Any = None  # the SDK's HTTP response class, once its client is made (see post_call)
        self._sdk_lock = threading.Lock()
        self._retry_waits_capped = False

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def unavailable_reason(self) -> str | None:
        return None if self._api_key is not None else f"no {self._key_variable}{self.key_hint}"

    def _make_sdk(self) -> Any:
        """The SDK's client for this provider's key, endpoint, timeout and retries."""
        raise NotImplementedError

    @staticmethod
    def http_module(sdk: Any) -> Any:
        """The httpx module the SDK is built on (``httpx2`` in the newest SDKs, ``httpx`` before)."""
        return importlib.import_module(next(c.__module__ for c in sdk.DefaultHttpxClient.__mro__
                                            if c.__name__ == "Client").split(".")[0])

    def http_client(self, sdk: Any) -> Any:
        """The SDK's own HTTP client (its proxies, limits and keep-alive), whose every send runs under the call policy
        (:meth:`_http_attempt`), with the hooks that keep every HTTP attempt inside the call's deadline
        (:func:`~harness.llm.deadline.http_event_hooks`).

        The client's send, not the SDK's middleware nor a transport of our own: both SDKs send each HTTP attempt of
        their retry loop through it; httpx leaves out the proxies of the environment (``HTTPS_PROXY``) for a client
        given a transport; and with middleware the anthropic SDK hands back an error status as the answer when the
        call asks for the HTTP response as it came. ``x-stainless-retry-count`` tells a retry."""
        http = self.http_module(sdk)
        self._raw_answer = http.Response
        attempt = self._http_attempt

        class PolicyClient(sdk.DefaultHttpxClient):  # type: ignore[misc,name-defined]
            def send(self, request: Any, **options: Any) -> Any:
                return attempt(request, lambda: sdk.DefaultHttpxClient.send(self, request, **options))

        return PolicyClient(event_hooks=http_event_hooks(http))

    def post_call(self, params: Mapping[str, Any]) -> Any:
        """One model call: ``params`` posted to ``call_path`` through the client's own ``post`` (its retries, headers
        and the policy), and the answer's JSON as it came. Not the typed ``messages.create`` or
        ``chat.completions.create``: the parameters are already the wire format, which the typed methods walk again
        (the judge's whole output schema, on openai), and the harness reads a few fields of an answer, where the
        SDK's typed model costs about a third of its CPU a call (docs/model-calls.md, "What a call costs")."""
        return json.loads(self._client().post(self.call_path, body=params, cast_to=self._raw_answer).content)

    def _http_attempt(self, request: Any, send: Callable[[], Any]) -> Any:
        """One HTTP attempt under the call policy; a POST to the provider's ``call_path`` is a model call."""
        is_call = request.method == "POST" and request.url.path.rstrip("/").endswith(self.call_path)
        body = None
        if is_call and self.policy.limiter is not None:  # the request's size estimates the tokens it reserves
            try:
                body = json.loads(request.content)
            except ValueError:
                body = None
        retry = request.headers.get("x-stainless-retry-count", "0") not in ("", "0")
        return self.policy.http_attempt(send, model_call=is_call, retry=retry, body=body,
                                        tokens_used=self._tokens_used)

    def _tokens_used(self, response: Any) -> tuple[int, int] | tuple[None, None]:
        if not 200 <= int(response.status_code) < 300:
            return None, None
        response.read()
        return self.usage_tokens(json.loads(response.content).get("usage") or {})

    def usage_tokens(self, usage: Mapping[str, Any]) -> tuple[int, int]:
        """(input, output) tokens of an answer's ``usage``, as the rate limits count them."""
        raise NotImplementedError

    def ready(self) -> None:
        self._client()

    def bounds_its_calls(self) -> bool:
        """True once the client is made, when the SDK's waits before a retry could be capped: each attempt's
        timeouts and a trickled answer are bounded by :meth:`http_client`'s hooks."""
        return self._retry_waits_capped

    def _client(self) -> Any:
        with self._sdk_lock:
            if self._sdk is None:
                try:
                    sdk = self._make_sdk()
                except ModelCallError:
                    raise
                except Exception as err:  # e.g. a malformed base URL
                    raise ModelCallError(f"could not set up the model client for {self._base_url}: {one_line(err)}; "
                                         f"check {self.url_variable}", ExitCode.CONFIG_ERROR) from None
                self._retry_waits_capped = cap_retry_waits(sdk)
                self._sdk = sdk
            return self._sdk

    def close(self) -> None:
        with self._sdk_lock:
            sdk, self._sdk = self._sdk, None
        if sdk is not None:
            sdk.close()

    def sdk_errors(self) -> SdkErrors:
        """The SDK's exception classes (importing the SDK, which a failed call has done already)."""
        raise NotImplementedError

    def failure(self, err: BaseException) -> BaseException:
        """What a call through the SDK raised, as the :class:`ModelCallError` of docs/model-calls.md: the call's
        timeout 81; no answer, a server error 69; a rate limit or an overloaded API 75; a refused key, a rejected
        request, an answer that is not the API's 76. An exception that is none of these passes through (the policy
        words it, :func:`provider_failure`)."""
        if isinstance(err, ModelCallError):
            return err
        if isinstance(err.__cause__, ModelCallError):  # the policy's refusal inside the SDK (no time left for another
            return err.__cause__                        # attempt), which the openai SDK words as a connection error
        errors = self.sdk_errors()
        after = retries_said(self.settings.max_retries)
        if isinstance(err, errors.timeout):
            return call_timed_out(self.settings.qualified, self.settings.timeout_s)
        if isinstance(err, errors.connection):
            return ModelCallError(f"could not reach the model API at {self._base_url} ({after}): "
                                  f"{one_line(err.__cause__ or err)}; check the network and {self.url_variable}",
                                  ExitCode.UNAVAILABLE)
        if isinstance(err, errors.status):
            kind, detail = _status_said(err)
            return status_error(int(getattr(err, "status_code", 0)), kind, detail, model=self.settings.name,
                                after=after, key_variable=self._key_variable, overloaded=errors.overloaded)
        if isinstance(err, json.JSONDecodeError):
            return self.not_the_api(f"with something that is not JSON ({one_line(err)})")
        if isinstance(err, errors.unreadable):
            return self.not_the_api(f"with something the SDK could not read ({one_line(err)})")
        if isinstance(err, (errors.base, ValueError, TypeError)):  # refused by the SDK before it was sent
            return ModelCallError(f"model call failed before an answer: {one_line(err)}; check the model settings "
                                  "and message shapes", ExitCode.PROTOCOL)
        return err

    def not_the_api(self, answered: str) -> ModelCallError:
        """An answer that is not the API's (``answered`` says what came instead): the endpoint is the wrong one."""
        return ModelCallError(f"the model API at {self._base_url} answered {answered}; check {self.url_variable} "
                              f"points at {self.api_name}", ExitCode.PROTOCOL)


def _status_said(err: BaseException) -> tuple[str, str]:
    """``("429 rate_limit_error", "the API's message")`` from a status error: the error object is the answer's
    ``error`` (Anthropic's body) or the body itself (the openai SDK keeps only that part)."""
    body = getattr(err, "body", None)
    body = body if isinstance(body, Mapping) else {}
    error = body.get("error") if isinstance(body.get("error"), Mapping) else body
    status = str(getattr(err, "status_code", "?"))
    kind = f"{status} {error['type']}" if isinstance(error.get("type"), str) and error["type"] else status
    message = error.get("message") if isinstance(error.get("message"), str) and error["message"].strip() else None
    return kind, one_line(message or getattr(err, "message", None) or err)


def register_provider(name: str, factory: ProviderFactory | str) -> None:
    """Make ``name/...`` models use ``factory`` (or ``"module:attr"``, imported on first use).

    A name already taken by another factory is a ValueError: two plugins must not silently fight over it.
    """
    with _lock:
        taken = _registered.get(name) or _BUILTIN.get(name)
        if taken is not None and taken != factory:
            raise ValueError(f"model provider {name!r} is already registered ({_describe(taken)}); "
                             "give the new provider another name")
        _registered[name] = factory


def unregister_provider(name: str) -> None:
    with _lock:
        _registered.pop(name, None)


def known_providers() -> list[str]:
    with _lock:
        names = set(_BUILTIN) | set(_registered)
    names |= {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(names)


def provider_factory(name: str) -> ProviderFactory:
    """The factory of provider ``name``; :class:`UnknownProvider` (with did-you-mean) when there is none."""
    with _lock:
        found = _registered.get(name) or _BUILTIN.get(name)
    if found is None:
        found = next((ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name), None)
    if found is None:
        known = known_providers()
        raise UnknownProvider(f"unknown model provider {name!r}{did_you_mean(name, known)}; known: "
                              f"{', '.join(known)} (write provider/model, e.g. openai/gpt-4.1-mini; a plugin adds "
                              "providers through pytest_harness_providers)")
    if isinstance(found, str):
        module, _, attr = found.partition(":")
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ModelCallError(f"model provider {name!r} could not be loaded from {module}:{attr}: {exc}",
                                 ExitCode.CONFIG_ERROR) from None
    return found  # type: ignore[return-value]


def make_provider(settings: ModelSettings, policy: ProviderPolicy, **connection: str | None) -> Provider:
    """The provider of ``settings.model``; ``connection`` is ``api_key`` and ``base_url`` overrides. A factory
    that fails (a plugin's) is one line naming the provider, as when its ``send`` fails."""
    factory = provider_factory(settings.provider)
    try:
        return factory(settings, policy, **connection)
    except (ModelCallError, UnknownProvider):
        raise
    except Exception as exc:
        raise provider_failure(settings.provider, exc, setting_up=True) from None


def provider_failure(provider: Provider | str, exc: BaseException, *, setting_up: bool = False) -> ModelCallError:
    """What a provider raised that is not a :class:`ModelCallError` (a plugin provider's own exception, an SDK
    error a built-in provider did not expect), as one line through the redaction filter: a provider's error
    text may well carry its key. ``OSError`` s say the model cannot be reached (69), ``TimeoutError`` s time
    out (81); anything else is the provider's internal error (70)."""
    name = provider if isinstance(provider, str) else getattr(provider, "name", type(provider).__name__)
    model = "" if isinstance(provider, str) else f" for {provider.settings.qualified}"
    if isinstance(exc, TimeoutError):
        code = ExitCode.TIMEOUT
    elif isinstance(exc, OSError):
        code = ExitCode.UNAVAILABLE
    else:
        code = ExitCode.INTERNAL_ERROR
    doing = "could not be set up" if setting_up else "failed"
    detail = f"{type(exc).__name__}: {one_line(exc)}" if str(exc).strip() else type(exc).__name__
    return ModelCallError(redact(f"model provider {name!r}{model} {doing}: {detail}; check the provider "
                                 f"(its plugin or its server)"), code)


def model_problem(settings: ModelSettings) -> str | None:
    """What is wrong with a model name before any call (a provider without a model, an unknown provider, an
    unknown mock model), or None."""
    provider, slash, name = settings.model.partition("/")
    if slash and not (provider.strip() and name.strip()):
        missing = "model name after the provider" if provider.strip() else "provider before the slash"
        return (f"{settings.model!r} has no {missing} (write provider/model, e.g. openai/gpt-4.1-mini, or a bare "
                "name for Anthropic's)")
    if not slash:
        elsewhere = other_providers_model(settings.model)
        if elsewhere:
            return elsewhere
    try:
        factory = provider_factory(settings.provider)
    except UnknownProvider as exc:
        return str(exc)
    check = getattr(factory, "check_name", None)
    return check(settings.name) if callable(check) else None


# Bare names a user brings from DeepEval, promptfoo or a provider's docs: a bare name is Anthropic's here, so these
# would reach Anthropic's endpoint and fail there, far from the line that caused it.
_OPENAI_NAMES = re.compile(r"^(?:gpt-|chatgpt-|o\d(?:-|$)|text-embedding-|davinci|babbage|codex-)", re.IGNORECASE)
_GEMINI_NAMES = re.compile(r"^gemini-", re.IGNORECASE)
_OPEN_WEIGHT_NAMES = re.compile(r"^(?:llama|meta-llama|mistral|mixtral|codestral|qwen|deepseek|gemma|phi-|"
                                r"command-r|granite|olmo)", re.IGNORECASE)


def other_providers_model(model: str) -> str | None:
    """Why a bare ``model`` (which means Anthropic's) is another provider's model, with its right spelling; None
    for a name that may be Anthropic's."""
    if _OPENAI_NAMES.match(model):
        return (f"{model} is an OpenAI model, and a bare name means Anthropic's; write `openai/{model}` "
                "(the key from OPENAI_API_KEY)")
    if _GEMINI_NAMES.match(model):
        return (f"{model} is a Google model, and a bare name means Anthropic's; write `openai/{model}` with "
                "`base_url: https://generativelanguage.googleapis.com/v1beta/openai/` and "
                "`api_key_env: GEMINI_API_KEY` (Google's OpenAI-compatible endpoint)")
    if _OPEN_WEIGHT_NAMES.match(model):
        return (f"{model} is an open-weight model, and a bare name means Anthropic's; write `openai/{model}` with "
                "the `base_url` of the OpenAI-compatible server that serves it (vLLM, Ollama, a hosted endpoint)")
    return None


def one_line(text: object, limit: int = 300) -> str:
    """An error's text on one line, without its closing full stop (a "; check ..." follows it)."""
    return fields.one_line(" ".join(str(text).split()).rstrip("."), limit)


def retries_said(max_retries: int) -> str:
    return (f"after {max_retries} {'retry' if max_retries == 1 else 'retries'}" if max_retries > 0
            else "retries off")


def status_error(status: int, kind: str, detail: str, *, model: str, after: str, key_variable: str,
                 overloaded: tuple[int, ...] = (529,)) -> ModelCallError:
    """An HTTP error status as a ModelCallError with the exit code every provider uses for it."""
    if status == 429:
        return ModelCallError(f"model API rate limit ({kind}, {after}): {detail}; lower the concurrency or retry "
                              "later", ExitCode.TEMP_FAIL)
    if status in overloaded:
        return ModelCallError(f"model API overloaded ({kind}, {after}): {detail}; retry later", ExitCode.TEMP_FAIL)
    if status >= 500:
        return ModelCallError(f"model API server error ({kind}, {after}): {detail}; retry later or check the API "
                              "status", ExitCode.UNAVAILABLE)
    if status == 401:
        return ModelCallError(f"the API key was refused ({kind}): {detail}; check {key_variable}", ExitCode.PROTOCOL)
    if status == 403:
        return ModelCallError(f"the API key may not use {model} ({kind}): {detail}; check the key's permissions",
                              ExitCode.PROTOCOL)
    return ModelCallError(f"model API rejected the request to {model} ({kind}): {detail}; check the model name "
                          "and the request", ExitCode.PROTOCOL)


def _describe(factory: Any) -> str:
    if isinstance(factory, str):
        return factory
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', repr(factory))}"
