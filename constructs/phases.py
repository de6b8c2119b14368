"""The demo construct's phases: Python functions, offline and deterministic.

Each gets the phase's request (``request["inputs"]``: ``phase``, ``vars``, ``received`` (the text of each file it
receives, by path), ``produces`` and ``workspace``, the item's own folder). What one returns is written to its first
``produces`` path; a phase may also write files of its own in the workspace.
"""

from __future__ import annotations

from pathlib import Path


def _brief(request: dict) -> list[str]:
    text = request["inputs"]["received"]["context/brief.md"]
    return [line[2:].strip() for line in text.splitlines() if line.startswith("- ")]


def discovery(request: dict) -> str:
    """A PRD from the brief, and a research note beside it (an optional artifact of the handoff)."""
    return _prd(request, requirements=True)


def hasty_discovery(request: dict) -> str:
    """The same PRD in a hurry: the Requirements heading is there, with nothing under it."""
    return _prd(request, requirements=False)


def _prd(request: dict, *, requirements: bool) -> str:
    inputs = request["inputs"]
    points = _brief(request)
    project = inputs["vars"]["project"]
    note = Path(inputs["workspace"]) / "grimoires" / project / "research" / "readers.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("# Readers\n\nMost saved articles are never opened again.\n", encoding="utf-8")
    musts = [p.removeprefix("Must: ") for p in points if p.startswith("Must:")]
    lines = [f"# PRD: {project}", "", "## Problem", "", "Saved articles pile up unread.", "",
             "## Users", "", *[p.removeprefix("Users: ") for p in points if p.startswith("Users:")], "",
             "## Goals", "", *[p.removeprefix("Goal: ") for p in points if p.startswith("Goal:")], "",
             "## Requirements", ""]
    if requirements:
        lines += [f"{number}. {must}" for number, must in enumerate(musts, 1)]
    return "\n".join(lines) + "\n"


def design(request: dict) -> str:
    """An SDD that answers each requirement of the PRD it received."""
    inputs = request["inputs"]
    project = inputs["vars"]["project"]
    prd = inputs["received"][f"grimoires/{project}/prd.md"]
    requirements = prd.split("## Requirements", 1)[1].strip().splitlines()
    return "\n".join([
        f"# SDD: {project}", "",
        "## Overview", "", f"A small web service that meets {len(requirements)} requirements.", "",
        "## Architecture", "", "A browser extension posts links to an HTTP API; a weekly job sends the digest.", "",
        "## Data model", "", "Link(id, url, tags, saved_at, read_at); Reader(id, email).", "",
        "## API contracts", "", *[f"- {line.split('. ', 1)[-1].rstrip('.')}: one endpoint" for line in requirements],
        "",
    ]) + "\n"
