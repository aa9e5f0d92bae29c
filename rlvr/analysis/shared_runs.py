"""Runs shared between sweeps: a pending run that a sweep under the same --out already trained is linked, not retrained.

"The same run": the same recipe as its script parses it (`run_identity`), trained by the same code (`code.json`,
rlvr.runs.code_record; other code is trained afresh, with one line saying why). Only real runs are shared from, never
links, and a link whose run was deleted is cleared when the sweep next trains.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

from rlvr.analysis.loaders import load_run
from rlvr.analysis.sweep_spec import Spec, Variant, load_spec
from rlvr.inputs import ConfigError, load_yaml_mapping
from rlvr.runs import layout
from rlvr.runs.code_record import code_identity, other_code
from rlvr.training.config import load_recipe


def parsed_fields(config: dict) -> list[dict]:
    """The recipe as its script parses it: (recipe, training, model) arguments as dicts, every default filled in, where
    the run writes left out."""
    loaded = load_recipe(["--dry_run", "true"], config={**config, "output_dir": "RUN"}, source="a sweep run's recipe")
    parsed = (loaded.args, loaded.training, loaded.model)
    fields = [a.to_dict() if hasattr(a, "to_dict") else dataclasses.asdict(a) for a in parsed]
    for entry in fields:
        entry.pop("logging_dir", None)  # derived from the time of parsing in some transformers versions
    return fields


def run_identity(config: dict) -> str:
    """Two recipes with one identity train the same run (so `kl_estimator: k3` written out equals k3 by default)."""
    return json.dumps(parsed_fields(config), sort_keys=True, default=str)


def evaluation_of(spec: Spec, config: dict) -> dict | None:
    """How a sweep evaluates one run, with the run's own sampling temperature where the spec leaves it to the run
    (`temperature: 1.0` in the spec and a run trained at 1.0 evaluate alike)."""
    if not spec.evaluate:
        return spec.evaluate
    temperature = spec.evaluate.get("temperature")
    return {
        **spec.evaluate,
        "temperature": parsed_fields(config)[1]["temperature"] if temperature is None else temperature,
    }


def is_linked(run_dir: Path) -> bool:
    """A shared run: the folder itself links to another run, or holds links to its files (and its own evaluation)."""
    return run_dir.is_symlink() or (run_dir / layout.SWEEP_RECIPE).is_symlink()


def find_shared_run(variant: Variant, spec: Spec, out: Path) -> tuple[Path, bool] | None:
    """A finished run anywhere under <out> (another sweep, or this one) that trained from this variant's recipe, and
    whether that sweep evaluated it the same way (the GRPO baseline of the KL sweep is the reference sweep's GRPO run,
    seed for seed)."""
    candidates = []
    for recipe in sorted(out.glob(f"*/*/{layout.SWEEP_RECIPE}")):
        run_dir = recipe.parent
        if is_linked(run_dir) or run_dir == variant.run_dir or not (run_dir / layout.METRICS).exists():
            continue
        try:
            old = load_yaml_mapping(recipe, "--out")
        except ConfigError:  # another sweep's damaged recipe: not a run to share (its own sweep names it)
            continue
        if (old.get("seed"), old.get("max_steps")) == (variant.config.get("seed"), variant.config.get("max_steps")):
            candidates.append((run_dir, old))  # cheap filter first: parsing is the slow part
    if not candidates:
        return None
    identity, code = run_identity(variant.config), None
    for run_dir, old in candidates:
        if run_identity(old) != identity or not load_run(run_dir).finished:
            continue
        code = code or code_identity()  # hashing the training sources takes ~0.2 s: only once a recipe matches
        if why := other_code(run_dir, code):  # the same recipe under other code is another run (code_record)
            print(f"[sweep] {variant.label}: not sharing {run_dir}: {why}; training it afresh", flush=True)
            continue
        try:
            other = load_spec(run_dir.parent / layout.SWEEP_SPEC)
        except (ConfigError, OSError):
            return run_dir, False
        return run_dir, evaluation_of(other, old) == evaluation_of(spec, variant.config)
    return None


def share(variant: Variant, source: Path, same_evaluation: bool) -> None:
    """Link the variant's folder to `source` (relative links, so the sweeps folder can move as a whole). Evaluated
    the same way, the whole folder is a link; evaluated another way (a word-length sweep's own held-out set), the
    folder links to each of the run's files and keeps its own `eval/`."""
    variant.run_dir.parent.mkdir(parents=True, exist_ok=True)
    if same_evaluation:
        variant.run_dir.symlink_to(os.path.relpath(source, variant.run_dir.parent), target_is_directory=True)
        return
    variant.run_dir.mkdir()
    for entry in sorted(source.iterdir()):
        if entry.name != layout.EVAL_DIR:
            (variant.run_dir / entry.name).symlink_to(
                os.path.relpath(entry, variant.run_dir), target_is_directory=entry.is_dir()
            )


def clear_stale_link(variant: Variant) -> None:
    """A shared run whose source was deleted: remove the link (or the folder of links and its own eval/) so the
    variant can train afresh. Only links are removed; a real run folder is never touched here."""
    if is_linked(variant.run_dir) and not variant.config_path.exists():
        variant.run_dir.unlink() if variant.run_dir.is_symlink() else shutil.rmtree(variant.run_dir)
