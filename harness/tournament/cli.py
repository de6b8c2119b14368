"""``harness improve goals/<slug> --iterations N``: the tournament's subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from harness.errors import ExitCode, HarnessError


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``improve`` to the ``harness`` command's subparsers."""
    parser = subparsers.add_parser(
        "improve", help="run self-improvement tournament iterations for a goal",
        description="Run N iterations of the self-improvement tournament for goals/<slug> on git branches "
                    "against its sealed benchmark. A stopped run resumes where it stopped.")
    parser.add_argument("goal", metavar="GOAL", help="goals/<slug> or goals/<slug>/goal.md")
    parser.add_argument("--iterations", "-n", type=_positive, default=1, metavar="N",
                        help="iterations to run (default: 1)")
    parser.add_argument("--no-plots", dest="plots", action="store_false",
                        help="do not plot trajectories at the end (default: plot when harness.tracking is there)")
    parser.set_defaults(handler=run_improve)


def run_improve(args: argparse.Namespace) -> int:
    from harness.tournament.loop import improve

    summary = improve(args.goal, args.iterations, plots=args.plots, echo=lambda line: print(line, flush=True))
    if summary.iterations:
        print(f"done: {len(summary.iterations)} iteration(s): "
              + ", ".join(f"{i}={s}" for i, s in zip(summary.iterations, summary.statuses)))
    return int(ExitCode.SUCCESS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness")
    register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except HarnessError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("harness: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
