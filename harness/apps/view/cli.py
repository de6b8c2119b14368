"""``harness view``: serve a work folder's records as web pages on this machine, read-only, until Ctrl-C.

The main ``harness`` command calls :func:`register` with its subparsers; the handler returns the exit code.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from harness.apps.tracking.cli import find_work_dir
from harness.base.argtypes import whole_number
from harness.base.errors import ExitCode
from harness.records import RecordReader

DEFAULT_PORT = 8765


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``view`` to the ``harness`` command."""
    view = subparsers.add_parser(
        "view", help="browse the records in a local web viewer (read-only)",
        description="Serve the records of a work folder as web pages: the cycles, each cycle's items (failed "
                    "first), each item's inputs, reference answer, attempts, dimension scores and reasons, "
                    "suggested fixes and diffs, the plots and the execution traces. Read-only; Ctrl-C stops it.")
    view.add_argument("--work-dir", dest="work_dir", metavar="DIR", type=Path, default=None,
                      help="the harness work folder (default: the nearest WORK/ with a harness.db in this folder "
                           "or above)")
    view.add_argument("--port", metavar="PORT", type=_port, default=DEFAULT_PORT,
                      help=f"the port to listen on; 0 for any free one (default: {DEFAULT_PORT})")
    view.add_argument("--host", metavar="HOST", default="127.0.0.1",
                      help="the address to listen on (default: 127.0.0.1, this machine only)")
    view.add_argument("--tracking-dir", dest="tracking_dir", metavar="DIR", type=Path, default=Path("tracking"),
                      help="the folder whose plots/ the Plots page shows (default: tracking)")
    view.set_defaults(handler=view_command)


def _port(text: str) -> int:
    port = whole_number(0)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (fix: give 0 to 65535; 0 for any free one)")
    return port


def view_command(args: argparse.Namespace) -> int:
    if args.work_dir is not None:
        work_dir = args.work_dir
        missing = f"harness view: no records in {work_dir.resolve()} (no harness.db there); give the work folder " \
                  "pytest wrote (--work-dir), or run pytest in the project first"
    else:
        work_dir, looked = find_work_dir()
        missing = (f"harness view: no records: no WORK/harness.db in this folder or above (looked in "
                   f"{', '.join(str(p) for p in looked[:3])}{' and further up' if len(looked) > 3 else ''}); run "
                   "pytest in the project first, or give --work-dir")
    if not RecordReader(work_dir).exists():
        print(missing, file=sys.stderr)
        return ExitCode.NO_INPUT
    from harness.apps.view.server import make_server  # pandas and the report: only once there is something to show

    try:
        server = make_server(work_dir.resolve(), host=args.host, port=args.port, tracking_dir=args.tracking_dir)
    except OSError as exc:
        print(f"harness view: cannot listen on {args.host}:{args.port}: {exc.strerror or exc} (fix: another --port, "
              "or 0 for any free one)", file=sys.stderr)
        return ExitCode.UNAVAILABLE
    print(f"harness view: serving the records of {work_dir.resolve()} at {server.url} (read-only; Ctrl-C stops it)",
          flush=True)
    if not _loopback(args.host):
        print(f"harness view: listening on {args.host}: anyone who can reach this machine can read these records",
              file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("harness view: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return ExitCode.SUCCESS


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
