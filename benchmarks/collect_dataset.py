"""Collection of a large dataset (issue 12). One command, prints a table:

    python benchmarks/collect_dataset.py                 # 100,000 rows, medians of 5 runs, file and hf
    python benchmarks/collect_dataset.py --rows 20000 --runs 3 --source file
    python benchmarks/collect_dataset.py --profile       # one in-process run under cProfile instead

Writes a project (benchmarks/speed.py's suite) with one case file whose ``dataset:`` reads ``--rows`` rows of
JSON Lines (an int id column, three text columns, templated id, inputs and expected) and runs ``pytest -q
--collect-only`` on it in fresh processes, as benchmarks/speed.py measures the collection of 10,000 written
cases: the wall time of the child (start-up included) and its peak RSS (``getrusage`` of the child), after one
warm-up run. Targets: 10 s and 500 MB for 100,000 rows of a JSONL file. The same with 10 rows is the start-up,
which gives the cost of a row. When the ``datasets`` package is installed, the same rows are also collected
through ``dataset: {hf: ...}`` from a local Hugging Face dataset folder (its ``data.jsonl`` converted to Arrow
once, by the warm-up, into a cache under the run folder; the runs measured read that cache, as a second run on
a user's machine does; the hub is switched off).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib.util
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from speed import HERE, median, peak_rss_mb_of, write_suite

TARGET_ROWS, TARGET_S, TARGET_MB = 100_000, 10.0, 500.0  # for 100,000 rows of a JSONL file (issue 12)
SMALL = 10  # rows of the start-up measure: what any collection of such a suite costs
CASE_FILE = """\
agent: bench
dataset:
  {source}
  id: "q-{{n}}"
  inputs: {{question: "{{question}}", context: "{{context}}"}}
  expected: "{{answer}}"
"""


def write_dataset_suite(root: Path, rows: int, *, hf: bool) -> None:
    """A suite (benchmarks/speed.py's) whose one case file reads ``rows`` rows from a JSONL dataset."""
    write_suite(root, 1)
    data = root / "suites" / "data"
    data.mkdir()
    target = data / "hfqa" / "data.jsonl" if hf else data / "qa.jsonl"
    target.parent.mkdir(exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        for n in range(rows):
            out.write(json.dumps({"n": n, "question": f"What is {n} plus {n}?", "answer": str(2 * n),
                                  "context": f"Row {n} of a benchmark dataset, about as long as a short question."})
                      + "\n")
    source = "hf: data/hfqa\n  split: train" if hf else "file: data/qa.jsonl"
    (root / "suites" / "bench.cases.yaml").write_text(CASE_FILE.format(source=source))


def measure(root: Path, runs: int) -> tuple[float, float, list[tuple[float, float]]]:
    peak_rss_mb_of(root, ["suites/", "--collect-only"])  # warm-up: bytecode, and the datasets cache for hf
    measured = [peak_rss_mb_of(root, ["suites/", "--collect-only"]) for _ in range(runs)]
    return median([m[0] for m in measured]), median([m[1] for m in measured]), measured


def collected_count(root: Path) -> int:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           "suites/"], cwd=root, capture_output=True, text=True)
    return sum(1 for line in done.stdout.splitlines() if "::" in line)


def profile(root: Path) -> None:
    """One collection in this process under cProfile: where the time goes."""
    import pytest

    os.chdir(root)
    profiler = cProfile.Profile()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        profiler.enable()
        pytest.main(["-q", "-p", "no:cacheprovider", "--collect-only", "suites/"])
        profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=TARGET_ROWS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--source", choices=("file", "hf", "both"), default="both",
                        help="which dataset source to measure (default: both; hf needs the datasets package)")
    parser.add_argument("--profile", action="store_true", help="profile one collection instead of timing")
    parser.add_argument("--dir", type=Path, default=HERE / ".runs",
                        help="where the generated suites go (default: benchmarks/.runs, on the project's disk)")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine (see benchmarks/speed.py)
    args.dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="harness-dataset-", dir=args.dir))
    # the datasets cache of the hf rows stays in the run folder; nothing is fetched from the hub
    os.environ.update(HF_DATASETS_CACHE=str(tmp / "hf-cache"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    rows: list[tuple[str, str, str]] = []
    try:
        sources = [name for name in ("file", "hf") if args.source in (name, "both")]
        if importlib.util.find_spec("datasets") is None:
            sources = [name for name in sources if name != "hf"]
        for name in sources:
            suite, small = tmp / name, tmp / f"{name}-{SMALL}"
            write_dataset_suite(suite, args.rows, hf=name == "hf")
            if args.profile:
                profile(suite)
                return 0
            write_dataset_suite(small, SMALL, hf=name == "hf")
            count = collected_count(suite)
            if count != args.rows:
                raise SystemExit(f"{name}: collected {count} items, not {args.rows}")
            wall, rss, measured = measure(suite, args.runs)
            base_wall, base_rss, _ = measure(small, args.runs)
            runs = ", ".join(f"{w:.2f} s/{r:.0f} MB" for w, r in measured)
            if name != "file":
                verdict = "a reference (the targets are set for a JSONL file)"
            elif args.rows != TARGET_ROWS:
                verdict = f"the targets are set for {TARGET_ROWS} rows"
            else:
                verdict = "meets the targets" if wall < TARGET_S and rss < TARGET_MB else "MISSES the targets"
            rows.append((f"collect {args.rows} rows, dataset: {{{name}: ...}}", f"{wall:.2f} s, {rss:.0f} MB",
                         f"{verdict}; runs: {runs}"))
            rows.append((f"  start-up: the same with {SMALL} rows", f"{base_wall:.2f} s, {base_rss:.0f} MB",
                         f"so a row costs {1000 * (wall - base_wall) / args.rows:.3f} ms and "
                         f"{1024 * (rss - base_rss) / args.rows:.2f} KB"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure':<{width}}  {'median':>16}  notes (medians of {args.runs} runs; "
          f"targets for {TARGET_ROWS} rows: {TARGET_S:.0f} s, {TARGET_MB:.0f} MB)")
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>16}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
