"""The providers' minimum cacheable prompt prefix, per model, and the harness's estimate of a prefix's tokens.

A prompt prefix shorter than its model's minimum is neither written to nor read from the provider's prompt cache,
and no error says so: every input token is billed at the plain input price (the usage then shows no cache-write
and no cache-read tokens). The judge checks its cached prefix against these minimums once per rubric and model,
and the session summary says when it is too short (docs/model-calls.md, "Prompt caching"); the fake servers
(harness.testing) model the same minimums.

Anthropic's minimums are from "Prompt caching", section "Cache limitations", of its documentation
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching, read through copies of the page dated
2026-04 to 2026-06); OpenAI caches automatically from 1,024 tokens, in steps of 128 tokens
(https://platform.openai.com/docs/guides/prompt-caching).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.models import split_model

CHARS_PER_TOKEN = 4  # the harness's estimate of tokens everywhere (the rate limiter's, the fakes'): characters / 4

# Anthropic, by model (a dated snapshot, ``claude-sonnet-4-5-20250929``, takes its alias's minimum).
ANTHROPIC_MIN_TOKENS: dict[str, int] = {
    "claude-opus-4-8": 1024,
    "claude-opus-4-7": 4096,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4-6": 2048,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
OPENAI_MIN_TOKENS = 1024  # OpenAI's own models (gpt-*, o1/o3/o4-*, chatgpt-*), automatic caching
OPENAI_STEP_TOKENS = 128  # what OpenAI caches beyond the minimum grows in steps of this many tokens
_OPENAI_MODELS = re.compile(r"^(gpt-|chatgpt-|o\d(-|$))")
_DATED = re.compile(r"^(?P<alias>.+)-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def min_cacheable_tokens(model: str, *, base_url: str | None = None) -> int | None:
    """The fewest prompt tokens ``model`` (as records name it: ``claude-sonnet-4-6``, ``openai/gpt-4.1``) caches;
    None when it is not known (the mock, a model of another provider or a newer family, a server of your own at
    ``base_url``)."""
    provider, name = split_model(model)
    if base_url:  # a server of your own (vLLM, a proxy): its own rules, if any
        return None
    if provider == "anthropic":
        dated = _DATED.match(name)
        return ANTHROPIC_MIN_TOKENS.get(name, ANTHROPIC_MIN_TOKENS.get(dated.group("alias")) if dated else None)
    if provider == "openai" and _OPENAI_MODELS.match(name):
        return OPENAI_MIN_TOKENS
    return None


def estimated_tokens(chars: int) -> int:
    """Tokens of a text of ``chars`` characters, as the harness estimates them (characters / 4)."""
    return chars // CHARS_PER_TOKEN


def tools_chars(tools: Sequence[Mapping[str, Any]]) -> int:
    """The characters of tool definitions (name, description, input schema) as JSON: the start of every cached
    prefix, since a provider caches ``tools``, then ``system``, then ``messages``."""
    return len(json.dumps(list(tools))) if tools else 0


def shortfall_line(rubric: str, model: str, tokens: int, minimum: int, agents: Sequence[str] = ()) -> str:
    """The summary's one line for a prefix too short to cache: by how much, and what it costs."""
    who = f" (agent{'s' * (len(agents) != 1)} {', '.join(agents)})" if agents else ""
    return (f"prompt cache: rubric {rubric} on {model}{who}: the judge's cached prefix is about {tokens:,} tokens "
            f"(characters / 4), {minimum - tokens:,} short of the {minimum:,} {model} caches from: nothing is "
            "cached, every call pays the full input price (fix: a stable prefix past the minimum, e.g. more of the "
            "rubric's examples, or a judge model with a lower minimum)")
