"""Which code trained a run: `<output_dir>/code.json`, so a sweep shares a finished run only where it would train it
again to the same bits.

Why: a sweep links a pending run to a finished one with the same parsed recipe (rlvr.analysis.shared_runs), but the
recipe alone does not make the run: a change in the order a group's gradients are summed moved the main job by up to
10 points on the same recipe and seed (docs/measurements/speed.md). So each run records a fingerprint of the code
that shapes training and the library versions, and a run trained or resumed under other code is trained afresh.
The machine is recorded too (float results move with the CPU), not compared: mixed-CPU clusters may still share.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import platform
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

import torch

from rlvr.inputs import ConfigError, read_json
from rlvr.runs import layout

# The packages whose sources change what a run computes (rlvr.rewards is rewards/, rlvr.data data/, rlvr.recipes
# recipes/ and the tiny model's builder); rlvr.analysis and rlvr.planning only read runs.
TRAINING_PACKAGES = ("rlvr.training", "rlvr.speedups", "rlvr.metrics", "rlvr.rewards", "rlvr.data", "rlvr.recipes")
LIBRARIES = ("torch", "transformers", "trl", "accelerate", "peft", "datasets", "reasoning_gym")


def package_roots(packages=TRAINING_PACKAGES) -> list[Path]:
    """The folders the packages import from (an editable install points at the checkout), found without importing."""
    return [Path(root) for name in packages for root in (find_spec(name).submodule_search_locations or [])]


def code_of(source: bytes) -> bytes:
    """What a module runs: its syntax tree without comments, layout or docstrings, so editing a docstring that says
    why does not make every finished run unshareable. A file that does not parse counts as its bytes."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


def sources_digest(roots: list[Path]) -> str:
    """A hash of every .py file under the roots, by relative path and code (`code_of`)."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                digest.update(f"{root.name}/{path.relative_to(root).as_posix()}\0".encode())
                digest.update(code_of(path.read_bytes()))
    return digest.hexdigest()[:16]


def library_versions(libraries=LIBRARIES) -> dict[str, str | None]:
    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {name: installed(name) for name in libraries}


def cpu_model() -> str | None:
    """The CPU's model name (Linux /proc/cpuinfo, else `platform.processor()`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine_identity() -> dict:
    """Where a run computes: the CPU model, the kernel set torch's CPU ops dispatch to (`get_cpu_capability`, e.g.
    AVX512 or AVX2: ATEN_CPU_CAPABILITY can lower it), the cores, the OS, and the GPU if one is visible."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "gpu": gpu,
    }


def code_identity(roots: list[Path] | None = None) -> dict:
    """{"sources": <hash>, "libraries": {name: version}} of the code this process would train with."""
    return {"sources": sources_digest(package_roots() if roots is None else roots), "libraries": library_versions()}


def record_code(output_dir: str | Path, identity: dict | None = None, machine: dict | None = None) -> None:
    """Write `code.json` at a run's start: {"trained_by": identity, "machine": machine}. A run resumed under other
    code keeps its first record and lists the other identities under "resumed_by", which makes it unshareable; one
    resumed on another machine lists that machine under "resumed_on"."""
    identity = code_identity() if identity is None else identity
    machine = machine_identity() if machine is None else machine
    path = Path(output_dir) / layout.CODE
    record = read_json(path, "output_dir", dict) if path.exists() else {"trained_by": identity, "machine": machine}
    resumed_by = record.get("resumed_by", [])
    if record["trained_by"] != identity and identity not in resumed_by:
        record["resumed_by"] = [*resumed_by, identity]
    resumed_on = record.get("resumed_on", [])
    if record.setdefault("machine", machine) != machine and machine not in resumed_on:
        record["resumed_on"] = [*resumed_on, machine]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def other_code(run_dir: str | Path, identity: dict) -> str | None:
    """None when `identity` trained the whole run; otherwise what differs, in words."""
    path = Path(run_dir) / layout.CODE
    if not path.exists():
        return f"it has no {layout.CODE} (trained before runs recorded their code)"
    try:
        record = read_json(path, "output_dir", dict)
    except ConfigError as err:
        return f"its {layout.CODE} cannot be read ({err.message})"
    if record.get("resumed_by"):
        return "it was resumed under other code"
    trained_by = record.get("trained_by")
    if not isinstance(trained_by, dict):
        return f"its {layout.CODE} names no code (no trained_by object)"
    then = trained_by.get("libraries", {})
    differs = (["the training sources"] if trained_by.get("sources") != identity["sources"] else []) + [
        f"{name} {then.get(name)} -> {now}" for name, now in identity["libraries"].items() if then.get(name) != now
    ]
    return f"other code trained it ({', '.join(differs)})" if differs else None
