"""``harness traces``: a cycle's execution trace, filtered, as readable lines or JSON lines; ``--follow`` keeps
showing new lines as they are written, like ``tail -f``, until Ctrl-C.

The main ``harness`` command calls :func:`register` with its subparsers; the handler returns the exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.apps.traces.select import Selection, event_name, exit_code_spec, since_time, text_line
from harness.apps.tracking.cli import find_work_dir
from harness.base.argtypes import choice
from harness.base.errors import ExitCode
from harness.base.redaction import redact
from harness.records import TraceRead, follow_trace, read_trace, trace_cycles, trace_path, traces_path

POLL_S = 0.2


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``traces`` to the ``harness`` command."""
    traces = subparsers.add_parser(
        "traces", help="show a cycle's execution trace (gates, results, model calls), filtered, or follow it",
        description="Show the execution trace of a cycle (WORK/traces/CYCLE.jsonl): one line per event, filtered by "
                    "item, event, exit code and time; --follow keeps showing new lines until Ctrl-C.")
    traces.add_argument("--work-dir", dest="work_dir", metavar="DIR", type=Path, default=None,
                        help="the harness work folder (default: the nearest WORK/ with a harness.db in this folder "
                             "or above)")
    traces.add_argument("--cycle", metavar="CYCLE", default="latest",
                        help="a cycle id such as 2026-01-31-001, latest (default) or all")
    traces.add_argument("--item", metavar="TEXT", default=None, help="only items whose node id contains TEXT")
    traces.add_argument("--event", dest="events", metavar="EVENT", action="append", type=event_name, default=[],
                        help="only this event (skill_invoked, gate_checked, execution_progress, execution_complete, "
                             "handoff_attempted, model_call); repeat for several (default: all)")
    traces.add_argument("--exit-code", dest="exit_codes", metavar="CODES", type=exit_code_spec, default=None,
                        help="only items whose execution ended with these exit codes: a code (65), a range (80-83), "
                             "a triage word (retry, fix_inputs, escalate, review_output, ...) or a name (timeout); "
                             "several with commas")
    traces.add_argument("--since", metavar="WHEN", type=since_time, default=None,
                        help="only lines from WHEN on: a date (2026-01-31), a time (2026-01-31T09:30, UTC unless it "
                             "says otherwise) or an age (30m, 2h, 7d)")
    traces.add_argument("-f", "--follow", action="store_true",
                        help="keep showing new lines as they are written (the latest cycle's, moving on to a newer "
                             "cycle when one starts, unless --cycle names one); Ctrl-C stops")
    traces.add_argument("--format", dest="fmt", metavar="text|json", type=choice("text", "json"), default="text",
                        help="text: one readable line per event (default); json: JSON lines, each the trace line "
                             "with its cycle")
    traces.set_defaults(handler=traces_command)


def traces_command(args: argparse.Namespace) -> int:
    work_dir, nothing = _work_dir(args)
    cycles = trace_cycles(work_dir)
    selection = Selection(item=args.item, events=frozenset(args.events), exit_codes=args.exit_codes,
                          since=args.since)
    show = _writer(args.fmt, many_cycles=args.cycle == "all")
    report = TraceRead()
    try:
        if args.follow:
            return _follow(work_dir, None if args.cycle in ("latest", "all") else args.cycle, selection, show, report)
        if not cycles:
            print(nothing, file=sys.stderr)
            return ExitCode.NO_INPUT
        chosen = cycles if args.cycle == "all" else cycles[-1:] if args.cycle == "latest" else [args.cycle]
        if chosen[0] not in cycles:
            print(f"harness traces: no trace of cycle {args.cycle} in {traces_path(work_dir)} (recent cycles: "
                  f"{', '.join(cycles[-5:])}; or latest, all)", file=sys.stderr)
            return ExitCode.NO_INPUT
        shown_any = False
        for cycle in chosen:
            for line in read_trace(trace_path(work_dir, cycle), report):
                for shown in selection.feed(line, cycle):
                    show(cycle, shown)
                    shown_any = True
        if not shown_any:
            print(f"harness traces: no line of {', '.join(chosen) if len(chosen) < 4 else f'{len(chosen)} cycles'} "
                  "matches", file=sys.stderr)
    except KeyboardInterrupt:  # the way to end --follow; a long listing stops as quietly
        pass
    except BrokenPipeError:  # `harness traces | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.SUCCESS
    finally:
        _skipped(report)
    return ExitCode.SUCCESS


def _work_dir(args: argparse.Namespace) -> tuple[Path, str]:
    """The work folder to read, and what to say when it holds no trace."""
    if args.work_dir is not None:
        return args.work_dir, (f"harness traces: no traces in {traces_path(args.work_dir.resolve())} (run pytest "
                               "with capture on, the default, first)")
    found, looked = find_work_dir()
    where = ", ".join(str(p) for p in looked[:3]) + (f" and {len(looked) - 3} more folders up" if len(looked) > 3
                                                     else "")
    return found, (f"harness traces: no traces: no WORK/traces in this folder or above (looked in {where}); run "
                   "pytest in the project first, or give --work-dir")


def _writer(fmt: str, *, many_cycles: bool) -> Callable[[str, dict[str, Any]], None]:
    def text(cycle: str, line: dict[str, Any]) -> None:
        print(redact(text_line(line, cycle if many_cycles else None)), flush=True)

    def as_json(cycle: str, line: dict[str, Any]) -> None:
        print(redact(json.dumps({"ts": line["ts"], "event": line["event"], "cycle": cycle, "data": line["data"]},
                                ensure_ascii=False, separators=(",", ":"))), flush=True)

    return text if fmt == "text" else as_json


def _follow(work_dir: Path, cycle: str | None, selection: Selection, show: Callable[[str, dict[str, Any]], None],
            report: TraceRead) -> int:
    """Show the lines of ``cycle`` (else the latest, moving on to each newer cycle) as they are written."""
    current, stream = None, None
    if cycle is None and not trace_cycles(work_dir):
        print(f"harness traces: waiting for a trace in {traces_path(work_dir)} (Ctrl-C to stop)", file=sys.stderr)
    while True:
        wanted = cycle or next(reversed(trace_cycles(work_dir)), None)
        if wanted is not None and wanted != current:
            if stream is not None:
                stream.close()
            current, stream = wanted, follow_trace(trace_path(work_dir, wanted), poll_s=0, report=report)
        if stream is None:
            time.sleep(POLL_S)
            continue
        for line in stream:
            if line is None:  # nothing new: look for a newer cycle, then wait
                break
            for shown in selection.feed(line, current):
                show(current, shown)
        time.sleep(POLL_S)


def _skipped(report: TraceRead) -> None:
    if report.bad:
        count = len(report.bad)
        print(f"harness traces: skipped {count} line{'s' * (count != 1)} that {'is' if count == 1 else 'are'} not "
              f"a trace line (first: {report.bad[0]})", file=sys.stderr)
