"""The one module that talks to a model: the ``anthropic`` SDK behind a small, typed, thread-safe client.

Everything model-shaped in the harness goes through :class:`ModelClient`:

* :meth:`ModelClient.complete` sends one Messages API request (the SDK retries 429, 529, 5xx and
  connection errors itself, honouring ``retry-after``) and maps what is left to
  :class:`~harness.errors.ModelCallError` with a seed-004 exit code. No SDK exception escapes.
* :meth:`ModelClient.generate_json` is seed 003's generation flow: a forced tool call, JSON Schema
  validation (Draft 2020-12), and ONE retry that shows the model its answer and the errors.

Every client of a session shares one :class:`CallPolicy`: the bound on HTTP calls in flight (a
semaphore around every attempt, retries included), optional rate limits
(:mod:`harness.ratelimit`), the response cache (:mod:`harness.cache`), the Message Batches path
(:mod:`harness.batching`), the price table and live :class:`CallStats`. docs/model-calls.md has the
whole picture.

Constructing a client never touches the network; the SDK client is built on the first call, and the
SDK itself is imported then too, so a pytest session that never calls a model does not pay for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from harness.batching import Batcher, ProgressCallback
from harness.cache import CACHE_FILE, CACHE_MODES, ResponseCache, cache_access, cache_key
from harness.errors import ExitCode, HarnessConfigError, ModelCallError, ModelUnavailable
from harness.ratelimit import RateLimiter, RateLimits, Reservation, estimate_input_tokens

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
    """One model answer. ``tool_use_id`` is the id of the first tool_use block (needed to answer it).

    ``usage`` is what the answer took. ``cost_usd`` is what it cost this time: the price of ``usage``
    (at the batch discount when ``batched``), or 0 when it came from the response cache (``cached``).
    """

    text: str
    tool_input: dict[str, Any] | None
    usage: Usage
    model: str
    stop_reason: str | None
    tool_use_id: str | None = None
    tool_name: str | None = None  # the name of the tool the first tool_use block called
    cached: bool = False
    batched: bool = False
    cost_usd: float = 0.0


@dataclass(frozen=True)
class GenerationResult:
    """Seed 003's GenerationResult: the validated data, or the validation errors after the one retry.

    ``usage`` and ``cost_usd`` sum the live calls (cache hits take no tokens and are free); ``cache_hits``
    counts the answers that came from the response cache.
    """

    success: bool
    data: dict[str, Any] | None
    raw_response: str | None
    validation_errors: list[str]
    attempts: int
    usage: Usage
    timings_ms: dict[str, float]
    cost_usd: float = 0.0
    cache_hits: int = 0


# ---------------------------------------------------------------------------------------------------
# Prices


class Price(NamedTuple):
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_write: float
    cache_read: float


# The default table: USD per million tokens (input, output, cache write (5 min), cache read).
PRICES_PER_MTOK: dict[str, Price] = {
    "claude-sonnet-4-6": Price(3.0, 15.0, 3.75, 0.30),
    "claude-sonnet-4-5": Price(3.0, 15.0, 3.75, 0.30),
    "claude-opus-4-6": Price(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-5": Price(5.0, 25.0, 6.25, 0.50),
    "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.10),
}
BATCH_DISCOUNT = 0.5  # Message Batches cost half the price of direct calls, every token kind
_FALLBACK_PRICE_MODEL = "claude-sonnet-4-6"
_DATED_SNAPSHOT = re.compile(r"^(?P<alias>.+)-\d{8}$")
_PRICE_FIELDS = Price._fields


def _price_key(model: str, table: Mapping[str, Price] | None = None) -> str | None:
    table = PRICES_PER_MTOK if table is None else table
    if model in table:
        return model
    match = _DATED_SNAPSHOT.match(model)  # "claude-sonnet-4-5-20250929" is priced as its alias
    if match and match.group("alias") in table:
        return match.group("alias")
    return None


def known_price(model: str, *, table: Mapping[str, Price] | None = None) -> bool:
    """True when ``model`` (an alias or a dated snapshot of one) is in the price table."""
    return _price_key(model, table) is not None


def price_usd(
    model: str, usage: Usage, *, table: Mapping[str, Price] | None = None, batch: bool = False
) -> float:
    """Cost of ``usage`` on ``model`` in USD; ``batch`` applies the Message Batches discount.

    ``table`` defaults to :data:`PRICES_PER_MTOK` (see :func:`load_price_table` for a user's own).
    An unknown model is priced as Sonnet (see :func:`known_price`).
    """
    table = PRICES_PER_MTOK if table is None else table
    key = _price_key(model, table)
    row = table[key] if key is not None else table.get(_FALLBACK_PRICE_MODEL, PRICES_PER_MTOK[_FALLBACK_PRICE_MODEL])
    p_in, p_out, p_write, p_read = row
    total = (
        usage.input_tokens * p_in
        + usage.output_tokens * p_out
        + usage.cache_write_tokens * p_write
        + usage.cache_read_tokens * p_read
    )
    return total / 1_000_000 * (BATCH_DISCOUNT if batch else 1.0)


def load_price_table(path: Path | str) -> dict[str, Price]:
    """The default table updated with a user's file: ``{model: {input, output, cache_write, cache_read}}``.

    YAML, or JSON for a ``.json`` file; USD per million tokens. A model already in the table may give
    only the fields it changes; a new model needs ``input`` and ``output``, and its cache prices
    default to Anthropic's multipliers (write 1.25x input, read 0.1x input). Every mistake is a
    HarnessConfigError naming the file and the field (``prices.yaml: claude-x.output: ...``).
    """
    path = Path(path)
    data = _read_price_file(path)
    if not isinstance(data, Mapping):
        raise HarnessConfigError(
            path,
            None,
            f"a price table is a mapping of model name to prices, not {type(data).__name__}",
            "write `claude-sonnet-4-6: {input: 3, output: 15, cache_write: 3.75, cache_read: 0.3}`",
        )
    table = dict(PRICES_PER_MTOK)
    for model, row in data.items():
        if not isinstance(model, str) or not model.strip():
            raise HarnessConfigError(path, str(model), "a model name must be a non-empty string")
        if not isinstance(row, Mapping):
            raise HarnessConfigError(
                path,
                model,
                f"must be a mapping with {', '.join(_PRICE_FIELDS)}, not {type(row).__name__}",
                "give USD per million tokens, e.g. `{input: 3, output: 15}`",
            )
        for name in row:
            if name not in _PRICE_FIELDS:
                raise HarnessConfigError(
                    path, f"{model}.{name}", "unknown field", f"use only {', '.join(_PRICE_FIELDS)}"
                )
        base_key = _price_key(model)
        base = PRICES_PER_MTOK[base_key] if base_key is not None else None
        values: dict[str, float] = {}
        for name in _PRICE_FIELDS:
            if name in row:
                value = row[name]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise HarnessConfigError(
                        path, f"{model}.{name}", f"{value!r} is not a number", "give USD per million tokens"
                    )
                if value < 0:
                    raise HarnessConfigError(path, f"{model}.{name}", f"{value!r} is negative", "prices are >= 0")
                values[name] = float(value)
            elif base is not None:
                values[name] = getattr(base, name)
            elif name in ("input", "output"):
                raise HarnessConfigError(
                    path,
                    f"{model}.{name}",
                    "missing: a model not in the default table needs input and output prices",
                    "give USD per million tokens, e.g. `{input: 3, output: 15}`",
                )
        values.setdefault("cache_write", values["input"] * 1.25)
        values.setdefault("cache_read", values["input"] * 0.1)
        table[model] = Price(**values)
    return table


def _read_price_file(path: Path) -> Any:
    from harness.yamlfile import load_yaml, read_text

    if path.suffix.lower() != ".json":
        return load_yaml(path)
    text = read_text(path)  # the size limit and a clear line for a file that is not UTF-8
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessConfigError(path, f"line {exc.lineno}", exc.msg, "fix the JSON syntax") from None


# ---------------------------------------------------------------------------------------------------
# The call policy: concurrency, rate limits, cache, batching, prices and stats for a whole session

DEFAULT_MAX_IN_FLIGHT = 16
_STAT_COUNTERS = (
    "calls",  # Messages API requests sent (HTTP attempts, retries included; batched requests not)
    "retries",  # HTTP attempts that were SDK retries (any endpoint)
    "cache_hits",  # answers served by the response cache
    "batched",  # answers that came back through a Message Batch
    "failures",  # complete() calls that ended in ModelCallError
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
)


class CallStats:
    """Live, thread-safe counters of one policy; :meth:`snapshot` is the progress line's and benchmarks' view."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_STAT_COUNTERS, 0)
        self._cost = 0.0
        self._in_flight = 0
        self._peak = 0
        self._limiter: RateLimiter | None = None
        self._batcher: Batcher | None = None

    def snapshot(self) -> dict[str, Any]:
        """Everything at once: the counters above, ``in_flight``, ``peak_in_flight``, ``cost_usd``,
        ``batches`` (created), ``batch_waiting`` (requests waiting on a batch) and ``rate_wait_s``
        (total time spent waiting for rate limits)."""
        with self._lock:
            snap: dict[str, Any] = dict(self._counts)
            snap["in_flight"] = self._in_flight
            snap["peak_in_flight"] = self._peak
            snap["cost_usd"] = self._cost
        snap["batches"] = self._batcher.batches_created if self._batcher is not None else 0
        snap["batch_waiting"] = self._batcher.waiting if self._batcher is not None else 0
        snap["rate_wait_s"] = self._limiter.waited_s if self._limiter is not None else 0.0
        return snap

    @property
    def cost_usd(self) -> float:
        with self._lock:
            return self._cost

    def _add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _answered(self, reply: ModelReply) -> None:
        with self._lock:
            if reply.batched:
                self._counts["batched"] += 1
            self._counts["input_tokens"] += reply.usage.input_tokens
            self._counts["output_tokens"] += reply.usage.output_tokens
            self._counts["cache_write_tokens"] += reply.usage.cache_write_tokens
            self._counts["cache_read_tokens"] += reply.usage.cache_read_tokens
            self._cost += reply.cost_usd


class CostCapReached(ModelCallError):
    """The policy's ``max_cost_usd`` is spent: no new model call starts (cache hits still answer)."""


class CallPolicy:
    """How every model call of a session is made; one instance shared by all its :class:`ModelClient` s.

    * ``max_in_flight``: at most this many HTTP requests at once (a semaphore around every attempt,
      SDK retries included; a retry's backoff sleep holds no slot);
    * ``rate_limits``: :class:`~harness.ratelimit.RateLimits` (or a ready :class:`~harness.ratelimit.RateLimiter`)
      respected before each Messages request is sent;
    * ``cache`` and ``cache_mode``: a :class:`~harness.cache.ResponseCache` and one of
      ``off|read|write|refresh|auto`` (see :mod:`harness.cache`);
    * ``batcher``: a :class:`~harness.batching.Batcher`; with it, requests go through Message Batches;
    * ``prices``: the price table (default :data:`PRICES_PER_MTOK`, see :func:`load_price_table`);
    * ``max_cost_usd``: once this much is spent, new calls raise :class:`CostCapReached` (exit 82).

    ``stats`` (:class:`CallStats`) counts everything live. :meth:`build` makes one from option values.
    """

    def __init__(
        self,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        *,
        rate_limits: RateLimits | RateLimiter | None = None,
        cache: ResponseCache | None = None,
        cache_mode: str = "auto",
        batcher: Batcher | None = None,
        prices: Mapping[str, Price] | None = None,
        max_cost_usd: float | None = None,
    ) -> None:
        if int(max_in_flight) < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        if cache_mode not in CACHE_MODES:
            raise ValueError(f"unknown cache mode {cache_mode!r}: use one of {', '.join(CACHE_MODES)}")
        self.max_in_flight = int(max_in_flight)
        if isinstance(rate_limits, RateLimits):
            self.limiter: RateLimiter | None = RateLimiter(rate_limits) if rate_limits else None
        else:
            self.limiter = rate_limits
        self.cache = cache
        self.cache_mode = cache_mode
        self.batcher = batcher
        self.prices: Mapping[str, Price] = dict(prices) if prices is not None else PRICES_PER_MTOK
        self.max_cost_usd = max_cost_usd
        self.stats = CallStats()
        self.stats._limiter = self.limiter
        self.stats._batcher = batcher
        self._slots = threading.BoundedSemaphore(self.max_in_flight)

    @classmethod
    def build(
        cls,
        *,
        concurrency: int = DEFAULT_MAX_IN_FLIGHT,
        cache_mode: str = "auto",
        work_dir: Path | str | None = None,
        requests_per_minute: float | None = None,
        input_tokens_per_minute: float | None = None,
        output_tokens_per_minute: float | None = None,
        processes: int = 1,
        batch: bool = False,
        on_batch_progress: ProgressCallback | None = None,
        price_file: Path | str | None = None,
        max_cost_usd: float | None = None,
    ) -> CallPolicy:
        """A policy from option values.

        The cache is ``work_dir/cache.db`` (opened on first use; none without a work dir or with
        ``cache_mode="off"``). The rate limits are the account's: with ``processes`` (pytest-xdist's
        worker count) each process gets its share. ``concurrency`` and ``max_cost_usd`` are per
        process. A bad price file is a HarnessConfigError naming the file and field.
        """
        cache = None
        if work_dir is not None and cache_mode != "off":
            cache = ResponseCache(Path(work_dir) / CACHE_FILE)
        limits = RateLimits(requests_per_minute, input_tokens_per_minute, output_tokens_per_minute)
        limits = limits.shared_by(processes)
        return cls(
            concurrency,
            rate_limits=limits,
            cache=cache,
            cache_mode=cache_mode,
            batcher=Batcher(on_progress=on_batch_progress) if batch else None,
            prices=load_price_table(price_file) if price_file is not None else None,
            max_cost_usd=max_cost_usd,
        )

    def __repr__(self) -> str:
        return (
            f"CallPolicy(max_in_flight={self.max_in_flight}, cache={self.cache!r}, cache_mode={self.cache_mode!r}, "
            f"limits={self.limiter.limits if self.limiter else None}, batch={self.batcher is not None})"
        )

    def price(self, model: str, usage: Usage, *, batch: bool = False) -> float:
        """``price_usd`` with this policy's table."""
        return price_usd(model, usage, table=self.prices, batch=batch)

    def close(self) -> None:
        """End of session: stop batching (failing whatever still waits) and close the cache."""
        if self.batcher is not None:
            self.batcher.close()
        if self.cache is not None:
            self.cache.close()

    # -- used by ModelClient -------------------------------------------------------------------------

    def _cache_access(self, temperature: float) -> tuple[bool, bool, bool]:
        if self.cache is None:
            return False, False, False
        return cache_access(self.cache_mode, temperature)

    def _check_budget(self) -> None:
        if self.max_cost_usd is None:
            return
        spent = self.stats.cost_usd
        if spent >= self.max_cost_usd:
            raise CostCapReached(
                f"the cost cap of ${self.max_cost_usd:g} is reached (${spent:.4f} spent); "
                "no new model calls start (raise --harness-max-cost to go on)",
                ExitCode.QUOTA_EXCEEDED,
            )

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        self._slots.acquire()
        self.stats._enter()
        try:
            yield
        finally:
            self.stats._leave()
            self._slots.release()

    def _middleware(self, request: Any, call_next: Any) -> Any:
        """SDK middleware: runs once per HTTP attempt, inside the SDK's retry loop."""
        if request.retries_taken:
            self.stats._add("retries")
        is_message = str(request.method).lower() == "post" and str(request.url).rstrip("/").endswith("/v1/messages")
        reservation: Reservation | None = None
        if is_message and self.limiter is not None:
            body = request.json if isinstance(request.json, Mapping) else {}
            reservation = self.limiter.acquire(estimate_input_tokens(body), int(body.get("max_tokens") or 0))
        try:
            with self._slot():
                if is_message:
                    self.stats._add("calls")
                response = call_next(request)
        except BaseException:
            if reservation is not None and self.limiter is not None:
                self.limiter.refund(reservation)
            raise
        if reservation is not None and self.limiter is not None:
            self._settle(self.limiter, reservation, response)
        return response

    @staticmethod
    def _settle(limiter: RateLimiter, reservation: Reservation, response: Any) -> None:
        try:
            if not 200 <= int(response.status_code) < 300:
                raise ValueError("no answer")
            usage = response.http_response.json().get("usage") or {}
            written = int(usage.get("cache_creation_input_tokens") or 0)
            limiter.settle(
                reservation,
                input_tokens=int(usage.get("input_tokens") or 0) + written,
                output_tokens=int(usage.get("output_tokens") or 0),
            )
        except Exception:
            limiter.refund(reservation)


# ---------------------------------------------------------------------------------------------------
# The client


_PRELOAD_LOCK = threading.Lock()
_IMPORT_LOCK = threading.Lock()
_preloading: threading.Thread | None = None


def _import_sdk() -> Any:
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


def _preload_sdk() -> None:
    """Start importing the SDK (about 1.5 s) on a background thread, so that it overlaps collection
    instead of delaying the first model call. Safe to call many times."""
    global _preloading
    with _PRELOAD_LOCK:
        if _preloading is None:
            _preloading = threading.Thread(target=_import_sdk, name="harness-sdk-import")
            _preloading.start()


def _one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split()).rstrip(".")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


_CACHE_KEY_VERSION = 1


class ModelClient:
    """A thread-safe handle on the Messages API; several threads may share one instance.

    Without a ``policy`` the client gets one of its own (default concurrency bound, no rate limits,
    no cache, no batching); in a pytest session every client shares the session's policy.
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
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self._api_key = key or None
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.policy = policy if policy is not None else CallPolicy()
        self._sdk: anthropic.Anthropic | None = None
        self._sdk_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ModelClient(model={self.settings.model!r}, base_url={self.base_url!r}, available={self.available})"

    @property
    def available(self) -> bool:
        """True when an API key is set (nothing is checked over the network)."""
        return self._api_key is not None

    def preload(self) -> None:
        """Start importing the SDK in the background when this client is likely to call the API: it
        has a key, and the response cache cannot answer (its mode does not read, or there is no cache
        file yet). A later run that the cache answers whole never pays for the import (about 1.5 s)."""
        if self._api_key is None:
            return
        read, _, _ = self.policy._cache_access(self.settings.temperature)
        cache = self.policy.cache
        if read and cache is not None and cache.path.exists():
            return
        _preload_sdk()

    def _client(self) -> anthropic.Anthropic:
        if self._api_key is None:
            raise ModelUnavailable(
                "no ANTHROPIC_API_KEY: set it in the environment to run the model; "
                "anything that needs a model is indeterminate until then"
            )
        with self._sdk_lock:
            if self._sdk is None:
                anthropic = _import_sdk()
                try:
                    self._sdk = anthropic.Anthropic(
                        api_key=self._api_key,
                        base_url=self.base_url,
                        timeout=self.settings.timeout_s,
                        max_retries=self.settings.max_retries,
                        middleware=[self.policy._middleware],
                    )
                except Exception as err:  # e.g. a malformed ANTHROPIC_BASE_URL
                    raise ModelCallError(
                        f"could not set up the model client for {self.base_url}: {_one_line(err)}; "
                        "check ANTHROPIC_BASE_URL",
                        ExitCode.CONFIG_ERROR,
                    ) from None
            return self._sdk

    def close(self) -> None:
        """Close the SDK's connection pool (a later call opens a new one). The policy stays open."""
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
        cache_extra: Mapping[str, Any] | None = None,
        batch: bool | None = None,
    ) -> ModelReply:
        """Send one Messages API request; raise ModelUnavailable / ModelCallError, never an SDK error.

        With ``cached_system_prefix`` the system prompt is sent as text blocks, the prefix first and
        marked ``cache_control: ephemeral``, so a stable prefix (rubric, evaluator prompt, examples)
        is written to the prompt cache once and read on later calls.

        The policy's response cache may answer instead (``reply.cached``, no call, no cost);
        ``cache_extra`` (JSON-able) goes into the cache key only, e.g. ``{"sample": 2}`` so K judge
        samples are K answers, or the rubric and prompt versions. With a batcher in the policy the
        request goes through a Message Batch (``reply.batched``, half price) unless ``batch=False``;
        the call blocks until its answer is back either way.
        """
        settings = self.settings
        params: dict[str, Any] = {
            "model": settings.model,
            "max_tokens": settings.max_tokens,
            "messages": messages,
        }
        system_param = _system_param(system, cached_system_prefix)
        if system_param:
            params["system"] = system_param
        if tools:
            params["tools"] = tools
        if tool_choice:
            params["tool_choice"] = tool_choice

        policy = self.policy
        read, write, overwrite = policy._cache_access(settings.temperature)
        key: str | None = None
        if read or write:
            key = cache_key(
                {
                    "v": _CACHE_KEY_VERSION,
                    "request": params,
                    "temperature": settings.temperature,
                    "extra": dict(cache_extra) if cache_extra else None,
                }
            )
        if read and key is not None and policy.cache is not None:
            hit = _reply_from_cache(policy.cache.get(key))
            if hit is not None:
                policy.stats._add("cache_hits")
                return hit

        policy._check_budget()
        sdk = self._client()
        batched = policy.batcher is not None and batch is not False
        try:
            message = self._send_batched(sdk, params) if batched else self._send(sdk, params)
            if not isinstance(message, dict) or not isinstance(message.get("content"), list):
                raise ModelCallError(
                    f"the model API at {self.base_url} answered without message content; "
                    "check ANTHROPIC_BASE_URL points at the Messages API",
                    ExitCode.PROTOCOL,
                )
        except ModelCallError:
            policy.stats._add("failures")
            raise
        reply = _reply_from_message(message, settings.model)
        priced_as = reply.model if known_price(reply.model, table=policy.prices) else settings.model
        reply = dataclasses.replace(
            reply, batched=batched, cost_usd=policy.price(priced_as, reply.usage, batch=batched)
        )
        policy.stats._answered(reply)
        if write and key is not None and policy.cache is not None:
            policy.cache.put(key, _reply_to_cache(reply), model=settings.model, overwrite=overwrite)
        return reply

    def _send(self, sdk: anthropic.Anthropic, params: dict[str, Any]) -> Any:
        """The answer as the API's JSON. The raw response skips the SDK's typed ``Message``: the harness
        reads five fields, and building the model costs about a third of the SDK's CPU per call."""
        try:
            return json.loads(sdk.messages.with_raw_response.create(**params).http_response.content)
        except Exception as err:
            raise self._map_any(err) from None

    def _send_batched(self, sdk: anthropic.Anthropic, params: dict[str, Any]) -> Any:
        batcher = self.policy.batcher
        assert batcher is not None
        future = batcher.submit(
            params, api=sdk.messages.batches, map_error=self._map_any, group=(self.base_url, self._api_key)
        )
        return future.result().model_dump(mode="json")

    def _map_any(self, err: BaseException) -> BaseException:
        """Any exception from the SDK as a ModelCallError (other exceptions pass through)."""
        import anthropic

        if isinstance(err, ModelCallError):
            return err
        if isinstance(err, anthropic.AnthropicError):
            return self._map_error(err)
        if isinstance(err, json.JSONDecodeError):
            return ModelCallError(
                f"the model API at {self.base_url} answered with something that is not JSON ({_one_line(err)}); "
                "check ANTHROPIC_BASE_URL points at the Messages API",
                ExitCode.PROTOCOL,
            )
        if isinstance(err, (ValueError, TypeError)):  # the SDK refused the request before sending it
            return ModelCallError(
                f"model call failed before an answer: {_one_line(err)}; check the model settings and message shapes",
                ExitCode.PROTOCOL,
            )
        return err

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
        cache_extra: Mapping[str, Any] | None = None,
        batch: bool | None = None,
    ) -> GenerationResult:
        """Ask for a JSON object matching ``schema`` through a forced tool call; retry once on errors.

        The retry's messages show the model its previous answer and the validation errors
        (``path: message``). ``success=False`` after the retry means validation_failed for the caller.
        Model call failures raise ModelCallError / ModelUnavailable as in :meth:`complete`; when the
        retry call fails, the error's ``usage`` holds the first call's tokens. ``cache_extra`` and
        ``batch`` are passed to both calls (see :meth:`complete`).
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
        cost = 0.0
        cache_hits = 0
        data: dict[str, Any] | None = None
        raw: str | None = None
        errors: list[str] = []
        attempts = 0
        for attempt in (1, 2):
            attempts = attempt
            t_call = time.perf_counter()
            try:
                reply = self.complete(
                    system=system,
                    messages=messages,
                    tools=tools,
                    tool_choice=tool_choice,
                    cached_system_prefix=cached_system_prefix,
                    cache_extra=cache_extra,
                    batch=batch,
                )
            except ModelCallError as err:
                if attempt > 1 and err.usage is None:
                    err.usage = usage  # the first call's tokens were spent: keep them accountable
                raise
            timings["llm_call"] += (time.perf_counter() - t_call) * 1000
            if not reply.cached:  # a replayed answer took no tokens this time
                usage = usage + reply.usage
            cost += reply.cost_usd
            cache_hits += reply.cached

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
            cost_usd=cost,
            cache_hits=cache_hits,
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


def _reply_to_cache(reply: ModelReply) -> dict[str, Any]:
    return {
        "text": reply.text,
        "tool_input": reply.tool_input,
        "usage": dataclasses.asdict(reply.usage),
        "model": reply.model,
        "stop_reason": reply.stop_reason,
        "tool_use_id": reply.tool_use_id,
        "tool_name": reply.tool_name,
    }


def _reply_from_cache(entry: Mapping[str, Any] | None) -> ModelReply | None:
    """The cached reply (``cached=True``, free), or None when the entry is missing or not understood."""
    if entry is None:
        return None
    try:
        usage = entry.get("usage") or {}
        tool_input = entry.get("tool_input")
        return ModelReply(
            text=str(entry["text"]),
            tool_input=dict(tool_input) if isinstance(tool_input, Mapping) else None,
            usage=Usage(**{f.name: int(usage.get(f.name, 0)) for f in dataclasses.fields(Usage)}),
            model=str(entry["model"]),
            stop_reason=entry.get("stop_reason"),
            tool_use_id=entry.get("tool_use_id"),
            tool_name=entry.get("tool_name"),
            cached=True,
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _reply_from_message(message: Mapping[str, Any], requested_model: str) -> ModelReply:
    """A ModelReply from a Messages API answer (its JSON, as a dict)."""
    texts: list[str] = []
    tool_input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    tool_name: str | None = None
    for block in message.get("content") or []:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use" and tool_input is None:
            raw_input = block.get("input")
            tool_input = dict(raw_input) if isinstance(raw_input, Mapping) else {"_": raw_input}
            tool_use_id = block.get("id")
            tool_name = block.get("name")
    u = message.get("usage") or {}
    usage = Usage(
        input_tokens=int(u.get("input_tokens") or 0),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_write_tokens=int(u.get("cache_creation_input_tokens") or 0),
        cache_read_tokens=int(u.get("cache_read_input_tokens") or 0),
    )
    return ModelReply(
        text="".join(texts),
        tool_input=tool_input,
        usage=usage,
        model=str(message.get("model") or requested_model),
        stop_reason=message.get("stop_reason"),
        tool_use_id=tool_use_id,
        tool_name=tool_name,
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
