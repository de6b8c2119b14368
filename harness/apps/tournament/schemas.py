"""Every record the tournament writes is validated against its shipped contract (harness/base/contracts/: the
records of the tournament and the SafetyGuard output) before it is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.base.errors import HarnessError
from harness.base.fileio import atomic_write_json
from harness.base.jsonschemas import contract_errors


class RecordInvalid(HarnessError):
    """A record about to be written (or read back) does not match its contract."""

    def __init__(self, name: str, where: str, errors: list[str]):
        self.errors = errors
        super().__init__(f"{where}: does not match the {name} schema: {errors[0]}"
                         + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))


def validate(name: str, data: Any, where: str = "record") -> None:
    """Raise :class:`RecordInvalid` unless ``data`` matches schema ``name``."""
    errors = contract_errors(name, data)
    if errors:
        raise RecordInvalid(name, where, errors)


def write_record(path: Path, name: str, data: Any) -> None:
    """Validate ``data`` against schema ``name``, then write it atomically to ``path``."""
    validate(name, data, str(path))
    atomic_write_json(path, data)
