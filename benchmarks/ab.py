"""A change's cost, measured A/B: another revision against the working tree, on speed.py's suites, alternated.

    python benchmarks/ab.py cabd161               # 7 rounds (about 6 minutes)
    python benchmarks/ab.py HEAD~3 --rounds 9 --cases 500

The revision's tree is exported (``git archive``) to ``benchmarks/.runs/ab-<rev>`` and imported ahead of the
installed package (``PYTHONPATH``); the working tree is imported the same way, so both runs share everything but the
code. Each round runs, in alternating order, the 500-case suite of speed.py on the 0 ms fake server (the model path,
2 calls a case, cache off) and with a Python producer and judge (no model). Alternating keeps a shared machine's
drift out of the difference, which is what a set of ``speed.py`` runs taken one after the other cannot do. Prints
the medians per case, wall and CPU, each side and the difference.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

import speed

REPO = speed.HERE.parent


def export(revision: str, into: Path) -> Path:
    """The tree of ``revision`` in ``into`` (made once per commit)."""
    commit = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    folder = into / f"ab-{commit}"
    if not (folder / "harness").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", "--format=tar", commit, "harness"], cwd=REPO,
                                 capture_output=True, check=True).stdout
        with tempfile.TemporaryFile() as handle:
            handle.write(archive)
            handle.seek(0)
            with tarfile.open(fileobj=handle) as tar:
                tar.extractall(folder, filter="data")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revision", help="the revision to compare the working tree with (a commit, HEAD~1, a tag)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=speed.HERE / ".runs")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine (see speed.py)
    speed.PORT = speed.free_port()
    args.dir.mkdir(parents=True, exist_ok=True)
    variants = {args.revision: speed.Variant(export(args.revision, args.dir)), "working tree": speed.Variant(REPO)}
    root = speed.runs_folder(args.dir, "ab")
    medians = speed.alternate(variants, args.rounds, args.cases, root)
    speed.print_alternated(medians, args.rounds, args.revision, "working tree")
    print(speed.kept(root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
