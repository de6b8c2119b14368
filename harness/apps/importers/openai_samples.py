"""openai/evals' samples (a JSONL file, one sample a line) as a dataset, and the producer template that sends each
sample's input to the model under test.

A text input is the one user message. A chat input (a list of ``{role, content}`` messages) stays messages: its
leading system messages become the column ``NAME_system`` and the producer's chat template sends it as the system
prompt, its last user message the column ``NAME`` itself, sent as the user message. Messages between them (the
few-shot ``example_user`` and ``example_assistant`` messages, earlier turns) have no column of their own: they are
written before the last message as text, as openai/evals writes a chat for a text model, and a line says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.apps.importers import ImportInputError, Plan
from harness.apps.importers.chat import template_text
from harness.base.errors import HarnessConfigError
from harness.base.yamlfile import read_text

# how openai/evals' chat_prompt_to_text_prompt writes each message of a chat as text
_PREFIXES = {"system": "", "example_user": "User: ", "example_assistant": "Assistant: ", "user": "User: ",
             "assistant": "Assistant: "}


@dataclass
class Samples:
    """The samples, each chat input split into its columns, and the input keys that held a system message."""

    rows: list[dict[str, Any]]
    with_system: set[str] = field(default_factory=set)

    def columns(self, key: str) -> list[str]:
        """The dataset's columns for the input ``key``: itself, and its system prompt when one sample had one."""
        return [key, system_column(key)] if key in self.with_system else [key]


def system_column(key: str) -> str:
    return f"{key}_system"


def read_samples(path: Path, plan: Plan, keys: tuple[str, ...] = ("input",)) -> Samples:
    """The samples of ``path``, each chat input of ``keys`` split into its system prompt and its user message."""
    try:
        text = read_text(path, limit=512 * 1024 * 1024)
    except HarnessConfigError as exc:
        raise ImportInputError(path, exc.field, exc.problem, exc.fix) from None
    samples = Samples(rows=[])
    folded: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportInputError(path, f"line {number}", f"invalid JSON ({exc.msg})",
                                   "a .jsonl file holds one JSON object a line") from None
        if not isinstance(row, dict):
            raise ImportInputError(path, f"line {number}", f"expected an object, got {type(row).__name__}")
        for key in keys:
            if isinstance(row.get(key), list):
                system, row[key], earlier = _split_chat(row[key], path, f"line {number}: {key}")
                row[system_column(key)] = system
                if system:
                    samples.with_system.add(key)
                folded[key] = folded.get(key, 0) + earlier
            elif key in row and not isinstance(row[key], str):
                raise ImportInputError(path, f"line {number}: {key}", "expected text or a list of chat messages")
        if "ideal" in row and not (isinstance(row["ideal"], str) or (
                isinstance(row["ideal"], list) and all(isinstance(i, str) for i in row["ideal"]))):
            raise ImportInputError(path, f"line {number}: ideal", "expected text or a list of texts")
        samples.rows.append(row)
    if not samples.rows:
        raise ImportInputError(path, None, "no samples", "write one JSON object a line")
    for key in keys:  # every sample gets every column, empty where its input had no system message
        for row in samples.rows:
            if key in samples.with_system:
                row.setdefault(system_column(key), "")
            elif row.get(system_column(key)) == "":
                del row[system_column(key)]
    for key, count in folded.items():
        if count:
            plan.not_carried(f"{path.name}: {key}", "chat input", f"the roles of the earlier turns of {count} samples' "
                             "chats (few-shot examples, replies): each is written as text before its last user "
                             "message, `User:` and `Assistant:` lines", None)
    return samples


def _split_chat(messages: list[Any], path: Path, where: str) -> tuple[str, str, int]:
    """A chat input's system prompt (its leading system messages), its user message, and 1 when messages between
    them were written into the user message as text (else 0)."""
    for message in messages:
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
            raise ImportInputError(path, where, "a chat input is a list of {role, content} messages")
    if not messages:
        raise ImportInputError(path, where, "an empty chat", "give the messages the model is sent")
    leading = 0
    while leading < len(messages) and _role(messages[leading]) == "system":
        leading += 1
    system = "\n\n".join(m["content"] for m in messages[:leading])
    rest = messages[leading:]
    if not rest or _role(rest[-1]) != "user":  # nothing to answer as a user message: the whole chat as text
        return "", _as_text(messages), 1
    if len(rest) == 1:
        return system, rest[0]["content"], 0
    return system, _as_text(rest), 1


def _role(message: Mapping[str, Any]) -> str:
    """A message's role, a few-shot example's by its name (openai/evals writes them as named system messages)."""
    return str(message.get("name") or message.get("role") or "user")


def _as_text(messages: list[Mapping[str, Any]]) -> str:
    """Messages as text, each on a line after its role, as openai/evals' chat_prompt_to_text_prompt writes them."""
    return "\n".join(_PREFIXES.get(_role(m), _role(m).capitalize() + ": ") + m["content"] for m in messages).lstrip()


def every_row_has(path: Path, rows: list[dict[str, Any]], key: str, why: str) -> None:
    for number, row in enumerate(rows, 1):
        if key not in row:
            raise ImportInputError(path, f"row {number}: {key}", f"missing: {why}", f"give every sample {key!r}")


def producer_template(samples: Samples, key: str, name: str) -> tuple[str, str]:
    """The producer's template file for the input ``key`` (``prompts/NAME.txt``, or a chat template when a sample
    had a system message) and its text."""
    if key not in samples.with_system:
        return f"prompts/{name}.txt", "{inputs." + key + "}"
    return f"prompts/{name}.yaml", template_text([
        {"role": "system", "content": "{inputs." + system_column(key) + "}"},
        {"role": "user", "content": "{inputs." + key + "}"}],
        comment="The sample's chat: its system message the system prompt, its user message the message.")
