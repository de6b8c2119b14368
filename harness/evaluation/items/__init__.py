"""Kinds of item: the registry (:mod:`~harness.evaluation.items.kinds`), the one codec of an item's result
(:mod:`~harness.evaluation.items.result`) and the built-in kinds, a module each: ``case`` (case files and
datasets, run by the loop engine), ``rubric`` (a rubric file's version and its examples' calibration), ``skill``
(a skill file's cases, run by its template or its handler) and ``construct`` (a construct's phases, in order, with
the handoffs between them), ``pipeline`` (a staged agent's stages, in order, each output typed and checked where
it is handed on) and ``pairwise`` (two outputs of a case compared by a judge shown both, the positions swapped).
Plugins add kinds through the ``pytest_harness_item_kinds`` hook (docs/design.md, "Kinds of item")."""

from __future__ import annotations

from harness.evaluation.items import case, construct, pairwise, pipeline, rubric, skill
from harness.evaluation.items.kinds import (
    ItemContext,
    ItemFailed,
    ItemKind,
    ItemSkipped,
    ItemSpec,
    builtin_kinds,
    entry_point_kinds,
    item_kind,
    with_plugin_kinds,
)
from harness.evaluation.items.result import ItemResult
from harness.evaluation.steps import Attempt, ItemRun, LoopResult

__all__ = ["Attempt", "ItemContext", "ItemFailed", "ItemKind", "ItemResult", "ItemRun", "ItemSkipped", "ItemSpec",
           "LoopResult", "builtin_kinds", "case", "construct", "entry_point_kinds", "item_kind", "pairwise", "pipeline",
           "rubric",
           "skill",
           "with_plugin_kinds"]
