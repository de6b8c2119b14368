"""Chat messages carried over as a chat template (docs/material.md, "Chat templates"): a promptfoo chat prompt or
``rubricPrompt``, openai/evals' chat samples. A list of messages that fits a chat template's rules (a system
message first, then user and assistant messages ending with a user message) is written as one, each message in its
role; one that does not is written as text, with a line saying why."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.apps.importers import Plan, dump_yaml
from harness.base.errors import HarnessConfigError
from harness.base.fields import Fields
from harness.loading.chat_templates import chat_messages

Messages = list[dict[str, str]]


def as_chat_template(raw: Any, source: Path, where: str, plan: Plan) -> Messages | None:
    """``raw``'s messages as a chat template's (``role`` and text ``content`` only), or None when it is no list of
    messages or breaks a chat template's rules; the problem is then a ``not carried over:`` line."""
    if not isinstance(raw, list) or not all(isinstance(m, Mapping) and "content" in m for m in raw):
        return None
    messages = [{"role": str(m.get("role", "user")), "content": m["content"]} for m in raw]
    dropped = sorted({str(key) for m in raw for key in m if key not in ("role", "content")})
    try:
        chat_messages(messages, Fields.of(source))
    except HarnessConfigError as exc:
        field = f"{exc.field}: " if exc.field else ""
        plan.not_carried(where, "chat prompt", f"the roles of its messages: {field}{exc.problem}, so it is written "
                         "as one message of text", "check the template file")
        return None
    if dropped:
        plan.not_carried(where, "chat prompt", f"the messages' {', '.join(dropped)}: a chat template's message has a "
                         "role and a content only")
    return messages


def template_text(messages: Messages, comment: str | None = None) -> str:
    """A chat template's file (YAML, a message a list item)."""
    return dump_yaml(messages, comment=comment)


def flattened(raw: list[Any]) -> str:
    """Messages as one text, a ``role: content`` paragraph each (what a text template holds)."""
    return "\n\n".join(f"{m.get('role', 'user')}: {m['content']}" if isinstance(m, Mapping) else str(m) for m in raw)
