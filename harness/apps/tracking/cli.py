"""``harness history``, ``harness plot``, ``harness report``, ``harness diff`` and ``harness rubric diff``.

The main ``harness`` command calls :func:`register` with its subparsers; ``python -m harness.apps.tracking.cli``
runs these subcommands alone. Each handler returns the exit code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.apps.tracking.diff import diff_cycles, render_html, render_json, render_text
from harness.base.argtypes import choice
from harness.base.errors import ExitCode
from harness.base.fileio import atomic_write_text
from harness.base.redaction import redact


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work-dir", dest="work_dir", metavar="DIR", type=Path, default=None,
                        help="the harness work folder holding harness.db (default: the nearest WORK/ with a "
                             "harness.db in this folder or above, as git finds .git)")


def find_work_dir(start: Path | None = None) -> tuple[Path, list[Path]]:
    """The nearest ``WORK/`` holding a ``harness.db``, from ``start`` up; else ``start/WORK``. Also the
    folders looked in, for a message that says where nothing was found."""
    from harness.records import RecordReader

    start = (start or Path.cwd()).resolve()
    looked = []
    for folder in (start, *start.parents):
        candidate = folder / "WORK"
        looked.append(candidate)
        if RecordReader(candidate).exists():
            return candidate, looked
    return start / "WORK", looked


def _work_dir(args: argparse.Namespace, command: str) -> tuple[Path, str]:
    """The work folder to read, and what to say when it holds no records."""
    if args.work_dir is not None:
        return args.work_dir, f"{command}: no records in {args.work_dir.resolve()}"
    found, looked = find_work_dir()
    where = ", ".join(str(p) for p in looked[:3]) + (f" and {len(looked) - 3} more folders up" if len(looked) > 3
                                                     else "")
    return found, (f"{command}: no records: no WORK/harness.db in this folder or above (looked in {where}); "
                   "run pytest in the project first, or give --work-dir")


def _tracking(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tracking-dir", dest="tracking_dir", metavar="DIR", type=Path, default=Path("tracking"),
                        help="folder with raw_data.json; plots go to its plots/ (default: tracking)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``history``, ``plot``, ``report``, ``diff`` and ``rubric diff`` to the ``harness`` command."""
    from harness.apps.tracking.compare import parse_cycle

    history = subparsers.add_parser("history", help="score, pass rate, attempts, tokens and cost over cycles",
                                    description="Per agent and rubric: score, pass rate, attempts, tokens and cost "
                                                "of each cycle, from the SQLite records.")
    _common(history)
    history.add_argument("--agent", metavar="NAME", help="only this agent (default: all)")
    history.add_argument("--rubric", metavar="NAME", help="only this rubric (default: all)")
    history.add_argument("--since", metavar="DATE|CYCLE", help="only cycles from this date or cycle id on")
    history.add_argument("--format", dest="fmt", type=choice("table", "csv", "json"), default="table",
                         help="table (default), csv or json")
    history.set_defaults(handler=history_command)

    plot = subparsers.add_parser("plot", help="write score, dimension and trajectory plots (PNG and SVG)",
                                 description="Write plots to TRACKING/plots: overall score per agent and rubric "
                                             "over cycles, dimension means per rubric, and tournament "
                                             "trajectories from TRACKING/raw_data.json.")
    _common(plot)
    _tracking(plot)
    plot.add_argument("--raw-data", dest="raw_data", metavar="FILE", type=Path, default=None,
                      help="raw_data.json to plot (default: TRACKING/raw_data.json)")
    plot.set_defaults(handler=plot_command)

    report = subparsers.add_parser("report", help="a self-contained HTML (or Markdown) report of a cycle",
                                   description="Write a self-contained HTML report of a cycle: every attempt, "
                                               "dimension scores and reasons, fixes, diffs and plots.")
    _common(report)
    _tracking(report)
    report.add_argument("cycle", metavar="CYCLE", type=parse_cycle, nargs="?", default="latest",
                        help="a cycle id such as 2026-01-31-001, latest (default) or previous")
    report.add_argument("-o", "--output", metavar="FILE", type=Path, default=None,
                        help="where to write; - for stdout (default: stdout when it is redirected or piped, else "
                             "TRACKING/report-CYCLE.html, or .md with --markdown, whose path is printed)")
    report.add_argument("--markdown", action="store_true", help="write the Markdown summary instead of HTML")
    report.add_argument("--no-plots", dest="plots", action="store_false", help="leave the plots out")
    report.set_defaults(handler=report_command)

    cycles = subparsers.add_parser("diff", help="compare two cycles item by item: flips, score changes, cost, time",
                                   description="Compare cycle B with cycle A item by item (by node id): items that "
                                               "flipped between passed and failed, the largest score changes, items "
                                               "scored in one cycle only, added and removed items, each dimension's "
                                               "mean, cost, tokens and durations, and a paired test of the scores of "
                                               "the items scored in both. Exit 0 whatever changed.")
    _common(cycles)
    for dest, metavar, default in (("a", "CYCLE_A", "previous"), ("b", "CYCLE_B", "latest")):
        cycles.add_argument(dest, metavar=metavar, type=parse_cycle, nargs="?", default=default,
                            help=f"a cycle id such as 2026-01-31-001, latest or previous (default: {default})")
    cycles.add_argument("--format", dest="fmt", type=choice("text", "json", "html"), default="text",
                        help="text (default), json, or html (one self-contained page)")
    cycles.add_argument("-o", "--output", metavar="FILE", type=Path, default=None,
                        help="write to FILE and print its path (default: stdout)")
    cycles.set_defaults(handler=diff_command)

    rubric = _rubric_parser(subparsers)
    diff = rubric.add_parser("diff", help="the version bump a rubric change needs, and why",
                             description="Compare two versions of a rubric and name the bump the change needs "
                                         "(the rubric versioning rules, docs/contracts.md). With one file, compare it with the version "
                                         "last committed in git. Exit 1 when NEW's version is too low.")
    diff.add_argument("old", metavar="OLD", type=Path, help="the earlier rubric file")
    diff.add_argument("new", metavar="NEW", type=Path, nargs="?", default=None,
                      help="the changed rubric file (default: OLD's working copy against git HEAD)")
    diff.add_argument("--import-root", dest="import_root", metavar="DIR", type=Path, default=None,
                      help="where python checks are imported from (default: the current folder)")
    diff.set_defaults(handler=rubric_diff_command)


def _rubric_parser(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The ``rubric`` command's own subparsers, reusing them when the main CLI already has ``rubric``."""
    existing = subparsers.choices.get("rubric")
    if existing is not None:
        for action in existing._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action
        return existing.add_subparsers(dest="rubric_command", metavar="COMMAND", required=True)
    rubric = subparsers.add_parser("rubric", help="rubric tools (diff)")
    return rubric.add_subparsers(dest="rubric_command", metavar="COMMAND", required=True)


# --- handlers --------------------------------------------------------------------------------


def history_command(args: argparse.Namespace) -> int:
    from harness.apps.tracking.history import format_history, history_frame

    args.work_dir, nothing = _work_dir(args, "harness history")
    frame = history_frame(args.work_dir, agent=args.agent, rubric=args.rubric, since=args.since)
    if frame.empty and args.fmt == "table":
        print(nothing if not (args.agent or args.rubric or args.since) else
              f"harness history: no records match in {args.work_dir.resolve()}", file=sys.stderr)
        return ExitCode.SUCCESS
    sys.stdout.write(format_history(frame, args.fmt))
    return ExitCode.SUCCESS


def plot_command(args: argparse.Namespace) -> int:
    from harness.apps.tracking.plots import write_plots

    args.work_dir, _ = _work_dir(args, "harness plot")
    written = write_plots(args.work_dir, args.tracking_dir, raw_data=args.raw_data)
    if not written:
        print(f"harness plot: nothing to plot (no records in {args.work_dir}, no {args.tracking_dir}/raw_data.json)",
              file=sys.stderr)
        return ExitCode.NO_INPUT
    for path in written:
        print(path)
    raw = args.raw_data or Path(args.tracking_dir) / "raw_data.json"
    if not Path(raw).exists():
        print(f"harness plot: no trajectory plot: {raw} does not exist yet; a tournament writes it "
              "(harness improve goals/demo_primes --iterations 2)", file=sys.stderr)
    return ExitCode.SUCCESS


def report_command(args: argparse.Namespace) -> int:
    from harness.apps.tracking.compare import resolve_cycle
    from harness.apps.tracking.frames import cycle_ids
    from harness.apps.tracking.markdown import render_markdown, write_markdown
    from harness.apps.tracking.report import render_html, write_html
    from harness.apps.tracking.results import results_from_records

    args.work_dir, nothing = _work_dir(args, "harness report")
    known = cycle_ids(args.work_dir)
    if not known:
        print(nothing, file=sys.stderr)
        return ExitCode.NO_INPUT
    cycle = resolve_cycle(args.cycle, args.work_dir, known)  # else one line naming the cycles that have records
    results = results_from_records(args.work_dir, [cycle])
    if args.markdown:
        text = render_markdown(results)
    else:
        text = render_html(args.work_dir, [cycle], results, tracking_dir=args.tracking_dir, plots=args.plots)
    if args.output == Path("-") or (args.output is None and not sys.stdout.isatty()):
        sys.stdout.write(redact(text))  # `harness report latest > report.html`, or a pipe
        return ExitCode.SUCCESS
    out = args.output or args.tracking_dir / f"report-{cycle}.{'md' if args.markdown else 'html'}"
    (write_markdown if args.markdown else write_html)(out, text)
    print(out)
    return ExitCode.SUCCESS


def diff_command(args: argparse.Namespace) -> int:
    from harness.records import RecordReader

    args.work_dir, nothing = _work_dir(args, "harness diff")
    if not RecordReader(args.work_dir).cycles():
        print(nothing, file=sys.stderr)
        return ExitCode.NO_INPUT
    diff = diff_cycles(args.work_dir, args.a, args.b)  # an unknown cycle: one line naming it and the known ones
    if args.fmt == "html":
        from harness.apps.tracking.report import CSP, CSS

        text = render_html(diff, css=CSS, csp=CSP)
    else:
        text = render_json(diff) if args.fmt == "json" else render_text(diff)
    if args.output is None:
        sys.stdout.write(redact(text))
        return ExitCode.SUCCESS
    atomic_write_text(args.output, text)  # redacted
    print(args.output)
    return ExitCode.SUCCESS


def rubric_diff_command(args: argparse.Namespace) -> int:
    from harness.loading import load_rubric
    from harness.loading.versioning import (
        Bump,
        committed_rubric,
        minimum_version,
        required_bump,
        version_problem,
    )

    import_root = args.import_root or Path.cwd()
    if args.new is None:
        new = load_rubric(args.old, import_root=import_root, examples=False)
        old = committed_rubric(args.old, import_root=import_root, examples=False)
        if old is None:
            print(f"{args.old}: no committed version in git to compare with (give OLD and NEW)", file=sys.stderr)
            return ExitCode.NO_INPUT
        label = f"{args.old} (HEAD -> working copy)"
    else:
        old = load_rubric(args.old, import_root=import_root, examples=False)
        new = load_rubric(args.new, import_root=import_root, examples=False)
        label = f"{args.old} -> {args.new}"
    bump, reasons = required_bump(old, new)
    needed = minimum_version(old.version, bump)
    print(f"{label}: {old.version} -> {new.version}; the change needs {bump}"
          + (f" (version {needed} or later)" if bump is not Bump.NONE and needed else ""))
    for reason in reasons:
        print(f"  - {reason}")
    problem = version_problem(old, new)
    if problem:
        print(f"{args.new or args.old}: {problem}", file=sys.stderr)
        return ExitCode.GENERAL_FAILURE
    return ExitCode.SUCCESS
