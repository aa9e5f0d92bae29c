"""No import circle in rlvr/: every import of every module (function-level ones included, since a lazy import is
still a dependency) is an edge, and the graph has no cycle. Registries stay leaves (the algorithm registry names
its trainer and config classes by dotted path instead of importing them)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

# rlvr.rewards, rlvr.data and rlvr.recipes live at the repository root (rlvr/__init__.py)
PACKAGES = {"rlvr": REPO / "rlvr", "rlvr.rewards": REPO / "rewards", "rlvr.data": REPO / "data",
            "rlvr.recipes": REPO / "recipes"}


def modules() -> dict[str, Path]:
    found = {}
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts])
            if name.startswith("rlvr.") and name.split(".")[1] in ("rewards", "data", "recipes") and root == REPO / "rlvr":
                continue  # an installed copy's folder, if any: the checkout's root folders are the modules
            found[name] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The in-tree modules `name` imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for candidate in candidates:
            # the longest in-tree module the dotted name starts with (`from a.b import c`: a.b.c if a module, else a.b)
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
                break  # `from a.b import c` where c is a module: the edge is to a.b.c, not also to a.b
    return targets


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def test_the_graph_is_built_from_every_module():
    graph = import_graph()
    assert {"rlvr.training.trainer", "rlvr.training.algorithms", "rlvr.rewards.registry", "rlvr.data.spec"} <= set(graph)
    # lazy (function-level) imports count: the trainer reads the registry inside a method
    assert "rlvr.training.algorithms" in graph["rlvr.training.trainer"]
    assert "rlvr.training.config" in graph["rlvr.training.dapo"]


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_in_rlvr():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_algorithm_registry_is_a_leaf():
    graph = import_graph()
    # Only pure leaves: the error type, the metric keys, the advantage estimators and the tensor functions over reward
    # components (the one flatness test), and nothing those reach imports a trainer, a config class or the runner.
    assert graph["rlvr.training.algorithms"] <= {"rlvr.inputs", "rlvr.training.algorithms", "rlvr.metrics.keys",
                                                 "rlvr.metrics.reward_batch"}
    reached, todo = set(), ["rlvr.training.algorithms"]
    while todo:
        for module in graph.get(todo.pop(), ()):
            if module not in reached:
                reached.add(module)
                todo.append(module)
    assert not reached & {"rlvr.training.trainer", "rlvr.training.config", "rlvr.training.dapo",
                          "rlvr.training.ppo", "rlvr.training.runner"}
