"""``harness merge WORK_1 ... WORK_N --into WORK``: the work folders of a suite's shards made one cycle of WORK,
then, with ``--compare``, that cycle checked against a baseline cycle of WORK as the ``--harness-compare`` gate
checks an unsharded run.

The main ``harness`` command calls :func:`register` with its subparsers; each handler returns the exit code.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from harness.apps.tracking.compare import DEFAULT_MARGINS, parse_baseline, parse_margins
from harness.base.errors import ExitCode
from harness.records.merge import MergeResult, merge_shards


def _margins(text: str) -> str:
    parse_margins(text)
    return text.strip()


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``merge`` to the ``harness`` command."""
    merge = subparsers.add_parser(
        "merge", help="merge the work folders of a suite's shards (--harness-shard I/N) into one cycle",
        description="Merge the newest cycle of each shard's work folder (the WORK/ each CI job of a suite run with "
                    "--harness-shard I/N wrote) into one cycle of the target work folder: rows, attempts' files, "
                    "run-log.json, execution results and traces, as one unsharded run would have made them. The "
                    "cycle keeps the shards' id when they share one the target does not hold, else takes the next "
                    "free id of their day. Merging the same shards again changes nothing. Overlapping shards, two "
                    "versions of one rubric and shards of different splits are refused, and a refused or failed "
                    "merge leaves the target as it was. docs/ci.md")
    merge.add_argument("shards", metavar="WORK_I", nargs="+", type=Path,
                       help="a shard's work folder (each as its job wrote it; a folder with no records, a shard that "
                            "drew no item, is passed over)")
    merge.add_argument("--into", dest="into", metavar="WORK", type=Path, required=True,
                       help="the work folder to merge into: made when missing; it may hold earlier cycles (the "
                            "previous run's harness.db, restored), which --compare compares with")
    merge.add_argument("--root", dest="root", metavar="DIR", type=Path, default=None,
                       help="the project root the merged records name their files from (default: the folder that "
                            "holds WORK)")
    merge.add_argument("--compare", dest="compare", metavar="CYCLE|latest", type=parse_baseline, default=None,
                       help="then compare the merged cycle with CYCLE, or the newest cycle before it, as "
                            "--harness-compare does; items that dropped beyond --compare-fail fail (exit status 1)")
    merge.add_argument("--compare-fail", dest="compare_fail", metavar="overall:M,dimension:M", type=_margins,
                       default=None, help=f"the largest allowed drops; implies --compare latest (default: "
                                          f"{DEFAULT_MARGINS})")
    merge.add_argument("--compare-required", dest="compare_required", action="store_true",
                       help="with no cycle to compare with, fail (exit status 66) instead of saying nothing was "
                            "compared; implies --compare latest")
    merge.set_defaults(handler=merge_command)


def merge_command(args: argparse.Namespace) -> int:
    try:
        result = merge_shards(args.shards, args.into, root=args.root)  # MergeRefused: one line, the target as it was
    except (OSError, sqlite3.Error) as exc:  # a full disk, a folder it may not write: one line, never a traceback
        print(f"harness merge: {exc}; nothing was merged and {args.into} was left as it was", file=sys.stderr)
        return ExitCode.IO_ERROR
    for line in describe(result):
        print(line)
    which = args.compare or ("latest" if args.compare_fail or args.compare_required else None)
    if which is None:
        return ExitCode.SUCCESS
    from harness.apps.shards.gate import compare_merged  # pandas: only when comparing

    margins = parse_margins(args.compare_fail or DEFAULT_MARGINS)
    outcome = compare_merged(args.into, result.cycle_id, which, margins)
    if outcome.baseline is None:
        if args.compare_required:
            print(f"harness merge: --compare {which}: no earlier cycle in {args.into} to compare cycle "
                  f"{result.cycle_id} with, and the comparison is required (fix: restore the previous run's "
                  f"harness.db into {args.into} before merging, docs/ci.md; or leave out --compare-required for the "
                  "first run)", file=sys.stderr)
            return ExitCode.NO_INPUT
        print(f"harness compare: no earlier cycle in {args.into} to compare with; nothing was compared")
        return ExitCode.SUCCESS
    for line in outcome.lines(result.cycle_id, margins):
        print(line)
    return ExitCode.GENERAL_FAILURE if outcome.dropped else ExitCode.SUCCESS


def describe(result: MergeResult) -> list[str]:
    """What the merge did, a line each: the cycle, then each shard, then what was passed over."""
    plan = result.plan
    count = len(plan.shards)
    if result.already:
        return [f"harness merge: nothing to do: {'these' if count > 1 else 'this'} {count} shard"
                f"{'s' * (count != 1)} {'are' if count > 1 else 'is'} already merged into cycle {result.cycle_id} of "
                f"{plan.target}; it was left as it was"]
    how = ("the shards' own id" if result.kept_id else
           f"a new id: the shards' {', '.join(sorted({s.cycle_id for s in plan.shards}))} "
           + ("is taken there" if len({s.cycle_id for s in plan.shards}) == 1 else "differ"))
    lines = [f"harness merge: cycle {result.cycle_id} of {plan.target} ({how}): {plan.items} item"
             f"{'s' * (plan.items != 1)}, {plan.attempts} attempt{'s' * (plan.attempts != 1)} from {count} shard"
             f"{'s' * (count != 1)}"]
    for shard in plan.shards:
        items = sum(owner is shard for owner in plan.owner.values())
        older = f"; its {shard.cycles - 1} older cycle{'s' * (shard.cycles != 2)} left out" if shard.cycles > 1 else ""
        lines.append(f"  {shard.label()}: {items} item{'s' * (items != 1)}{older}")
    lines += [f"  {folder}: no records (a shard that drew no item?), passed over" for folder in plan.empty]
    lines += [f"  {folder}: the same records as a shard given before, taken once" for folder in plan.repeated]
    if plan.shared:
        lines.append(f"  {plan.shared} item{'s' * (plan.shared != 1)} held by two shards with the same records, "
                     "taken once")
    missing = plan.missing_shards()
    if missing:
        lines.append(f"  not among them: shard{'s' * (len(missing) != 1)} {', '.join(missing)} (their items are not "
                     "in this cycle; a shard that drew no item writes no records)")
    return lines
