"""Files to models. Every mistake is one ``HarnessConfigError`` naming the file, the field and the fix, worded
by the one validation vocabulary (``harness.base.fields``).

A module per kind of file: ``rubrics`` (rubric files, and finding one by name or id and version), ``suites``
(agents.yaml and thresholds.yaml), ``cases`` (case files), ``inputs`` (input values and the files they name),
``prompts`` (prompt files).
"""

from __future__ import annotations

from harness.base.errors import did_you_mean
from harness.loading.cases import load_cases
from harness.loading.inputs import load_inputs
from harness.loading.prompts import REQUIRED_PROMPT_SECTIONS, load_prompt
from harness.loading.rubrics import (
                                     RUBRIC_SUFFIXES,
                                     WEIGHT_TOLERANCE,
                                     find_rubric,
                                     load_rubric,
                                     load_rubric_text,
                                     rubric_files,
                                     rubric_identity,
)
from harness.loading.suites import BUILTIN_RUNNER_KINDS, THRESHOLDS_FILE, load_suite

__all__ = [
    "BUILTIN_RUNNER_KINDS",
    "REQUIRED_PROMPT_SECTIONS",
    "RUBRIC_SUFFIXES",
    "THRESHOLDS_FILE",
    "WEIGHT_TOLERANCE",
    "did_you_mean",  # harness.apps.tournament imports it from here; its home is harness.base.errors
    "find_rubric",
    "load_cases",
    "load_inputs",
    "load_prompt",
    "load_rubric",
    "load_rubric_text",
    "load_suite",
    "rubric_files",
    "rubric_identity",
]
