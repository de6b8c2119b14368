"""What a run keeps of an execution's inputs and outputs (the assessment's ``capture`` settings).

One :class:`Capture` decides for both the execution result written under WORK and the trace: inputs are hashed
by default (``include_inputs: none|hashed|full``), outputs summarised (``include_outputs: none|summary|full``),
and whatever is kept passes through the one redaction filter. ``retention_days`` is how long traces are kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from harness.base.redaction import redact_json

InputCapture = Literal["none", "hashed", "full"]
OutputCapture = Literal["none", "summary", "full"]
INPUT_CAPTURES: tuple[str, ...] = ("none", "hashed", "full")
OUTPUT_CAPTURES: tuple[str, ...] = ("none", "summary", "full")


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def digest(value: Any) -> str:
    """``sha256:<hex>`` of a value (text as it is, anything else as canonical JSON): equal inputs hash alike."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return "sha256:" + sha256_hex(text)


@dataclass(frozen=True)
class Capture:
    enabled: bool = True
    retention_days: int | None = 30  # None: traces are kept until deleted by hand
    include_inputs: InputCapture = "hashed"
    include_outputs: OutputCapture = "summary"

    def inputs(self, provided: Mapping[str, Any]) -> dict[str, Any]:
        """``provided`` as kept: each value's digest (hashed), the values redacted (full), or nothing (none)."""
        if self.include_inputs == "none":
            return {}
        if self.include_inputs == "hashed":
            return {name: digest(value) for name, value in provided.items()}
        return redact_json(dict(provided))

    def output(self, output: Any) -> Any:
        """An output as kept: redacted in full, a summary (size, digest, the start of its text), or None."""
        if self.include_outputs == "none" or output is None:
            return None
        if self.include_outputs == "full":
            return redact_json(output)
        return summary(output)


def summary(output: Any) -> dict[str, Any]:
    """What an output is without its content: its type, size and digest (and a JSON object's keys). No text of
    it: an agent that repeats its input would otherwise put the input in the trace."""
    if isinstance(output, str):
        return {"type": "text", "chars": len(output), "sha256": sha256_hex(output)}
    text = json.dumps(output, sort_keys=True, default=str)
    shape: dict[str, Any] = {"type": type(output).__name__, "chars": len(text), "sha256": sha256_hex(text)}
    if isinstance(output, Mapping):
        shape["keys"] = sorted(map(str, output))[:50]
    elif isinstance(output, list):
        shape["items"] = len(output)
    return shape

