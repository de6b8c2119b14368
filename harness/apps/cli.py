"""The ``harness`` command. Feature packages add their subcommands through ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from harness import __version__
from harness.base.errors import ExitCode, HarnessError
from harness.base.redaction import redact

# Each module provides register(subparsers); a subcommand's handler returns the exit code.
SUBCOMMAND_MODULES = ("harness.apps.tracking.cli", "harness.apps.tournament.cli", "harness.apps.importers.cli",
                      "harness.apps.traces.cli", "harness.apps.view.cli", "harness.apps.shards.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description="pytest-rubric: evaluate and improve LLM agents.")
    parser.add_argument("--version", action="version", version=f"pytest-rubric {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return int(ExitCode.MISUSE)
    try:
        return int(handler(args))
    except HarnessError as exc:
        print(redact(f"harness: {exc}"), file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
