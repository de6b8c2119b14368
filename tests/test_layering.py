"""Imports go one way (docs/design.md): no cycles between the harness's modules, and the bottom layer imports
nothing above it. Read from the source (module-level imports; ``TYPE_CHECKING`` blocks and imports inside
functions are how a module defers a heavy or upward import on purpose, and are left out)."""

from __future__ import annotations

import ast
from pathlib import Path

import harness

ROOT = Path(harness.__file__).parent
# the bottom layer: the typed models and the small shared vocabularies everything else builds on
BOTTOM = {"harness.models", "harness.errors", "harness.usage", "harness.events", "harness.jsonschemas",
          "harness.fileio", "harness.yamlfile", "harness.clock", "harness.semver", "harness.appendlog",
          "harness.argtypes", "harness.redaction", "harness.fields", "harness.safe_regex"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path) -> set[str]:
    """The harness modules ``path`` imports when it is imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:  # module level only
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ([node] if not isinstance(node, (ast.If, ast.Try)) else ast.walk(node)):
            if isinstance(sub, ast.Import):
                found |= {a.name for a in sub.names if a.name.startswith("harness")}
            elif isinstance(sub, ast.ImportFrom) and sub.module and sub.module.startswith("harness"):
                for alias in sub.names:  # `from harness.llm import cache` imports a module, not a name
                    child = f"{sub.module}.{alias.name}"
                    found.add(child if (ROOT.parent / child.replace(".", "/")).with_suffix(".py").exists()
                              or (ROOT.parent / child.replace(".", "/")).is_dir() else sub.module)
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    return {name: {m for m in module_imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_there_are_no_import_cycles() -> None:
    edges = graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            # a package's __init__ importing its own submodules is how a package re-exports; not a cycle
            if nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_bottom_layer_imports_nothing_above_it() -> None:
    edges = graph()
    upward = {f"{low} imports {high}" for low in BOTTOM for high in edges.get(low, set()) if high not in BOTTOM}
    assert not upward, "\n".join(sorted(upward))
