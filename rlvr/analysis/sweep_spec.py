"""A sweep spec and the runs it plans: one base recipe, one field varied, every value (per seed) a run.

A spec (see sweeps/*.yaml):

    name: group-size                        # runs go to <out>/<name>/<label>/
    base: recipes/tiny/grpo.yaml            # not needed when `recipe` itself is varied
    vary: {num_generations: [2, 4, 8, 16]}  # ONE field: a recipe key, a dotted path (data.specs.0.config.max_word_len),
                                            # or `recipe` (a list of recipe YAMLs: algorithm comparisons)
    fixed: {max_steps: 60}                  # applied to every run (dotted keys allowed)
    labels: [g2, g4, g8, g16]               # optional run directory names, one per value
    samples_budget: 7680                    # optional: max_steps per run so each generates this many samples
                                            # (DAPO, whose resampling varies it: max_generated_samples too)
    seeds: [1, 2]                           # optional: every value trains once per seed, as <label>-s<seed>
    evaluate: {num_samples: 8, k: [1, 8]}   # optional: held-out pass@k of each finished run, and of the base model
                                            # (also: num_prompts, data: {...} another held-out set, temperature)

`load_spec` checks it (one line naming the field), `plan` lays out each run's effective recipe (base <- fixed <- CLI
overrides <- the varied value), `validate_variant` parses each as its script will and turns `samples_budget` into
max_steps. Running them is rlvr.analysis.sweep; linking runs another sweep already trained, rlvr.analysis.shared_runs.
"""

from __future__ import annotations

import argparse
import copy
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlvr.analysis.summaries import seed_group
from rlvr.data.spec import DATA_EXAMPLE, DATA_FIELDS, DataSpec
from rlvr.inputs import (
    ConfigError,
    load_recipe_yaml,
    load_yaml_mapping,
    mapping_field,
    name_inside,
    non_negative_float,
    positive_int,
    reject_unknown_keys,
)
from rlvr.runs import layout
from rlvr.training.config import load_recipe, validate

SPEC_FIELDS = ("name", "base", "vary", "fixed", "labels", "samples_budget", "seeds", "evaluate")
# The spec's `evaluate:` keys and defaults. every_steps: also evaluate a checkpoint saved every N optimizer steps
# (eval/checkpoint-N.json), so held-out exact match has a curve over generated samples, not only an end point.
EVAL_FIELDS = {
    "num_samples": 8,
    "k": [1, 8],
    "num_prompts": None,
    "data": None,
    "temperature": None,
    "every_steps": None,
}
RECIPE_KEY = "recipe"


@dataclass
class Spec:
    name: str
    key: str  # the varied field
    values: list
    base: str | None = None
    fixed: dict = field(default_factory=dict)
    labels: list[str] | None = None
    samples_budget: int | None = None
    seeds: list[int] | None = None
    evaluate: dict | None = None
    text: str = ""


@dataclass
class Variant:
    label: str
    value: object
    recipe: str  # the YAML the variant starts from: base, or the varied recipe
    config: dict  # the effective recipe: base + fixed + CLI overrides + the varied value
    run_dir: Path

    @property
    def script(self) -> str:
        """The per-algorithm script that trains this variant (relative to the repo root)."""
        return f"recipes/{self.config.get('algorithm', 'grpo')}.py"

    @property
    def config_path(self) -> Path:
        """The recipe file the sweep writes and launches; the runner then records what ran as config.yaml."""
        return self.run_dir / layout.SWEEP_RECIPE


def load_spec(path) -> Spec:
    """Parse and check a spec; every problem is one line naming the spec field."""
    raw = load_yaml_mapping(path, "SPEC", "a mapping with name, vary and base")
    text = Path(path).read_text()
    reject_unknown_keys(raw, SPEC_FIELDS, "sweep spec field")
    if not isinstance(raw.get("name"), str) or not raw["name"].strip():
        raise ConfigError("name", "the sweep needs a name (its output folder)")
    name_inside("--out", raw["name"], "name", "the sweep name")
    vary = raw.get("vary")
    if not isinstance(vary, dict) or len(vary) != 1:
        raise ConfigError("vary", "must map exactly one field to its list of values, e.g. {num_generations: [2, 4]}")
    ((key, values),) = vary.items()
    if not isinstance(values, list) or not values:
        raise ConfigError(f"vary.{key}", "needs a non-empty list of values")
    if key != RECIPE_KEY and not raw.get("base"):
        raise ConfigError("base", "the recipe every run starts from is required unless `recipe` is varied")
    if key == RECIPE_KEY and raw.get("base"):
        raise ConfigError("base", "drop it: the varied `recipe` values are the bases")
    for recipe in values if key == RECIPE_KEY else [raw["base"]]:
        if not isinstance(recipe, str) or not Path(recipe).is_file():
            raise ConfigError(f"vary.{key}" if key == RECIPE_KEY else "base", f"no such recipe file: {recipe!r}")
    fixed = raw.get("fixed") or {}
    if not isinstance(fixed, dict):
        raise ConfigError("fixed", "must be a mapping of field: value")
    if key in fixed:
        raise ConfigError(f"fixed.{key}", "is the varied field")
    labels = raw.get("labels")
    if labels is not None and (not isinstance(labels, list) or len(labels) != len(values)):
        raise ConfigError("labels", f"needs one label per value ({len(values)})")
    budget = raw.get("samples_budget")
    if budget is not None:
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
            raise ConfigError("samples_budget", f"must be a positive integer, got {budget!r}")
        if "max_steps" in fixed or key == "max_steps":
            raise ConfigError("samples_budget", "set either samples_budget or max_steps, not both")
    seeds = raw.get("seeds")
    if seeds is not None:
        if (
            not isinstance(seeds, list)
            or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        ):
            raise ConfigError("seeds", f"must be a non-empty list of integers, got {seeds!r}")
        if len(set(seeds)) != len(seeds) or key == "seed" or "seed" in fixed:
            raise ConfigError("seeds", "must be distinct, and not combined with a varied or fixed `seed`")
    evaluation = raw.get("evaluate")
    if evaluation is not None:
        if evaluation is True:
            evaluation = {}
        if not isinstance(evaluation, dict):
            raise ConfigError("evaluate", "must be a mapping like {num_samples: 8, k: [1, 8]} (or true)")
        reject_unknown_keys(evaluation, EVAL_FIELDS, "evaluate field")
        evaluation = {**EVAL_FIELDS, **evaluation}
        ks, n = evaluation["k"], evaluation["num_samples"]
        if (
            not isinstance(n, int)
            or n < 1
            or not isinstance(ks, list)
            or not ks
            or not all(isinstance(k, int) and 1 <= k <= n for k in ks)
        ):
            raise ConfigError("evaluate.k", f"each k must be an integer in [1, num_samples={n}], got {ks!r}")
        checks = {"every_steps": positive_int, "num_prompts": positive_int, "temperature": non_negative_float}
        for name, kind in checks.items():  # num_prompts and temperature as `rlvr evaluate` takes them
            if evaluation[name] is not None:
                try:
                    kind(str(evaluation[name]))
                except argparse.ArgumentTypeError as err:
                    raise ConfigError(f"evaluate.{name}", str(err)) from None
        if evaluation["data"] is not None:  # its fields here; merged over each run's data, in `validate_variant`
            evaluation["data"] = mapping_field(evaluation["data"], "evaluate.data", DATA_FIELDS, DATA_EXAMPLE)
    return Spec(raw["name"], key, values, raw.get("base"), fixed, labels, budget, seeds, evaluation, text)


def set_dotted(config: dict, key: str, value, where: str) -> None:
    """config[a][b][0][c] = value for key `a.b.0.c`; the path up to the last part must exist in the recipe."""
    *parents, leaf = key.split(".")
    node = config
    for i, part in enumerate(parents):
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ConfigError(where, f"{'.'.join(parents[: i + 1])!r} is not in the recipe") from None
    if isinstance(node, list):
        try:
            node[int(leaf)] = value
        except (IndexError, ValueError):
            raise ConfigError(where, f"{leaf!r} is not an index of {'.'.join(parents)!r}") from None
    elif isinstance(node, dict):
        node[leaf] = value
    else:
        raise ConfigError(where, f"{'.'.join(parents)!r} is not a mapping")


def label_for(spec: Spec, index: int) -> str:
    if spec.labels:
        raw = str(spec.labels[index])
    elif spec.key == RECIPE_KEY:
        raw = Path(spec.values[index]).stem
    elif isinstance(spec.values[index], (dict, list)):
        raw = f"{spec.key.split('.')[-1]}-{index}"
    else:
        raw = f"{spec.key.split('.')[-1]}-{spec.values[index]}"
    return "".join(c if c.isalnum() or c in "._=-" else "_" for c in raw)


def plan(spec: Spec, out: Path, overrides: dict) -> list[Variant]:
    """The variants' effective recipes, in spec order: base <- fixed <- CLI overrides <- the varied value."""
    if spec.key in overrides:
        raise ConfigError(f"--{spec.key}", "is the swept field; change the spec's `vary` instead")
    if "output_dir" in overrides or "output_dir" in spec.fixed:
        raise ConfigError("output_dir", "each run's folder is <out>/<name>/<label>; set --out instead")
    variants, read = [], {}
    for index, value in enumerate(spec.values):
        recipe = value if spec.key == RECIPE_KEY else spec.base
        if recipe not in read:  # each recipe file read once, `base:` resolved; every variant starts from a copy
            read[recipe] = load_recipe_yaml(recipe, "base" if spec.key != RECIPE_KEY else f"vary.{RECIPE_KEY}")
        config = copy.deepcopy(read[recipe])
        for source, entries in (("fixed", spec.fixed), ("--", overrides)):
            for key, entry in entries.items():
                set_dotted(config, key, copy.deepcopy(entry), f"{source}.{key}" if source == "fixed" else f"--{key}")
        if spec.key != RECIPE_KEY:
            set_dotted(config, spec.key, copy.deepcopy(value), f"vary.{spec.key}")
        for seed in spec.seeds or [None]:
            label = label_for(spec, index) + ("" if seed is None else f"-s{seed}")
            run_dir = name_inside(out / spec.name, label, "labels" if spec.labels else f"vary.{spec.key}", "run label")
            seeded = copy.deepcopy(config) if seed is None else {**copy.deepcopy(config), "seed": seed}
            seeded["output_dir"] = str(run_dir)
            variants.append(Variant(label, value, recipe, seeded, run_dir))
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise ConfigError("labels", f"run labels must be unique, got {labels}; set `labels` in the spec")
    return variants


def validate_variant(variant: Variant, spec: Spec, cli_max_steps: bool) -> None:
    """Parse the effective recipe exactly as its script will (no model loaded); apply the samples budget."""
    source = f"the recipe of sweep run {variant.label!r}"
    try:  # the effective recipe is already in memory: parsed from the mapping, no file written or read
        recipe = validate(load_recipe(["--dry_run", "true"], config=copy.deepcopy(variant.config), source=source))
    except ConfigError as err:
        raise ConfigError(
            err.field, err.message if source in err.message else f"{err.message} (sweep run {variant.label!r})"
        ) from None
    if spec.samples_budget and not cli_max_steps:
        t = recipe.training
        generations = math.ceil(spec.samples_budget / t.generation_batch_size)
        variant.config["max_steps"] = math.ceil(
            generations * t.steps_per_generation * t.num_iterations / t.gradient_accumulation_steps
        )
        if getattr(t, "dynamic_sampling", False):  # resampling makes samples per step vary: stop on samples instead
            variant.config.setdefault("max_generated_samples", spec.samples_budget)
    if spec.evaluate and spec.evaluate.get("data"):  # the held-out set it is measured on, checked as a recipe's data
        DataSpec.from_dict(evaluation_data(variant.config, spec), "evaluate.data")
    if spec.evaluate and spec.evaluate.get("every_steps"):  # checkpoints to evaluate along the way
        variant.config.update(save_strategy="steps", save_steps=spec.evaluate["every_steps"])


def evaluation_data(config: dict, spec: Spec) -> dict:
    """The data a run is evaluated on: its recipe's `data`, with the spec's `evaluate.data` fields over it, so runs
    trained on different data (a word-length sweep) are all measured on one held-out set."""
    own = config.get("data") or {}
    return {**(mapping_field(own, "data", DATA_FIELDS, DATA_EXAMPLE)), **(spec.evaluate.get("data") or {})}


def render_config(variant: Variant, spec: Spec) -> str:
    """The recipe file a run trains from: its launch line first, so the script can be read back from it."""
    varied = f"recipe {variant.value}" if spec.key == RECIPE_KEY else f"{spec.key} = {variant.value!r}"
    header = (
        f"# Sweep {spec.name!r}, run {variant.label!r}: {varied} (from {variant.recipe}).\n"
        f"#   accelerate launch {variant.script} --config {variant.config_path}\n"
    )
    return header + yaml.safe_dump(variant.config, sort_keys=False, allow_unicode=True)


def select(variants: list[Variant], only: list[str] | None) -> list[Variant]:
    """The variants `--only` names, by label or by label without its seed suffix (`grpo` selects grpo-s1, grpo-s2)."""
    if not only:
        return variants
    chosen = [v for v in variants if v.label in only or seed_group(v.label) in only]
    known = sorted({v.label for v in variants} | {seed_group(v.label) for v in variants})
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ConfigError("--only", f"no run labelled {unknown[0]!r} in this sweep; labels: {', '.join(known)}")
    return chosen
