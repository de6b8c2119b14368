"""Chat templates: a producer's, reviser's or judge's template written as chat messages, each with its role.

A ``.json``, ``.yaml`` or ``.yml`` template file is a list of messages, promptfoo's JSON chat prompt shape (and
OpenAI's): ``[{role: system, content: "..."}, {role: user, content: "...{output}..."}]``. A system message may
only come first; then user and assistant messages (a few-shot exchange, say), starting and ending with a user
message, the one the model answers. Each message's ``content`` is text with slots, filled as a text template's
are (docs/material.md, "Chat templates"). A mistake is one error naming the template file and the message's
field, ``judges/mt.json: [1].role: ...``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields
from harness.base.models import PromptTemplate, TemplateMessage
from harness.base.slots import slots_in
from harness.base.yamlfile import parse_yaml, read_text

CHAT_SUFFIXES = (".json", ".yaml", ".yml")
ROLES = ("system", "user", "assistant")
EXAMPLE = '`[{role: system, content: "You are a fair judge."}, {role: user, content: "Rate this: {output}"}]`'


def is_chat_template(path: Path) -> bool:
    """Whether a template file holds chat messages (JSON or YAML) rather than text used as one message."""
    return path.suffix.lower() in CHAT_SUFFIXES


def read_template(path: Path, names: dict[str, str]) -> PromptTemplate:
    """The template file at ``path``: a chat template's messages, or a text template's text (one user message);
    ``names`` are its ``slots:``."""
    if not is_chat_template(path):
        return PromptTemplate(path=path, text=read_text(path), names=names)
    messages = load_chat_template(path)
    return PromptTemplate(path=path, text="\n\n".join(m.content for m in messages), names=names, messages=messages)


def place_of(template: PromptTemplate, slot: str) -> str:
    """Where ``template`` uses the slot ``slot`` (a name after its ``slots:``): `` (message [1])`` in a chat
    template, nothing in a text template."""
    for index, message in enumerate(template.messages):
        if any(template.slot_for(name) == slot for name in slots_in(message.content)):
            return f" (message [{index}])"
    return ""


def load_chat_template(path: Path) -> tuple[TemplateMessage, ...]:
    """The messages of the chat template at ``path``, checked: each a role and its text, a system message only
    first, a user message first and last among the others."""
    return chat_messages(_parse(path), Fields.of(path))


def chat_messages(raw: Any, place: Fields) -> tuple[TemplateMessage, ...]:
    """``raw`` (a file's parsed list) read as a chat template's messages; ``place`` names the file."""
    if isinstance(raw, (str, bytes)) or not isinstance(raw, list) or not raw:
        raise place.expected(None, "a list of chat messages, each {role, content}", raw, f"write {EXAMPLE}")
    messages: list[TemplateMessage] = []
    for index, item in enumerate(raw):
        here = place.nested(f"[{index}]")
        entry = here.section(item, known=("role", "content"), required=("role", "content"),
                             example='`{role: user, content: "..."}`')
        role = entry.choice("role", ROLES, "role")
        content = here.string(entry.raw["content"], "content", what="the message's text",
                              fix="write the message as text; its slots are filled per case (images and tool "
                                  "calls are not supported)")
        if role == "system" and index:
            raise here.error("role", "a system message comes first, and only once",
                             "keep one system message, at the top of the list")
        if role == "assistant" and (not messages or messages[-1].role == "system"):
            raise here.error("role", "an assistant message before any user message",
                             "start the conversation with a user message (a system message may come before it)")
        messages.append(TemplateMessage(role=role, content=content))
    if messages[-1].role != "user":
        last = place.nested(f"[{len(messages) - 1}]")
        article = "an" if messages[-1].role == "assistant" else "a"
        raise last.error("role", f"the last message is {article} {messages[-1].role} message: the model answers the "
                         "last user message", "end the list with a user message")
    return tuple(messages)


def _parse(path: Path) -> Any:
    text = read_text(path)
    if path.suffix.lower() != ".json":
        return parse_yaml(text, path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessConfigError(path, f"line {exc.lineno}", f"invalid JSON ({exc.msg})", "fix the JSON") from None
    except RecursionError:
        raise HarnessConfigError(path, None, "JSON nested too deeply to read", "flatten the JSON") from None
