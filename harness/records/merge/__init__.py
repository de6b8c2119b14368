"""``harness merge``: the work folders of a suite's shards (``--harness-shard I/N``, one CI job each) made one cycle
of a target work folder, whose records are those one unsharded run would have made.

- ``read``: one shard's newest cycle, read-only, grouped by item, each item's records fingerprinted;
- ``plan``: the checks made before the target is touched (overlap, rubric versions, splits) and each item's shard;
- ``relocate``: the cycle id and the paths into the cycle folder rewritten for the merged cycle;
- ``write``: the staged files and the one transaction that puts them in place, or nothing.

What a merge guarantees is in docs/contracts.md ("Merged shards").
"""

from __future__ import annotations

from pathlib import Path

from harness.records.merge.plan import MergePlan, plan_merge
from harness.records.merge.read import MergeRefused, ShardRecords, read_shard
from harness.records.merge.write import MergeResult, write_merge

__all__ = ["MergePlan", "MergeRefused", "MergeResult", "ShardRecords", "merge_shards", "plan_merge", "read_shard"]


def merge_shards(sources: list[Path], into: Path, *, root: Path | None = None) -> MergeResult:
    """Merge the newest cycle of each shard's work folder in ``sources`` into one cycle of ``into``; paths in the
    merged records are named relative to ``root`` (default: ``into``'s parent, the project root for a ``WORK/`` at
    its top). Merging shards already merged there changes nothing (``MergeResult.already``). A merge that cannot be
    made raises :class:`MergeRefused` and leaves ``into`` as it was."""
    return write_merge(plan_merge([Path(s) for s in sources], Path(into), root))
