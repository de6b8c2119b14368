"""What of a judge's prompt is the same for every case (the cached prefix), and whether it is long enough to cache.

The built-in judge's stable part is the evaluator prompt, the rubric, its examples and the answer instruction,
sent as the cached system prefix; a rubric of a case's own (per-case criteria) changes with the case, so it travels
in the message instead. A judge template is sent as written: its system message is the cached prefix unless it
holds a case slot, and the prompt is cached up to the template's first case slot (the fixed text before it, with the
rubric's slots ``criteria``, ``rubric`` and ``steps`` filled), through a breakpoint inside that message
(:attr:`harness.llm.Message.cache_head`).

A prefix shorter than its model's minimum (harness.llm.prompt_cache) is neither written nor read by the provider:
:func:`prefix_note` says so once per rubric and model, estimating tokens as the harness does (characters / 4,
the tool definitions included: a provider caches the tools, then the system prompt, then the messages).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.base import slots
from harness.base.models import PromptTemplate
from harness.base.requests import JudgeRequest
from harness.llm import Message, ModelClient
from harness.llm.prompt_cache import estimated_tokens, min_cacheable_tokens

RUBRIC_SLOTS = frozenset({"criteria", "rubric", "steps"})  # a judge template's slots that only the rubric fills
TOOL_DESCRIPTION = "Submit the result. The input must match this JSON Schema exactly."  # as generate_json sends it


@dataclass(frozen=True)
class PrefixNote:
    """A judge's cached prefix that is too short for its model to cache: ``tokens`` (estimated) against the
    model's ``minimum``."""

    rubric: str
    model: str
    agent: str
    tokens: int
    minimum: int


def template_prompt(template: PromptTemplate, request: JudgeRequest, system: str,
                    chat: Sequence[Message]) -> tuple[str | None, str, tuple[Message, ...]]:
    """A filled judge template's (cached prefix, plain system prompt, messages), the messages' cache breakpoint
    set at the template's first case slot. ``system`` and ``chat`` are the template's messages as filled."""
    def lookup(name: str) -> object:
        return request.slot(template.slot_for(name))

    stable = frozenset() if request.rubric.variant else RUBRIC_SLOTS  # a case's own rubric changes with it
    raw = [m.content for m in template.messages if m.role != "system"] if template.messages else [template.text]
    if any(_first_case_slot(m.content, template, stable) is not None
           for m in template.messages if m.role == "system"):
        return None, system, tuple(chat)  # a system prompt that changes with the case: nothing before it is stable
    messages = list(chat)
    if len(raw) != len(messages):
        return system or None, "", tuple(messages)
    for index, content in enumerate(raw):
        cut = _first_case_slot(content, template, stable)
        if cut is None and index < len(raw) - 1:
            continue
        text = messages[index].text
        head = slots.render_text(content[:cut], lookup) if cut is not None else text
        if not text.startswith(head):
            break  # the filled message does not begin with its filled fixed text: no breakpoint
        if head:
            messages[index] = replace(messages[index], cache_head=len(head))
        elif index > 0:  # it starts with a case slot: the stable part ends with the message before it
            messages[index - 1] = replace(messages[index - 1], cache_head=len(messages[index - 1].text))
        break
    return system or None, "", tuple(messages)


def _first_case_slot(text: str, template: PromptTemplate, stable: frozenset[str]) -> int | None:
    """Where the first slot a case fills (any but the ``stable`` ones) starts in ``text``; None when it has none."""
    for match in slots.SLOT.finditer(text):
        if template.slot_for(match.group(1) or match.group(2)) not in stable:
            return match.start()
    return None


def cached_chars(prefix: str | None, messages: Sequence[Message], schema: dict[str, Any] | None,
                 tool_name: str) -> int:
    """The characters of the prompt a provider caches: the forced tool (when the answer comes through one), the
    system prefix, and the messages up to the breakpoint inside one of them. 0 when nothing is marked."""
    marked = next((i for i, m in enumerate(messages) if m.cache_head), None)
    if not prefix and marked is None:
        return 0
    chars = len(prefix or "")
    if marked is not None:
        chars += sum(len(m.text) for m in messages[:marked]) + messages[marked].cache_head
    if schema is not None:
        chars += len(json.dumps([{"name": tool_name, "description": TOOL_DESCRIPTION, "input_schema": schema}]))
    return chars


def prefix_note(client: ModelClient, request: JudgeRequest, chars: int) -> PrefixNote | None:
    """A note when the ``chars`` characters a judge marks as its cached prefix are fewer tokens than ``client``'s
    model caches (None when enough, nothing is marked, or the model's minimum is not known)."""
    minimum = min_cacheable_tokens(client.model, base_url=client.settings.base_url)
    tokens = estimated_tokens(chars)
    if minimum is None or chars == 0 or tokens >= minimum:
        return None
    return PrefixNote(request.rubric.name, client.model, request.agent, tokens, minimum)
