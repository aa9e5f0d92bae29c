"""No import circle in rlvr/ and no import up the layers: every import of every module (function-level ones included,
since a lazy import is still a dependency) is an edge, the graph has no cycle, and every edge points down `LAYERS`. Registries stay leaves (the algorithm registry names
its trainer and config classes by dotted path instead of importing them)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from conftest import CHECKOUT_ENV, REPO, printed_json, run_ok

from rlvr import ROOT_SUBPACKAGES

# rlvr.rewards, rlvr.data and rlvr.recipes live at the repository root (rlvr/__init__.py)
PACKAGES = {"rlvr": REPO / "rlvr", **{f"rlvr.{name}": REPO / name for name in ROOT_SUBPACKAGES}}


def modules() -> dict[str, Path]:
    found = {}
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts])
            if name.startswith("rlvr.") and name.split(".")[1] in ROOT_SUBPACKAGES and root == REPO / "rlvr":
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
                return stack[stack.index(nxt) :] + [nxt]
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
    assert {"rlvr.training.trainer", "rlvr.training.algorithms", "rlvr.rewards.registry", "rlvr.data.spec"} <= set(
        graph
    )
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
    assert graph["rlvr.training.algorithms"] <= {
        "rlvr.inputs",
        "rlvr.training.algorithms",
        "rlvr.metrics.keys",
        "rlvr.metrics.reward_batch",
    }
    reached, todo = set(), ["rlvr.training.algorithms"]
    while todo:
        for module in graph.get(todo.pop(), ()):
            if module not in reached:
                reached.add(module)
                todo.append(module)
    assert not reached & {
        "rlvr.training.trainer",
        "rlvr.training.config",
        "rlvr.training.dapo",
        "rlvr.training.ppo",
        "rlvr.training.runner",
    }


# ---- layers: imports only point down
# Top first. A module imports from its own layer and the layers below it, never from one above. The training runner
# runs the planner's pre-flight memory check, so the planner's library sits below training; the planner's command
# line (`rlvr plan`, which parses recipes through training) is an entry point. `base` holds what every layer may use:
# the input errors, the data generators, the speed-up names and code, the tiny model.
LAYERS = ("analysis", "training", "planning", "metrics", "rewards", "runs", "base")
# Entry points sit above every layer and no layered module imports one: `rlvr <command>` and every `__main__`, the
# command lines outside rlvr/analysis, and the recipe scripts `accelerate launch` runs (recipes/<name>.py, the tiny
# model's SFT). The rest of recipes/ (the tiny model and its SFT rows) is a library in `base`.
ENTRY_POINTS = ("rlvr.__main__", "rlvr.training.plan_cli", "rlvr.data.cli", "rlvr.recipes.tiny.sft")
RECIPE_LIBRARIES = ("rlvr.recipes", "rlvr.recipes.tiny", "rlvr.recipes.tiny.model", "rlvr.recipes.tiny.sft_data")


def is_entry_point(module: str) -> bool:
    return (
        module in ENTRY_POINTS
        or module.endswith(".__main__")
        or (module.startswith("rlvr.recipes") and module not in RECIPE_LIBRARIES)
    )


def layer_of(module: str) -> int:
    """The index in LAYERS (0: top) of a layered module; -1 for an entry point."""
    if is_entry_point(module):
        return -1
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else LAYERS.index("base")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a layer to one above it, or of an entry point by a layered module."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if layer_of(module) >= 0 and layer_of(target) < layer_of(module)
    )


def test_every_import_points_down_the_layers():
    graph = import_graph()
    assert {layer_of(m) for m in graph} == set(range(-1, len(LAYERS)))  # every layer holds modules
    assert layer_of("rlvr.metrics.held_out") > layer_of("rlvr.analysis.evaluate")  # held-out scoring is shared
    assert upward_imports(graph) == []


def test_a_planted_upward_import_fails(tmp_path):
    """A module in rlvr/runs that imports the training config, read from its source as every module is."""
    planted = tmp_path / "planted.py"
    planted.write_text("from rlvr.training.config import load_recipe\n")
    graph = import_graph()
    graph["rlvr.runs.planted"] = imports_of("rlvr.runs.planted", planted, set(graph))
    assert upward_imports(graph) == ["rlvr.runs.planted -> rlvr.training.config"]
    planted.write_text("def build():\n    from rlvr.training.plan_cli import main\n")  # lazily, of an entry point
    graph["rlvr.metrics.planted"] = imports_of("rlvr.metrics.planted", planted, set(graph))
    assert "rlvr.metrics.planted -> rlvr.training.plan_cli" in upward_imports(graph)


# ---- which root folders are rlvr sub-packages: in a plain clone (no install: the editable install's finder is taken
# off `sys.meta_path`, the checkout is found through PYTHONPATH) only the three that pyproject's package-dir installs
ROOT_FOLDERS = r"""
import importlib, json, sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
names = ["rlvr.rewards", "rlvr.data", "rlvr.recipes", "rlvr.recipes.tiny.model", "rlvr.benchmarks", "rlvr.toy_rlvr",
         "rlvr.benchmarks.machine_load", "rlvr.tests", "rlvr.slurm"]
found = {}
for name in names:
    try:
        found[name] = importlib.import_module(name).__file__ or "a namespace package"
    except ModuleNotFoundError:
        found[name] = None
print("FOUND " + json.dumps(found))
"""


def test_only_the_card_folders_join_the_package_in_a_checkout(tmp_path):
    found = printed_json(run_ok([sys.executable, "-c", ROOT_FOLDERS], env=CHECKOUT_ENV, cwd=tmp_path).stdout, "FOUND ")
    assert found["rlvr.rewards"] == str(REPO / "rewards" / "__init__.py")
    assert found["rlvr.data"] == str(REPO / "data" / "__init__.py")
    assert found["rlvr.recipes"] == str(REPO / "recipes" / "__init__.py")
    assert found["rlvr.recipes.tiny.model"] == str(REPO / "recipes" / "tiny" / "model.py")
    for name in ("rlvr.toy_rlvr", "rlvr.benchmarks", "rlvr.benchmarks.machine_load", "rlvr.tests", "rlvr.slurm"):
        assert found[name] is None, (name, found[name])


# ---- what a GPU recipe's build loads: one subprocess (a clean `sys.modules`) builds the trainer of
# recipes/grpo_qwen3_1.7b_lora.yaml through the runner, with only what a CPU without the Hub needs changed (the
# committed tiny model's weights, float32), as tests/test_step_files.py builds recipes/grpo.yaml's.
BUILD = r"""
import json, sys
from rlvr.training import runner, trainer
if sys.argv[2] == "cuda":  # the trainer and callbacks a CUDA run gets (generation in pieces, memory peaks), built here
    runner.trains_on_cuda = trainer.trains_on_cuda = lambda training: True
recipe, built, _ = runner.prepare(["--config", "recipes/grpo_qwen3_1.7b_lora.yaml", "--model_name_or_path",
    "models/tiny-speller", "--dtype", "float32", "--bf16", "false", "--use_cpu", "true", "--report_to", "none",
    "--output_dir", sys.argv[1], "--max_steps", "1", "--save_strategy", "no", "--print_rollouts", "false"])
assert built is not None and recipe.model.use_peft
print("MODULES " + json.dumps(sorted(m for m in sys.modules if m.startswith("rlvr"))))
"""


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_gpu_recipes_build_loads_no_analysis_and_no_command_line(tmp_path, device):
    loaded = printed_json(
        run_ok([sys.executable, "-c", BUILD, str(tmp_path / "run"), device], env=CHECKOUT_ENV).stdout, "MODULES "
    )
    assert "rlvr.training.trainer" in loaded  # the build did run
    assert not [m for m in loaded if m.startswith("rlvr.analysis") or is_entry_point(m)]
    # every rlvr module counted, package __init__ files included; the opt-in layers (curriculum, speed-ups, even the
    # speed-ups' names) stay out, and the CUDA memory path only on CUDA
    assert not [m for m in loaded if m.startswith(("rlvr.training.curriculum", "rlvr.speedups"))], loaded
    assert ("rlvr.training.cuda_memory" in loaded) == (device == "cuda")
    assert len(loaded) < 40, loaded
