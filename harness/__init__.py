"""pytest-rubric: evaluate LLM agents the way pytest tests code.

The package is layered, one folder a layer, imports going one way (docs/design.md): ``base/`` (models,
requests, events, errors, leaf helpers), the services (``llm/``, ``checks/``, ``records/``, ``loading/``,
``sandbox/``), ``evaluation/`` (runners, judging, the loop), ``face/`` (the pytest plugin) and ``apps/``
(the ``harness`` command, tracking, tournaments, importers); ``testing/`` holds test doubles for users' tests.

Modules that lived at the top before the layers keep their old import paths (``harness.events``,
``harness.models``, ``harness.requests``, ``harness.fields``, ``harness.runners``, ``harness.tracking``, ...):
each old name is the same module object as the new one, so a plugin written against either works.

PYTEST_DONT_REWRITE: the package is a plugin, not test code; its asserts need no rewriting.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

__version__ = "0.1.0"

# Old import path -> where the module lives now. A name below an old package (harness.tracking.plots) moves
# with it.
MOVED = {
    **{f"harness.{name}": f"harness.base.{name}" for name in (
        "models", "requests", "events", "errors", "usage", "clock", "semver", "slots", "jsonschemas", "redaction",
        "fileio", "appendlog", "yamlfile", "fields", "safe_regex", "argtypes")},
    "harness.transforms": "harness.checks.transforms",
    "harness.engine": "harness.evaluation.engine",
    "harness.items": "harness.evaluation.artifact_items",
    "harness.runners": "harness.evaluation.runners",
    **{f"harness.{name}": f"harness.face.{name}" for name in (
        "plugin", "nodes", "options", "hookspecs", "session", "scheduler", "report_text", "activation")},
    "harness.cli": "harness.apps.cli",
    "harness.tracking": "harness.apps.tracking",
    "harness.tournament": "harness.apps.tournament",
    "harness.importers": "harness.apps.importers",
}


def _moved_to(name: str) -> str | None:
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old name as the module at its new place: one module object under both names."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith("harness.") or _moved_to(name) is None:
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = _moved_to(spec.name)
        assert new is not None
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was imported under its new name."""

    def get_code(self, name: str) -> object:
        """``python -m harness.cli`` runs the module at its new place."""
        new = _moved_to(name)
        spec = importlib.util.find_spec(new) if new else None
        return spec.loader.get_code(new) if spec is not None and spec.loader is not None else None  # type: ignore[attr-defined]

    def is_package(self, name: str) -> bool:
        new = _moved_to(name)
        spec = importlib.util.find_spec(new) if new else None
        return bool(spec is not None and spec.submodule_search_locations is not None)


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
