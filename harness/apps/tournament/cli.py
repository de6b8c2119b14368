"""``harness improve goals/<slug> --iterations N``: the tournament's subcommand."""

from __future__ import annotations

import argparse
import re

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
    parser.add_argument("--scheduler", dest="scheduler", metavar="ADDRESS", default=None, type=scheduler_address,
                        help="run the candidates and their benchmarks on Dask workers, one benchmark at a time each: "
                             "tcp://HOST:PORT of a running scheduler (workers started with --resources benchmark=1), "
                             "or local:N for N worker processes on this machine; needs pip install "
                             "'pytest-rubric[distributed]' (default: threads of this process)")
    parser.set_defaults(handler=run_improve)


def scheduler_address(text: str) -> str:
    """``--scheduler``: ``local:N`` (N worker processes here, N >= 1) or a Dask scheduler's ``tcp://HOST:PORT``
    (or ``tls://``)."""
    text = text.strip()
    if text.startswith("local:"):
        count = text.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(f"{text!r}: local:N needs a whole number of workers of at least 1 "
                                             "(fix: give local:2 for two worker processes on this machine)")
        return f"local:{int(count)}"
    found = re.fullmatch(r"(?:tcp|tls)://(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})", text)
    if found is None or not 0 < int(found.group(1)) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a Dask scheduler (fix: give tcp://HOST:PORT of a running "
                                         "scheduler, or local:N for N worker processes on this machine)")
    return text


def run_improve(args: argparse.Namespace) -> int:
    from harness.apps.tournament.loop import improve

    summary = improve(args.goal, args.iterations, plots=args.plots, echo=lambda line: print(redact(line), flush=True),
                      approve=tuple(args.approve), allow_unconfined=args.allow_unconfined, work_dir=args.work_dir,
                      scheduler=args.scheduler)
    if summary.iterations:
        print(f"done: {len(summary.iterations)} iteration(s): "
              + ", ".join(f"{i}={s}" for i, s in zip(summary.iterations, summary.statuses)))
    return int(ExitCode.SUCCESS)
