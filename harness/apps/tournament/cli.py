"""``harness improve goals/<slug> --iterations N``: the tournament's subcommand."""

from __future__ import annotations

import argparse

from harness.base.argtypes import whole_number
from harness.base.errors import ExitCode
from harness.base.redaction import redact


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``improve`` to the ``harness`` command's subparsers."""
    parser = subparsers.add_parser(
        "improve", help="run self-improvement tournament iterations for a goal",
        description="Run N iterations of the self-improvement tournament for goals/<slug> on git branches "
                    "against its sealed benchmark. A stopped run resumes where it stopped.")
    parser.add_argument("goal", metavar="GOAL", help="goals/<slug> or goals/<slug>/goal.md")
    parser.add_argument("--iterations", "-n", type=whole_number(1), default=1, metavar="N",
                        help="iterations to run (default: 1)")
    parser.add_argument("--no-plots", dest="plots", action="store_false",
                        help="do not plot trajectories at the end (default: plot when harness.apps.tracking is there)")
    parser.add_argument("--approve", dest="approve", action="append", default=[], metavar="PLAN",
                        help="let this plan (its plan id, or the idea file it comes from) be merged although its "
                             "change reaches into the measurement or its score is outside what the goal declares "
                             "plausible, and run it although SafetyGuard warned; 'baseline' accepts an implausible "
                             "score of the baseline commit; repeatable (default: none)")
    parser.add_argument("--allow-unconfined", dest="allow_unconfined", action="store_true",
                        help="where no sandbox can be made, run commands from models and ideas anyway, unconfined "
                             "(default: refuse them)")
    parser.add_argument("--work-dir", dest="work_dir", metavar="DIR", default=None,
                        help="the work folder: the records go to DIR/improve/<slug>/ (default: WORK in the "
                             "repository root)")
    parser.set_defaults(handler=run_improve)


def run_improve(args: argparse.Namespace) -> int:
    from harness.apps.tournament.loop import improve

    summary = improve(args.goal, args.iterations, plots=args.plots, echo=lambda line: print(redact(line), flush=True),
                      approve=tuple(args.approve), allow_unconfined=args.allow_unconfined, work_dir=args.work_dir)
    if summary.iterations:
        print(f"done: {len(summary.iterations)} iteration(s): "
              + ", ".join(f"{i}={s}" for i, s in zip(summary.iterations, summary.statuses)))
    return int(ExitCode.SUCCESS)
