"""What a merge will make, checked before the target is touched: the shards read, the same shard given twice set
aside, each item's shard chosen, and the refusals (overlapping shards, two versions of one rubric, shards of
different splits), each one line naming both folders and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.base.errors import ExitCode
from harness.records.merge.read import MergeRefused, ShardRecords, read_shard


@dataclass
class MergePlan:
    target: Path
    root: Path  # what the target's records name paths relative to (the target's parent by default)
    shards: list[ShardRecords]  # distinct shards with records, in the order given
    owner: dict[str, ShardRecords]  # each item's shard (the first that holds it)
    empty: list[Path] = field(default_factory=list)  # folders with no records: shards that drew no item
    repeated: list[Path] = field(default_factory=list)  # folders holding a shard given before (the same records)
    shared: int = 0  # items two shards both hold, with the same records (taken once)

    @property
    def items(self) -> int:
        return len(self.owner)

    @property
    def attempts(self) -> int:
        return sum(len(shard.items[nodeid].attempts) for nodeid, shard in self.owner.items())

    def missing_shards(self) -> list[str]:
        """The shards of the split (from the shards' shard.json) that none of the folders holds."""
        given = {shard.shard for shard in self.shards if shard.shard}
        counts = {int(text.split("/")[1]) for text in given}
        if len(counts) != 1:
            return []
        (count,) = counts
        return [f"{index}/{count}" for index in range(1, count + 1) if f"{index}/{count}" not in given]


def plan_merge(sources: list[Path], target: Path, root: Path | None = None) -> MergePlan:
    """Read the shards and check they can be one cycle; :class:`MergeRefused` (nothing written) when not."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise MergeRefused(f"--into {target} is a file, not a work folder (fix: give a folder; it is made when "
                           "missing)", ExitCode.USAGE_ERROR)
    for source in sources:
        if source.resolve() == target.resolve():
            raise MergeRefused(f"--into {target} is also one of the shards (fix: merge into another folder, such as "
                               "the work folder the next run reads: --into WORK)", ExitCode.USAGE_ERROR)
    plan = MergePlan(target, Path(root) if root is not None else target.resolve().parent, [], {})
    seen: dict[str, ShardRecords] = {}
    for source in sources:
        records = read_shard(Path(source))
        if records is None:
            plan.empty.append(Path(source))
        elif records.fingerprint in seen:
            plan.repeated.append(Path(source))
        else:
            seen[records.fingerprint] = records
            plan.shards.append(records)
    if not plan.shards:
        shown = ", ".join(str(p) for p in sources)
        raise MergeRefused(f"no records to merge in {shown} (fix: give the work folders the shard jobs wrote, with "
                           "their harness.db)", ExitCode.NO_INPUT)
    _check_splits(plan.shards)
    _check_versions(plan.shards)
    for shard in plan.shards:
        for nodeid, item in shard.items.items():
            earlier = plan.owner.get(nodeid)
            if earlier is None:
                plan.owner[nodeid] = shard
            elif earlier.items[nodeid].fingerprint == item.fingerprint:
                plan.shared += 1
            else:
                raise MergeRefused(
                    f"{earlier.label()} and {shard.label()} both hold {nodeid} with different records: the shards "
                    "overlap (fix: give each shard's work folder once, all from one run split with the same "
                    "--harness-shard I/N; a shard job run again replaces its folder)")
    return plan


def _check_splits(shards: list[ShardRecords]) -> None:
    """Shards of different splits (1/3 and 2/4) hold overlapping and missing parts of the suite."""
    first: ShardRecords | None = None
    for shard in shards:
        if not shard.shard:
            continue
        if first is None:
            first = shard
        elif shard.shard.split("/")[1] != first.shard.split("/")[1]:  # type: ignore[union-attr]
            raise MergeRefused(f"{first.source} ran shard {first.shard} and {shard.source} shard {shard.shard}: shards "
                               "of different splits (fix: merge the shards of one run, all with the same "
                               "--harness-shard I/N)")


def _check_versions(shards: list[ShardRecords]) -> None:
    """A merged cycle holds one version of each rubric: two are never mixed silently."""
    versions: dict[str, dict[str, ShardRecords]] = {}
    for shard in shards:
        for item in shard.items.values():
            for attempt in item.attempts:
                version = attempt.run.get("rubric_version")
                if version is None:
                    continue
                found = versions.setdefault(attempt.details["rubric_name"], {})
                found.setdefault(str(version), shard)
    for rubric, found in sorted(versions.items()):
        if len(found) > 1:
            (one, first), (other, second) = sorted(found.items())[:2]
            raise MergeRefused(f"rubric {rubric} is version {one} in {first.label()} and version {other} in "
                               f"{second.label()}: one merged cycle holds one version of each rubric (fix: run every "
                               "shard from the same commit, or merge only the shards that ran one version)")
