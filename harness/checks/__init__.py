"""Deterministic rubric checks: a dimension scored by code instead of the LLM judge.

A rubric dimension may declare ``check:`` with exactly one kind::

    dimensions:
      trigger_recency:
        weight: 0.20
        check:
          date_age: {windows: {14: 1.0, 30: 0.8, 60: 0.5}}

The loader calls :func:`parse_check` once with the raw YAML value; every mistake is a
:class:`~harness.base.errors.HarnessConfigError` naming the file, the field and the fix. At evaluation time
the judge calls ``check.run(artifact, context)``, which returns a :class:`CheckResult`. Checks are
frozen and hold no state between runs, so one check may run on many threads at once.

Built-in kinds, a module per family: ``regex``, ``contains``, ``length``, ``banned_phrases`` (text),
``json_schema`` (json_schema), ``date_age`` (dates), ``python`` (python), ``equals``, ``similar``,
``json_path`` (compare), ``f1``, ``match``, ``choice`` (scorers). Each registers its parser with ``@check_kind`` (registry); plugins add kinds with
the ``pytest_harness_check_kinds`` hook.

Any kind's options may hold case slots (``equals: "{expected}"``, ``regex: {pattern: "{inputs.p}"}``):
:func:`parse_check` then returns a check that fills them from each case when it runs (templated), and
:func:`check_slots` names the slots a case must fill.
"""

from __future__ import annotations

from harness.base.fields import Fields  # plugins' parsers are documented to receive harness.checks.Fields
from harness.checks.base import Check, CheckContext, CheckResult, check_slots
from harness.checks.registry import CheckParser, builtin_kinds, check_kind, parse_check, with_plugin_kinds

# The families register their kinds on import, in this order (the order error messages list them in).
from harness.checks.text import BannedPhrasesCheck, ContainsCheck, LengthCheck, RegexCheck  # isort: skip
from harness.checks.json_schema import JsonSchemaCheck  # isort: skip
from harness.checks.dates import DateAgeCheck  # isort: skip
from harness.checks.python import PythonCheck, import_callable  # isort: skip
from harness.checks.compare import EqualsCheck, JsonPathCheck, SimilarCheck  # isort: skip
from harness.checks.scorers import ChoiceCheck, F1Check, MatchCheck  # isort: skip
from harness.checks.paths import MISSING, parse_path, value_at  # isort: skip
from harness.checks.templated import TemplatedCheck  # isort: skip

KNOWN_KINDS: tuple[str, ...] = tuple(builtin_kinds())
"""The built-in kinds (plugins may add more per session)."""

__all__ = [
    "KNOWN_KINDS",
    "MISSING",
    "BannedPhrasesCheck",
    "Check",
    "CheckContext",
    "CheckParser",
    "CheckResult",
    "ChoiceCheck",
    "ContainsCheck",
    "DateAgeCheck",
    "EqualsCheck",
    "F1Check",
    "Fields",
    "JsonPathCheck",
    "JsonSchemaCheck",
    "LengthCheck",
    "MatchCheck",
    "PythonCheck",
    "RegexCheck",
    "SimilarCheck",
    "TemplatedCheck",
    "builtin_kinds",
    "check_kind",
    "check_slots",
    "import_callable",
    "parse_check",
    "parse_path",
    "value_at",
    "with_plugin_kinds",
]
