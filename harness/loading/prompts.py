"""Prompt files: a title and the six sections of seed 000 section 4, each present and not empty."""

from __future__ import annotations

import re
from pathlib import Path

from harness.base.errors import HarnessConfigError
from harness.base.models import PromptFile
from harness.base.yamlfile import read_text

REQUIRED_PROMPT_SECTIONS = ("Role", "Inputs", "Outputs", "Instructions", "Examples", "Constraints")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def load_prompt(path: Path, *, source: str) -> PromptFile:
    """A prompt file must have a title and the six sections of seed 000 section 4; ``source`` names the
    file and field that point at it, for the error when it cannot be read."""
    if not path.is_file():
        raise HarnessConfigError(source, None, f"prompt file {path} cannot be read",
                                 "fix the path; it is relative to the file that names it")
    text = read_text(path)
    title = ""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading and len(heading[1]) == 1 and not title:
            title = heading[2]
            current = None
        elif heading and len(heading[1]) == 2:
            current = sections.setdefault(heading[2].strip(), [])
        elif current is not None:
            current.append(line)
    missing = [name for name in REQUIRED_PROMPT_SECTIONS if not "\n".join(sections.get(name, [])).strip()]
    if missing:
        word = "section" if len(missing) == 1 else "sections"
        raise HarnessConfigError(path, "## " + missing[0], f"missing or empty {word}: {', '.join(missing)}",
                                 f"add `## {missing[0]}` with its content (required: "
                                 f"{', '.join(REQUIRED_PROMPT_SECTIONS)})")
    return PromptFile(path=path, title=title or path.stem,
                      sections={k: "\n".join(v).strip() for k, v in sections.items()}, text=text)
