"""Imports go one way (docs/design.md): base -> services -> evaluation -> the pytest face -> applications.

Read from the source, every import counted: at module level, inside functions, and under ``TYPE_CHECKING``
(an annotation is a dependency too). A module imports only its own layer or the layers below it; the services
import each other in one order; nothing forms a cycle, between files or between folders. A module that
imports a harness module inside a function does it on purpose, and says why below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import harness

ROOT = Path(harness.__file__).parent

# Each top-level part of the package, lowest first. The services are ordered too: one may use those before it.
LAYERS = (
    ("base",),
    ("safety", "sandbox", "records", "llm", "checks", "loading"),
    ("evaluation",),
    ("face",),
    ("apps",),
    ("testing",),  # test doubles for users' tests: may use anything, used by nothing of the harness
)
ORDER = {part: (rank, index) for rank, parts in enumerate(LAYERS) for index, part in enumerate(parts)}

# Imports of harness modules inside functions, each on purpose: (importing module, imported module) -> why.
PLUGIN_STAYS_LIGHT = ("the plugin is imported in every pytest session of every project, harness or not: it stays "
                      "light, and imports the harness once a file of ours is collected (test_opt_in)")
PANDAS_WHEN_NEEDED = "pandas and matplotlib load only when a command, a report or a plot needs them"
DEFERRED = {
    **{("harness.face.plugin", target): PLUGIN_STAYS_LIGHT for target in (
        "harness.base.errors", "harness.base.models", "harness.base.redaction", "harness.face.batch_report",
        "harness.face.hookspecs",
        "harness.face.nodes", "harness.face.report_text", "harness.face.scheduler", "harness.face.session",
        "harness.evaluation.items", "harness.face.verdict",
        "harness.llm", "harness.llm.prices", "harness.llm.providers", "harness.loading", "harness.records")},
    **{("harness.apps.tracking.cli", target): PANDAS_WHEN_NEEDED for target in (
        "harness.apps.tracking.compare", "harness.apps.tracking.frames", "harness.apps.tracking.history",
        "harness.apps.tracking.markdown", "harness.apps.tracking.plots", "harness.apps.tracking.report",
        "harness.apps.tracking.results")},
    **{("harness.apps.tracking.cli", target): "`harness --help` and each subcommand load only what they use"
       for target in ("harness.loading", "harness.loading.versioning", "harness.records")},
    ("harness.apps.tracking.compare", "harness.apps.tracking.frames"): PANDAS_WHEN_NEEDED,
    ("harness.apps.view.cli", "harness.apps.view.server"): PANDAS_WHEN_NEEDED + " (`harness view` once it has records)",
    ("harness.apps.shards.cli", "harness.apps.shards.gate"): PANDAS_WHEN_NEEDED + " (`harness merge --compare`)",
    ("harness.apps.traces", "harness.apps.traces.frames"): PANDAS_WHEN_NEEDED + " (the loaders; `harness traces` "
                                                                                  "never does)",
    ("harness.face.options", "harness.records.otel"): PLUGIN_STAYS_LIGHT + "; the exporter's check loads only with "
                                                                          "--harness-otel",
    ("harness.apps.tracking.results", "harness.apps.tracking.frames"): PANDAS_WHEN_NEEDED,
    **{("harness.apps.tracking.pytest_plugin", target): PANDAS_WHEN_NEEDED + "; the plugin loads in every session"
       for target in ("harness.apps.tracking.markdown", "harness.apps.tracking.plots", "harness.apps.tracking.report",
                      "harness.apps.tracking.results")},
    ("harness.apps.tournament.recording", "harness.apps.tracking.plots"): PANDAS_WHEN_NEEDED,
    ("harness.apps.tournament.pytest_plugin", "harness.apps.tournament.goal_items"):
        "the feature plugin loads in every session; goals' items only where a goal is collected",
    ("harness.apps.tournament.goal_items", "harness.apps.tournament.loop"): "the loop loads only with --harness-improve",
    ("harness.apps.tournament.cli", "harness.apps.tournament.loop"): "the loop loads only when `harness improve` runs",
    **{("harness.apps.importers.cli", target): "each importer loads only when its subcommand runs"
       for target in ("harness.apps.importers.openai_evals", "harness.apps.importers.promptfoo")},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def resolve(name: str) -> str | None:
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(path: Path) -> list[tuple[str, bool]]:
    """(harness module imported, whether the import is inside a function) for every import of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [f"{child.module}.{alias.name}" for alias in child.names]
            for name in names:
                target = resolve(name) if name.startswith("harness") else None
                if target is not None:
                    found.append((target, inside))
            visit(child, inside)

    visit(tree, False)
    return found


def part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else ""


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _ in imports_of(path):
            # a package's __init__ handing on its own submodules is how a package shows its face: not an edge
            if target != name and not target.startswith(name + "."):
                edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more nodes (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                strong(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            strong(node)
    return found


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {part(name) for name in MODULES if name != "harness"}
    assert parts <= set(ORDER), f"not in a layer: {sorted(parts - set(ORDER))} (add them to LAYERS)"
    top = sorted(p.name for p in ROOT.iterdir() if not p.name.startswith(("_", ".")) and p.name != "py.typed")
    assert top == sorted(ORDER), f"`ls harness` shows {top}: the layers and the services, nothing else"


def test_imports_go_one_way() -> None:
    wrong = []
    for name, path in MODULES.items():
        if name == "harness":
            continue
        for target, _ in imports_of(path):
            if target == "harness" or part(target) == part(name):
                continue
            if ORDER[part(target)] > ORDER[part(name)]:
                wrong.append(f"{name} imports {target}")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(set(wrong)))


def test_there_are_no_import_cycles_between_files_or_folders() -> None:
    edges = graph()
    assert not cycles(edges), "import cycles between files:\n" + "\n".join(" <-> ".join(c) for c in cycles(edges))
    for depth in (2, 3):
        grouped: dict[str, set[str]] = {}
        for name, targets in edges.items():
            key = ".".join(name.split(".")[:depth])
            grouped.setdefault(key, set()).update(".".join(t.split(".")[:depth]) for t in targets)
        for key in grouped:
            grouped[key].discard(key)
        found = cycles(grouped)
        assert not found, f"import cycles between folders (depth {depth}):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_every_import_inside_a_function_is_on_purpose() -> None:
    unexplained = []
    for name, path in MODULES.items():
        for target, deferred in imports_of(path):
            if deferred and (name, target) not in DEFERRED:
                unexplained.append(f"{name} imports {target} inside a function")
    assert not unexplained, ("say why in DEFERRED, or import at the top:\n" + "\n".join(sorted(set(unexplained))))


def test_no_module_grows_past_500_lines() -> None:
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, f"split these by job: {long}"


def test_the_old_import_paths_name_the_same_modules() -> None:
    """Plugins written before the layers keep working: each old name is the module at its new place."""
    import importlib
    import subprocess
    import sys

    for old, new in harness.MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    from harness.events import ItemFinished
    from harness.tracking.plots import plot_trajectories

    from harness.base.events import ItemFinished as new_event

    assert ItemFinished is new_event and plot_trajectories.__module__ == "harness.apps.tracking.plots"
    from harness.checks import Fields  # the name check kinds' docs give

    assert Fields.__module__ == "harness.base.fields"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and harness.__version__ in done.stdout, done.stderr
