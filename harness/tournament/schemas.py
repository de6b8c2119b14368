"""The seed 001 contracts (and seed 002's SafetyGuardOutput) as shipped JSON Schemas: every record the
tournament writes is validated here."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from harness.errors import HarnessError
from harness.jsonschemas import error_line
from harness.fileio import atomic_write_json

SCHEMA_NAMES = (
    "agent_settings", "approach_families", "baseline", "benchmark_result", "cost", "event_log",
    "failure_analysis", "goal_phase", "iteration_history", "iteration_state", "merge_report", "plan",
    "plan_archive", "raw_data", "research_brief", "safety_guard",
)


class RecordInvalid(HarnessError):
    """A record about to be written (or read back) does not match its seed 001 schema."""

    def __init__(self, name: str, where: str, errors: list[str]):
        self.errors = errors
        super().__init__(f"{where}: does not match the {name} schema: {errors[0]}"
                         + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    """Return the shipped schema ``name`` (file ``harness/tournament/schemas/<name>.json``)."""
    text = resources.files("harness.tournament").joinpath("schemas", f"{name}.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _registry() -> Registry:
    resources_ = [(load_schema(n)["$id"], Resource.from_contents(load_schema(n))) for n in SCHEMA_NAMES]
    return Registry().with_resources(resources_)


@lru_cache(maxsize=None)
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(name), registry=_registry(), format_checker=FormatChecker())


def errors_for(name: str, data: Any) -> list[str]:
    """All schema errors of ``data`` against schema ``name``, as ``field.path: message`` lines."""
    return [error_line(err) for err in sorted(_validator(name).iter_errors(data),
                                              key=lambda e: list(map(str, e.absolute_path)))]


def validate(name: str, data: Any, where: str = "record") -> None:
    """Raise :class:`RecordInvalid` unless ``data`` matches schema ``name``."""
    errors = errors_for(name, data)
    if errors:
        raise RecordInvalid(name, where, errors)


def write_record(path: Path, name: str, data: Any) -> None:
    """Validate ``data`` against schema ``name``, then write it atomically to ``path``."""
    validate(name, data, str(path))
    atomic_write_json(path, data)


def default_families() -> dict[str, str]:
    """The seed's approach family taxonomy, tag to description."""
    return {row["tag"]: row["description"] for row in load_schema("approach_families")["default"]}
