"""``harness import promptfoo CONFIG`` and ``harness import openai-evals SPEC SAMPLES``.

The main ``harness`` command calls :func:`register` with its subparsers. Each import prints the files it wrote
and one ``not carried over:`` line per thing it left out, then reads the written files back with the harness's
loaders. A bad input is one line naming the file and the field, exit code 64.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from harness.apps.importers import ImportInputError, Plan, load_problems, pytest_opt_in, write_plan
from harness.base.errors import ExitCode, HarnessConfigError
from harness.base.redaction import redact


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``import promptfoo`` and ``import openai-evals`` to the ``harness`` command."""
    parser = subparsers.add_parser("import", help="turn a promptfoo config or an openai/evals eval into a suite",
                                   description="Write a rubric, suites/NAME/agents.yaml, case files and template "
                                               "files from another tool's evaluation, and say what does not carry "
                                               "over.")
    kinds = parser.add_subparsers(dest="source", metavar="SOURCE")
    kinds.required = True

    promptfoo = kinds.add_parser("promptfoo", help="a promptfooconfig.yaml",
                                 description="Each prompt becomes an agent, each test a case of every agent; "
                                             "defaultTest's asserts become the shared rubric.")
    promptfoo.add_argument("config", metavar="CONFIG", type=Path, help="the promptfoo config (promptfooconfig.yaml)")
    _common(promptfoo)
    promptfoo.set_defaults(handler=import_promptfoo)

    evals = kinds.add_parser("openai-evals", help="an openai/evals model-graded spec or registry entry",
                             description="SPEC is a model-graded spec (evals/registry/modelgraded/*.yaml) or an "
                                         "eval registry entry (evals/registry/evals/*.yaml: Match, Includes, "
                                         "FuzzyMatch or ModelBasedClassify); SAMPLES its samples (JSON Lines).")
    evals.add_argument("spec", metavar="SPEC", type=Path, help="the spec or registry entry (YAML)")
    evals.add_argument("samples", metavar="SAMPLES", type=Path, help="the samples (a .jsonl file)")
    evals.add_argument("--eval", dest="eval_name", metavar="NAME", default=None,
                       help="the spec or eval to import when the file holds several (default: the only one)")
    evals.add_argument("--eval-type", dest="eval_type", metavar="TYPE", default=None,
                       choices=("classify", "cot_classify", "classify_cot"),
                       help="as the registry entry's eval_type: appends openai/evals' answer prompt to the spec's "
                            "(default: the registry entry's, else the spec's own)")
    evals.add_argument("--choice-scores", dest="choice_scores", metavar="LABEL=SCORE,...", default=None,
                       help="the score of each choice, for a spec without choice_scores (e.g. Y=1,N=0)")
    _common(evals)
    evals.set_defaults(handler=import_openai_evals)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", dest="out", metavar="DIR", type=Path, default=Path("."),
                        help="the project folder to write rubrics/ and suites/NAME/ into (default: the current "
                             "folder)")
    parser.add_argument("--name", dest="name", metavar="NAME", default=None,
                        help="the suite's and the rubric's name (default: from the config's description or file)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist (default: stop first)")


def import_promptfoo(args: argparse.Namespace) -> int:
    from harness.apps.importers.promptfoo import plan_import

    return _run(args, args.config, lambda: plan_import(args.config, args.out, args.name))


def import_openai_evals(args: argparse.Namespace) -> int:
    from harness.apps.importers.openai_evals import plan_import

    return _run(args, args.spec, lambda: plan_import(args.spec, args.samples, args.out, name=args.name,
                                                     eval_name=args.eval_name, eval_type=args.eval_type,
                                                     choice_scores=args.choice_scores))


def _run(args: argparse.Namespace, source: Path, make_plan: Callable[[], Plan]) -> int:
    try:
        plan = make_plan()
    except ImportInputError:
        raise
    except HarnessConfigError as exc:  # an input file the harness's readers refused (unreadable, bad YAML)
        raise ImportInputError(exc.path, exc.field, exc.problem, exc.fix) from None
    except (KeyError, TypeError, ValueError, AttributeError, OSError) as exc:  # a shape nobody foresaw
        raise ImportInputError(source, None, f"cannot import ({type(exc).__name__}: {exc})",
                               "check the file against its tool's documentation") from None
    hint = pytest_opt_in(plan, args.out)
    for path in write_plan(plan, args.out, force=args.force):
        print(redact(f"wrote {_shown(path, args.out)}"))
    for line in plan.notes:
        print(redact(line))
    problems = load_problems(plan, args.out)
    for problem in problems:
        print(redact(f"harness: import: a written file does not load: {problem}"), file=sys.stderr)
    if hint:
        print(hint)
    print(f"next: pytest {_shown(args.out / plan.suite_dir, args.out)} --collect-only")
    return int(ExitCode.DATA_ERROR) if problems else int(ExitCode.SUCCESS)


def _shown(path: Path, out: Path) -> str:
    """A written path as the user would type it from where they ran the command."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
