"""The package's shape: no import circles (counting imports under TYPE_CHECKING and inside
functions), and every import goes with the data flow

    scenario -> workload -> model -> results -> plots / page -> cli

Read from the source with `ast`, so nothing here depends on what happens to be imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "disagg_simpy"

#: Top-level helpers every stage may use.
BASE = {"errors", "units", "files", "inputs", "texts"}
#: stage -> the stages its modules may import (besides BASE and itself)
ALLOWED = {
    "base": set(),
    "costs": set(),  # presets and fitting (scenario files may name a preset)
    "scenario": {"costs"},
    "workload": {"scenario"},
    "model": {"scenario", "workload"},
    "results": {"scenario", "workload", "model"},
    "api": {"scenario", "workload", "model", "results"},
    "sweep": {"scenario", "workload", "model", "results", "api"},
    "plots": {"scenario", "workload", "results"},
    "page": {"scenario", "workload", "results"},
    "cli": {"costs", "scenario", "workload", "model", "results", "api", "sweep", "plots", "page", "root"},
    "root": {"api", "results", "scenario"},  # disagg_simpy/__init__.py: the public names
    "main": {"cli"},  # __main__.py
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def stage(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    top = parts[1]
    if top == "__main__":
        return "main"
    if top in BASE:
        return "base"
    return top


def imports(module: str) -> set[str]:
    """Modules of the package that `module` imports anywhere in its source."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "disagg_simpy"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "disagg_simpy":
                continue
            subs = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES}
            found |= subs or {target}
            if len(subs) < len(node.names):
                found.add(target)
    return {m for m in found if m in MODULES and m != module}


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_belongs_to_a_known_stage():
    unknown = sorted({stage(m) for m in MODULES} - set(ALLOWED) - {"base"})
    assert not unknown, f"new stage(s) {unknown}: add them to ALLOWED with the stages they may import"


def test_imports_follow_the_data_flow():
    wrong = []
    for module, targets in GRAPH.items():
        mine = stage(module)
        for target in targets:
            theirs = stage(target)
            if theirs != mine and theirs != "base" and theirs not in ALLOWED[mine]:
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the data flow:\n" + "\n".join(sorted(wrong))


def test_no_import_circles():
    circles = []
    state: dict[str, int] = {}  # 1 = on the path, 2 = done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(GRAPH[m]):
            if state.get(t) == 1:
                circles.append(" -> ".join(path[path.index(t):] + [t]))
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_checker_sees_what_it_must():
    """The walker itself: relative imports, imports inside functions and under TYPE_CHECKING."""
    assert "disagg_simpy.model.records" in GRAPH["disagg_simpy.results.metrics"]
    assert "disagg_simpy.scenario.loading" in GRAPH["disagg_simpy.cli.common"]  # inside a function
    assert "disagg_simpy.api" in GRAPH["disagg_simpy"]  # under TYPE_CHECKING
    assert stage("disagg_simpy.model.engine") == "model" and stage("disagg_simpy.units") == "base"


def test_no_module_is_much_over_400_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 420}
    assert not long, f"modules over ~400 lines (split them by job): {long}"
