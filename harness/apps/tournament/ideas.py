"""User ideas: ``goals/<slug>/ideas/*.md``, each a plan with a unified diff, consumed once.

    # Count primes with a sieve            (title)
    - approach_family: optimization       (required)
    - hypothesis: Doing X should improve Y because Z.   (required)
    - estimated_impact: runtime_ms -90%   (optional; also rationale, builds_on, avoids, target_files)
    ## Steps                              (optional: "1. path: change"; derived from the diff if absent)
    ## Diff
    ```diff
    --- a/path
    +++ b/path
    ...
    ```
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.errors import HarnessConfigError, did_you_mean
from harness.base.yamlfile import read_text

_FIELDS = {"approach_family", "hypothesis", "estimated_impact", "rationale", "builds_on", "avoids", "target_files"}
_BULLET = re.compile(r"^\s*[-*]\s+(?P<key>[A-Za-z_]+)\s*:\s*(?P<value>.*?)\s*$")
_STEP = re.compile(r"^\s*(?P<n>[0-9]+)[.)]\s+(?P<file>[^:]+?)\s*:\s*(?P<change>.+?)\s*$")
_DIFF_FILE = re.compile(r"^\+\+\+ (?:b/)?(?P<path>\S+)")
_DIFF_OLD = re.compile(r"^--- (?:a/)?(?P<path>\S+)")


@dataclass(frozen=True)
class Idea:
    """One parsed idea file."""

    path: Path
    name: str                 # file stem, e.g. 01_sieve
    title: str
    fields: dict[str, str] = field(default_factory=dict)
    steps: tuple[tuple[str, str], ...] = ()
    diff: str | None = None

    @property
    def planner_id(self) -> str:
        return "user_" + re.sub(r"[^a-z0-9]+", "_", self.name.lower()).strip("_")

    def diff_files(self) -> list[str]:
        return diff_files(self.diff or "")

    def to_plan(self, round_: int, metric: str) -> dict[str, Any]:
        """The seed 001 plan document for this idea in round ``round_`` (critic fields not yet set)."""
        targets = [t.strip() for t in self.fields.get("target_files", "").split(",") if t.strip()]
        targets = targets or self.diff_files() or [s[0] for s in self.steps]
        steps = [{"step": i, "file": f, "change": c} for i, (f, c) in enumerate(self.steps, 1)]
        if not steps:
            steps = [{"step": i, "file": f, "change": "apply the idea's diff"} for i, f in enumerate(targets, 1)]
        return {
            "plan_id": f"round_{round_}_{self.planner_id}",
            "planner_id": self.planner_id,
            "round": round_,
            "title": self.title,
            "hypothesis": self.fields.get("hypothesis", ""),
            "approach_family": self.fields.get("approach_family", ""),
            "critic_approved": False,
            "target_files": targets,
            "steps": steps,
            "expected_outcome": {
                "metric": metric,
                "estimated_impact": self.fields.get("estimated_impact", "unknown"),
                "rationale": self.fields.get("rationale", self.fields.get("hypothesis", "")),
                "sub_score_expectations": {},
            },
            "history_reference": {
                "builds_on": self.fields.get("builds_on", "none"),
                "avoids": self.fields.get("avoids", "none"),
            },
            "diff": self.diff,
            "source": f"ideas/{self.path.name}",
        }


def diff_files(diff: str) -> list[str]:
    """Paths a unified diff touches (new side; the old side for deletions), in order."""
    out: list[str] = []
    old = None
    for line in diff.splitlines():
        m_old = _DIFF_OLD.match(line)
        if m_old:
            old = m_old["path"]
            continue
        m_new = _DIFF_FILE.match(line)
        if m_new:
            path = m_new["path"] if m_new["path"] != "/dev/null" else old
            if path and path != "/dev/null" and path not in out:
                out.append(path)
    return out


def parse_idea(path: Path) -> Idea:
    """Parse one idea file; a mistake is a :class:`HarnessConfigError` naming file, line and field."""
    text = read_text(path)
    title = ""
    fields: dict[str, str] = {}
    steps: list[tuple[str, str]] = []
    diff_lines: list[str] | None = None
    fence: str | None = None
    section = ""
    diff_done = False
    for number, line in enumerate(text.splitlines(), 1):
        if fence is not None:
            if line.strip() == fence:
                fence = None
                diff_done = True
                continue
            assert diff_lines is not None
            diff_lines.append(line)
            continue
        stripped = line.strip()
        if stripped.startswith("```"):
            if section != "diff" or diff_done:
                raise HarnessConfigError(f"{path}:{number}", "diff",
                                         "a code block outside '## Diff' (or a second one)",
                                         "put one ```diff block under '## Diff'")
            fence = stripped[:3]
            diff_lines = []
            continue
        if line.startswith("# ") and not title:
            title = line[2:].strip()
            continue
        if line.startswith("## "):
            section = line[3:].strip().lower()
            if section not in ("steps", "diff", "notes"):
                raise HarnessConfigError(f"{path}:{number}", section,
                                         f"unknown section{did_you_mean(section, ('steps', 'diff', 'notes'))}",
                                         "use '## Steps', '## Diff' or '## Notes'")
            continue
        if section == "steps" and stripped:
            match = _STEP.match(line)
            if not match:
                raise HarnessConfigError(f"{path}:{number}", "steps", f"cannot read {stripped!r}",
                                         "write '1. path/to/file: what changes'")
            steps.append((match["file"].strip("`"), match["change"]))
            continue
        if section == "" and stripped:
            match = _BULLET.match(line)
            if match:
                key = match["key"].lower()
                if key not in _FIELDS:
                    raise HarnessConfigError(f"{path}:{number}", key,
                                             f"unknown field{did_you_mean(key, sorted(_FIELDS))}",
                                             f"known fields: {', '.join(sorted(_FIELDS))}")
                fields[key] = match["value"]
    if fence is not None:
        raise HarnessConfigError(path, "diff", "the ```diff block is not closed", "end the diff with a ``` line")
    for required in ("approach_family", "hypothesis"):
        if not fields.get(required):
            raise HarnessConfigError(path, required, "missing", f"add '- {required}: ...' under the title")
    if diff_lines is None and not steps:
        raise HarnessConfigError(path, "steps", "an idea without a diff needs steps",
                                 "add '## Steps' with '1. path/to/file: what changes', or a '## Diff'")
    diff = None
    if diff_lines is not None:
        diff = "\n".join(diff_lines).strip("\n") + "\n"
        if not diff_files(diff):
            raise HarnessConfigError(path, "diff", "not a unified diff (no '+++ b/path' line)",
                                     "paste the output of `git diff` (with its --- a/path and +++ b/path lines)")
    return Idea(path=path, name=path.stem, title=title or path.stem, fields=fields, steps=tuple(steps), diff=diff)


def list_ideas(goal_dir: Path) -> list[Idea]:
    """Every idea under ``goal_dir/ideas/`` in file-name order (README.md is skipped)."""
    folder = goal_dir / "ideas"
    if not folder.is_dir():
        return []
    return [parse_idea(p) for p in sorted(folder.glob("*.md")) if p.name.lower() != "readme.md"]
