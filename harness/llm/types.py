"""Provider-neutral requests and replies: what the harness asks a model and what comes back.

Every provider (``harness.llm.providers``) turns a :class:`ModelRequest` into its own wire format and its
answer into a :class:`ModelReply`; nothing above ``harness.llm`` sees a provider's message shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from harness.base.usage import Spend, Usage


@dataclass(frozen=True)
class ToolCall:
    """A tool the model called: ``input`` is the parsed arguments."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """The answer to a :class:`ToolCall`, sent back in the next user turn."""

    call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class Message:
    """One turn: text, the tool calls an assistant made, or the tool results a user turn returns.

    ``cache_head``: the first that many characters of ``text`` end the stable start of the prompt (a judge
    template's fixed text before its first case slot): a provider with prompt caching marks the prompt up to there
    as cacheable (Anthropic: a ``cache_control`` block; OpenAI caches the longest prefix it has seen anyway)."""

    role: Literal["user", "assistant"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    cache_head: int = 0

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", text)

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", text)


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call; ``schema`` is the JSON Schema of its input."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    """One request, before any provider's shape.

    ``tool_choice``: ``None`` lets the model choose (``auto``), ``"any"`` requires some tool, a tool's name
    forces that tool. ``output_schema`` asks for a JSON answer matching it through the server's structured
    output (for providers and servers without tool calling). ``cached_system_prefix`` is a stable start of
    the system prompt that a provider with prompt caching marks as cacheable. ``parallel_tools=False`` asks
    for at most one tool call per answer.
    """

    model: str  # the name the provider knows (no ``provider/`` prefix)
    system: str = ""
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | None = None
    output_schema: dict[str, Any] | None = None
    output_name: str = "result"
    cached_system_prefix: str | None = None
    max_tokens: int = 4096
    temperature: float = 0.0
    parallel_tools: bool = True
    top_p: float | None = None  # nucleus sampling, where the provider takes it
    stop: tuple[str, ...] = ()  # sequences that end the answer (not included in it)
    seed: int | None = None  # a sampling seed, where the provider takes it
    top_logprobs: int | None = None  # the log probabilities of this many likeliest tokens at each position
    # the response cache's key of this request (set by ModelClient, never part of it): how a batch journal
    # records the request and finds it again in a later run (harness.llm.batch_journal)
    key: str | None = None

    def cache_payload(self) -> dict[str, Any]:
        """Everything that decides the answer, as JSON-able data (the response cache's key). The generation
        settings are in it only when set, so the keys of answers made before they existed stay the same."""
        payload = {
            "model": self.model, "system": self.system, "prefix": self.cached_system_prefix,
            "messages": [_message_payload(m) for m in self.messages],
            "tools": [{"name": t.name, "description": t.description, "schema": t.schema} for t in self.tools],
            "tool_choice": self.tool_choice, "output_schema": self.output_schema, "max_tokens": self.max_tokens,
            "parallel_tools": self.parallel_tools,
        }
        generation = {"top_p": self.top_p, "stop": list(self.stop) or None, "seed": self.seed,
                      "top_logprobs": self.top_logprobs}
        payload.update({key: value for key, value in generation.items() if value is not None})
        return payload


def _message_payload(message: Message) -> dict[str, Any]:
    return {"role": message.role, "text": message.text,
            "tool_calls": [[c.id, c.name, c.input] for c in message.tool_calls],
            "tool_results": [[r.call_id, r.content, r.is_error] for r in message.tool_results],
            **({"cache_head": message.cache_head} if message.cache_head else {})}  # the keys before it stay


@dataclass(frozen=True)
class TokenLogprob:
    """One token of an answer's text, its log probability, and the likeliest tokens at its place (``top``: each
    ``(token, log probability)``, the likeliest first)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ModelReply:
    """One model answer.

    ``model`` is the model that answered, as records name it (``provider/name``; a bare name for Anthropic).
    ``usage`` is what the answer took. ``cost_usd`` is what it cost this time: the price of ``usage`` (at the
    batch discount when ``batched``), 0 when it came from the response cache (``cached``), None when the model
    has no price. ``logprobs`` are the tokens of ``text`` with their log probabilities, when the request asked for
    them (``top_logprobs``) and the provider returned them; None otherwise (Anthropic, the mock, a server that
    ignores the parameter).
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    model: str
    stop_reason: str | None  # normalised: end_turn, max_tokens, tool_use, refusal, or the provider's own word
    cached: bool = False
    batched: bool = False
    cost_usd: float | None = 0.0
    logprobs: tuple[TokenLogprob, ...] | None = None

    @property
    def tool_call(self) -> ToolCall | None:
        """The first tool call, if any."""
        return self.tool_calls[0] if self.tool_calls else None

    @property
    def tool_input(self) -> dict[str, Any] | None:
        return self.tool_calls[0].input if self.tool_calls else None

    @property
    def spend(self) -> Spend:
        """This answer in the one account: a replayed answer is a cached one, with no tokens and no cost."""
        spend = Spend()
        if self.cached:
            spend.add(self.model, Usage(), 0.0, calls=0, cached=1)
        else:
            spend.add(self.model, self.usage, self.cost_usd)
        return spend


@dataclass(frozen=True)
class GenerationResult:
    """The generation flow's result: the validated data, or the validation errors after the one retry.

    ``usage`` and ``cost_usd`` sum the live calls (cache hits take no tokens and are free; ``cost_usd`` is None
    when the model has no price); ``cache_hits`` counts the answers that came from the response cache.
    ``first_errors`` are the first answer's validation errors when it was retried (shown to the model then).
    """

    success: bool
    data: dict[str, Any] | None
    raw_response: str | None
    validation_errors: list[str]
    attempts: int
    usage: Usage
    timings_ms: dict[str, float]
    model: str = ""
    cost_usd: float | None = 0.0
    cache_hits: int = 0
    first_errors: tuple[str, ...] = ()

    @property
    def spend(self) -> Spend:
        """The calls behind this result in the one account (``harness.base.usage``)."""
        spend = Spend()
        spend.add(self.model, self.usage, self.cost_usd, calls=self.attempts - self.cache_hits,
                  cached=self.cache_hits)
        return spend
