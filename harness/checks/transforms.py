"""Transforms: the artifact rewritten before the checks and the judge see it.

A rubric (or one dimension) may declare::

    transform: mymodule:extract_answer     # called with the artifact's text; a non-text result is written as JSON
    transform: {json_path: answer.text}    # the artifact's JSON (or its ```json block), the value there as text

:func:`parse_transform` reads the option once, when the rubric loads (an import that fails, a function that
cannot take one argument, a malformed path: a HarnessConfigError naming the file and field). A transform that
data writes (on a check a case or a dataset row adds) may name a function only from the modules of ini
harness_data_modules.
:meth:`Transform.apply` rewrites one artifact; when it cannot (the function raised, the artifact holds no
JSON, nothing is at the path) it raises :class:`TransformError`, one line naming the file, the field and what
went wrong. A transform is frozen and may run on many threads at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.errors import ExitCode, HarnessConfigError
from harness.base.fields import Fields, one_line
from harness.base.slots import as_text
from harness.checks import MISSING, value_at
from harness.checks.json_schema import NotJson, artifact_json
from harness.checks.paths import dotted, path_option
from harness.checks.python import call_problem, callable_at

EXAMPLE = "transform: mymodule:extract_answer or transform: {json_path: answer.text}"


class TransformError(HarnessConfigError):
    """A transform could not rewrite an artifact: ``file: field: problem (fix: ...)``, on one line.

    The exit code is DATA_ERROR when the artifact does not fit the transform (no JSON, nothing at the
    path) and GENERAL_FAILURE when the user's function failed (it raised, or returned nothing)."""

    def __init__(self, path: Path | str, field: str | None, problem: str, fix: str | None = None,
                 exit_code: ExitCode = ExitCode.DATA_ERROR):
        super().__init__(path, field, problem, fix)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Transform:
    """A parsed ``transform:``; :meth:`apply` turns an artifact into the text the checks and judge see."""

    spec: str
    """As a reason shows it: ``mymodule:extract_answer`` or ``json_path answer.text``."""
    place: Fields = field(compare=False, repr=False)
    """The file and field of the ``transform:`` option."""
    function: Callable[[str], Any] | None = field(default=None, compare=False, repr=False)
    path: tuple[str, ...] | None = None
    """The JSON path's parts, for a ``json_path`` transform."""

    def apply(self, artifact: str) -> str:
        """The transformed artifact; a :class:`TransformError` when this artifact cannot be transformed."""
        if self.function is not None:
            return self._call(artifact)
        assert self.path is not None
        where = self.place.where("json_path")
        shown_path = dotted(self.path)
        try:
            document = artifact_json(artifact)
        except NotJson as exc:
            raise TransformError(self.place.path, where, f"cannot read {shown_path}: the {exc.problem}",
                                 "make the producer answer JSON (or a ```json block), or drop the transform") from None
        value = value_at(document, self.path)
        if value is MISSING:
            keys = f" (its keys: {one_line(', '.join(map(str, document)), 80)})" if isinstance(document, Mapping) \
                else f" (it is a {type(document).__name__})"
            raise TransformError(self.place.path, where, f"the artifact's JSON has no value at {shown_path}{keys}",
                                 f"make the producer answer JSON with {shown_path}, or fix the path")
        return value if isinstance(value, str) else as_text(value)

    def _call(self, artifact: str) -> str:
        assert self.function is not None
        try:
            value = self.function(artifact)
        except Exception as exc:
            raise TransformError(self.place.path, self.place.field or None,
                                 f"{self.spec} raised {type(exc).__name__}: {one_line(str(exc), 200)}",
                                 "fix the function, or make it return the artifact unchanged when it cannot "
                                 "transform it", ExitCode.GENERAL_FAILURE) from None
        if isinstance(value, str):
            return value
        if value is None:
            raise TransformError(self.place.path, self.place.field or None, f"{self.spec} returned None",
                                 "return the transformed artifact (text, or data to write as JSON)",
                                 ExitCode.GENERAL_FAILURE)
        try:
            return as_text(value)
        except (ValueError, TypeError, RecursionError) as exc:
            raise TransformError(self.place.path, self.place.field or None,
                                 f"{self.spec} returned a {type(value).__name__} that cannot be written as JSON: "
                                 f"{one_line(str(exc), 100)}", "return text, or plain data (dicts, lists, numbers)",
                                 ExitCode.GENERAL_FAILURE) from None


def parse_transform(raw: Any, fields: Fields) -> Transform:
    """The ``transform:`` option at ``fields`` (its file and field): ``module:function`` or
    ``{json_path: PATH}``. Raises HarnessConfigError for every mistake."""
    if isinstance(raw, str):
        function = callable_at(raw, fields, what="transform")  # in data, only from ini harness_data_modules
        problem = call_problem(function, "artifact")
        if problem:
            raise fields.error(None, f"{raw} cannot be called with the artifact alone: {problem}",
                               "make it take one argument, the artifact's text")
        return Transform(raw, fields, function=function)
    opts = fields.mapping(raw, allowed=("json_path",), example=EXAMPLE, required_any=("json_path",))
    parts = path_option(opts["json_path"], fields, "json_path")
    return Transform(f"json_path {dotted(parts)}", fields, path=parts)
