"""Ablation sweeps: one base recipe, one field varied, every value trained in turn (per seed) and compared at equal compute.

    python -m rlvr.analysis.sweep sweeps/group_size.yaml [--max_steps 2] [--out runs/sweeps] [--dry_run] [--any_field value]

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

Every variant is validated before the first one trains (a bad field fails in seconds, naming it). Runs are sequential
subprocesses of the script of the recipe's `algorithm:` (recipes/<algorithm>.py); each writes `recipe.yaml` (the recipe it launches; the runner records what ran as `config.yaml`) and
`train.log` into its directory. Finished runs are skipped, so rerunning the command resumes a sweep; a run that
another sweep under the same --out already trained from the same recipe is linked, not trained twice (evaluated
another way, it keeps its own `eval/`). At the end the sweep report (rlvr.analysis.report) overlays all runs against generated samples and writes summary.md/.csv/.json.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlvr.analysis.records import load_run, load_runs, summarize, summary_table, text_table
from rlvr.analysis.report import CONFIG_NAME, SPEC_NAME, build_report
from rlvr.cli import ArgumentParser, ConfigError, cli, load_recipe_yaml, load_yaml_mapping, positive_int, reject_unknown_keys

SWEEP_RECIPE_NAME = "recipe.yaml"
REPO = Path(__file__).resolve().parents[2]
SPEC_FIELDS = ("name", "base", "vary", "fixed", "labels", "samples_budget", "seeds", "evaluate")
EVAL_FIELDS = {"num_samples": 8, "k": [1, 8], "num_prompts": None, "data": None, "temperature": None}  # the spec's `evaluate:` keys and defaults
EVAL_DIR = "eval"  # <run>/eval/after.json; the base model's <sweep>/eval/before.json
RECIPE_KEY = "recipe"
LAUNCHERS = ("python", "accelerate", "inprocess")  # inprocess: same interpreter, no log file (tests)


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
        return self.run_dir / SWEEP_RECIPE_NAME


def load_spec(path) -> Spec:
    """Parse and check a spec; every problem is one line naming the spec field."""
    raw = load_yaml_mapping(path, "SPEC", "a mapping with name, vary and base")
    text = Path(path).read_text()
    reject_unknown_keys(raw, SPEC_FIELDS, "sweep spec field")
    if not isinstance(raw.get("name"), str) or not raw["name"].strip():
        raise ConfigError("name", "the sweep needs a name (its output folder)")
    vary = raw.get("vary")
    if not isinstance(vary, dict) or len(vary) != 1:
        raise ConfigError("vary", "must map exactly one field to its list of values, e.g. {num_generations: [2, 4]}")
    (key, values), = vary.items()
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
        if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
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
        if not isinstance(n, int) or n < 1 or not isinstance(ks, list) or not all(isinstance(k, int) and 1 <= k <= n for k in ks):
            raise ConfigError("evaluate.k", f"each k must be an integer in [1, num_samples={n}], got {ks!r}")
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
    variants = []
    for index, value in enumerate(spec.values):
        recipe = value if spec.key == RECIPE_KEY else spec.base
        config = load_recipe_yaml(recipe, "base" if spec.key != RECIPE_KEY else f"vary.{RECIPE_KEY}")  # `base:` resolved
        for source, entries in (("fixed", spec.fixed), ("--", overrides)):
            for key, entry in entries.items():
                set_dotted(config, key, copy.deepcopy(entry), f"{source}.{key}" if source == "fixed" else f"--{key}")
        if spec.key != RECIPE_KEY:
            set_dotted(config, spec.key, copy.deepcopy(value), f"vary.{spec.key}")
        for seed in spec.seeds or [None]:
            label = label_for(spec, index) + ("" if seed is None else f"-s{seed}")
            seeded = copy.deepcopy(config) if seed is None else {**copy.deepcopy(config), "seed": seed}
            seeded["output_dir"] = str(out / spec.name / label)
            variants.append(Variant(label, value, recipe, seeded, out / spec.name / label))
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise ConfigError("labels", f"run labels must be unique, got {labels}; set `labels` in the spec")
    return variants


def validate_variant(variant: Variant, spec: Spec, cli_max_steps: bool) -> None:
    """Parse the effective recipe exactly as its script will (no model loaded); apply the samples budget."""
    from rlvr.training.config import parse_args, validate

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CONFIG_NAME
        path.write_text(yaml.safe_dump(variant.config, sort_keys=False))
        try:
            recipe = validate(*parse_args(["--config", str(path), "--dry_run", "true"]))
        except ConfigError as err:
            message = err.message.replace(str(path), f"the recipe of sweep run {variant.label!r}")
            raise ConfigError(err.field, message if message != err.message else f"{message} (sweep run {variant.label!r})") from None
    if spec.samples_budget and not cli_max_steps:
        t = recipe.training
        generations = math.ceil(spec.samples_budget / t.generation_batch_size)
        variant.config["max_steps"] = math.ceil(
            generations * t.steps_per_generation * t.num_iterations / t.gradient_accumulation_steps
        )
        if getattr(t, "dynamic_sampling", False):  # resampling makes samples per step vary: stop on samples instead
            variant.config.setdefault("max_generated_samples", spec.samples_budget)


def render_config(variant: Variant, spec: Spec) -> str:
    """The recipe file a run trains from: its launch line first, so the script can be read back from it."""
    varied = f"recipe {variant.value}" if spec.key == RECIPE_KEY else f"{spec.key} = {variant.value!r}"
    header = (
        f"# Sweep {spec.name!r}, run {variant.label!r}: {varied} (from {variant.recipe}).\n"
        f"#   accelerate launch {variant.script} --config {variant.config_path}\n"
    )
    return header + yaml.safe_dump(variant.config, sort_keys=False, allow_unicode=True)


def parsed_fields(config: dict) -> list[dict]:
    """The recipe as its script parses it: (recipe, training, model) arguments as dicts, every default filled in, where
    the run writes left out."""
    import dataclasses

    from rlvr.training.config import parse_args

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CONFIG_NAME
        path.write_text(yaml.safe_dump({**config, "output_dir": "RUN"}, sort_keys=False))
        parsed = parse_args(["--config", str(path), "--dry_run", "true"])
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
    return {**spec.evaluate, "temperature": parsed_fields(config)[1]["temperature"] if temperature is None else temperature}


def is_linked(run_dir: Path) -> bool:
    """A shared run: the folder itself links to another run, or holds links to its files (and its own evaluation)."""
    return run_dir.is_symlink() or (run_dir / SWEEP_RECIPE_NAME).is_symlink()


def find_shared_run(variant: Variant, spec: Spec, out: Path) -> tuple[Path, bool] | None:
    """A finished run anywhere under <out> (another sweep, or this one) that trained from this variant's recipe, and
    whether that sweep evaluated it the same way. The sweep links to it instead of training it again (the GRPO
    baseline of the KL sweep is the reference sweep's GRPO run, seed for seed). Only real runs are shared from."""
    candidates = []
    for recipe in sorted(out.glob(f"*/*/{SWEEP_RECIPE_NAME}")):
        run_dir = recipe.parent
        if is_linked(run_dir) or run_dir == variant.run_dir or not (run_dir / "metrics.jsonl").exists():
            continue
        old = yaml.safe_load(recipe.read_text()) or {}
        if (old.get("seed"), old.get("max_steps")) == (variant.config.get("seed"), variant.config.get("max_steps")):
            candidates.append((run_dir, old))  # cheap filter first: parsing is the slow part
    if not candidates:
        return None
    identity = run_identity(variant.config)
    for run_dir, old in candidates:
        if run_identity(old) != identity or not load_run(run_dir).finished:
            continue
        try:
            other = load_spec(run_dir.parent / SPEC_NAME)
        except (ConfigError, OSError):
            return run_dir, False
        return run_dir, evaluation_of(other, old) == evaluation_of(spec, variant.config)
    return None


def share(variant: Variant, source: Path, same_evaluation: bool) -> None:
    """Link the variant's folder to `source` (relative links, so the sweeps folder can move as a whole). Evaluated
    the same way, the whole folder is a link; evaluated another way (a word-length sweep's own held-out set), the
    folder links to each of the run's files and keeps its own `eval/`."""
    import os

    variant.run_dir.parent.mkdir(parents=True, exist_ok=True)
    if same_evaluation:
        variant.run_dir.symlink_to(os.path.relpath(source, variant.run_dir.parent), target_is_directory=True)
        return
    variant.run_dir.mkdir()
    for entry in sorted(source.iterdir()):
        if entry.name != EVAL_DIR:
            (variant.run_dir / entry.name).symlink_to(os.path.relpath(entry, variant.run_dir),
                                                      target_is_directory=entry.is_dir())


def clear_stale_link(variant: Variant) -> None:
    """A shared run whose source was deleted: remove the link (or the folder of links and its own eval/) so the
    variant can train afresh. Only links are removed; a real run folder is never touched here."""
    if is_linked(variant.run_dir) and not variant.config_path.exists():
        variant.run_dir.unlink() if variant.run_dir.is_symlink() else shutil.rmtree(variant.run_dir)


def status(variant: Variant) -> str:
    """`done` (finished with this very config) or `pending`; a folder holding another config is an error. A linked
    folder (a shared run) is done when what it links to trained from the same recipe."""
    linked = is_linked(variant.run_dir)
    if not variant.config_path.exists():
        return "pending"  # never trained, or a link to a run since deleted (cleared by `clear_stale_link`)
    old = yaml.safe_load(variant.config_path.read_text()) or {}
    if linked and run_identity(old) == run_identity(variant.config):
        return "done" if load_run(variant.run_dir).finished else "pending"
    if old != variant.config:
        changed = next(k for k in {**old, **variant.config} if old.get(k) != variant.config.get(k))
        raise ConfigError(changed, f"{variant.run_dir} holds a run with {changed}={old.get(changed)!r}, the sweep "
                                   f"now asks {variant.config.get(changed)!r}: delete that folder or use another --out")
    if (variant.run_dir / "metrics.jsonl").exists() and load_run(variant.run_dir).finished:
        return "done"
    return "pending"


def launch(variant: Variant, spec: Spec, launcher: str) -> int:
    """Train one variant; returns the exit status. Unfinished runs resume from their last checkpoint, if any."""
    variant.run_dir.mkdir(parents=True, exist_ok=True)
    variant.config_path.write_text(render_config(variant, spec))
    # A fresh start moves earlier records aside, a resume trims them: rlvr.training.run_files.start_record, in the callbacks.
    args = ["--config", str(variant.config_path), "--resume_from_checkpoint", "true"]
    if launcher == "inprocess":
        from rlvr.training.runner import main

        main(args)
        return 0
    script = str(REPO / variant.script)
    prefix = [sys.executable] if launcher == "python" else [sys.executable, "-m", "accelerate.commands.launch"]
    with (variant.run_dir / "train.log").open("a") as log:
        log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join([*prefix, script, *args])}\n")
        log.flush()
        return subprocess.run([*prefix, script, *args], check=False, stdout=log, stderr=subprocess.STDOUT).returncode


def eval_recipe(config: dict, spec: Spec, target: Path) -> Path:
    """The recipe evaluation reads: the run's own, with the spec's `evaluate.data` (if any) merged over its data, so
    runs trained on different data (a word-length sweep) are all measured on one held-out set."""
    recipe = copy.deepcopy(config)
    if spec.evaluate.get("data"):
        recipe["data"] = {**recipe.get("data", {}), **spec.evaluate["data"]}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return target


def evaluate_model(model: str, config: dict, spec: Spec, out_dir: Path, name: str) -> dict:
    """Held-out pass@k of one model, written to <out_dir>/eval/<name>.json (skipped when already there)."""
    from rlvr.analysis.evaluate import evaluate

    output = out_dir / EVAL_DIR / f"{name}.json"
    if output.exists():
        return json.loads(output.read_text())
    recipe = eval_recipe(config, spec, out_dir / EVAL_DIR / f"{name}.recipe.yaml")
    options = spec.evaluate
    return evaluate(str(recipe), model_path=model, num_samples=options["num_samples"], ks=tuple(options["k"]),
                    num_prompts=options["num_prompts"], output=str(output),
                    temperature=options["temperature"])  # None: each run's own; a number: one for all runs


def select(variants: list[Variant], only: list[str] | None) -> list[Variant]:
    """The variants `--only` names, by label or by label without its seed suffix (`grpo` selects grpo-s1, grpo-s2)."""
    if not only:
        return variants
    chosen = [v for v in variants if v.label in only or v.label.rsplit("-s", 1)[0] in only]
    known = sorted({v.label for v in variants} | {v.label.rsplit("-s", 1)[0] for v in variants})
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ConfigError("--only", f"no run labelled {unknown[0]!r} in this sweep; labels: {', '.join(known)}")
    return chosen


def run_sweep(spec_path, out="runs/sweeps", overrides: dict | None = None, launcher: str = "python",
              dry_run: bool = False, last_k: int = 5, only: list[str] | None = None) -> dict:
    """Validate every variant, train the pending ones in order, evaluate them, then write the sweep report.

    Returns {"dir", "status" (label -> done/skipped/shared/failed/planned), "report"}.
    """
    if launcher not in LAUNCHERS:
        raise ConfigError("--launcher", f"must be one of {LAUNCHERS}, got {launcher!r}")
    spec = load_spec(spec_path)
    overrides = overrides or {}
    variants = select(plan(spec, Path(out), overrides), only)
    for variant in variants:
        validate_variant(variant, spec, "max_steps" in overrides)
    states = {v.label: status(v) for v in variants}
    sources = {v.label: find_shared_run(v, spec, Path(out)) for v in variants
               if states[v.label] == "pending" and not v.run_dir.exists()}
    sweep_dir = Path(out) / spec.name
    for v in variants:
        state = f"shares {sources[v.label][0]}" if sources.get(v.label) else states[v.label]
        print(f"[sweep] {v.label}: {v.script}, max_steps {v.config.get('max_steps')} -> {v.run_dir} ({state})",
              flush=True)
    if dry_run:
        return {"dir": sweep_dir, "status": {label: "planned" for label in states}, "report": None}

    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / SPEC_NAME).write_text(spec.text)
    for variant in variants:
        clear_stale_link(variant)
    results = {}
    for i, variant in enumerate(variants, 1):
        if states[variant.label] == "done":
            results[variant.label] = "skipped"
            continue
        if shared := sources.get(variant.label):
            share(variant, *shared)
            results[variant.label] = "shared"
            print(f"[sweep] {variant.label}: shares {shared[0]} (the same recipe; "
                  f"{'evaluated the same way' if shared[1] else 'evaluated here'}): not trained again", flush=True)
            continue
        print(f"[sweep] {i}/{len(variants)} {variant.label}: training (log {variant.run_dir / 'train.log'})", flush=True)
        start = time.perf_counter()
        code = launch(variant, spec, launcher)
        results[variant.label] = "done" if code == 0 else "failed"
        print(f"[sweep] {variant.label}: {results[variant.label]} in {time.perf_counter() - start:.0f} s"
              + (f" (exit {code}; see {variant.run_dir / 'train.log'})" if code else ""), flush=True)
        if code:
            print(tail(variant.run_dir / "train.log"), flush=True)
    if spec.evaluate:  # the base model once per sweep, then every finished run (each skipped once written)
        evaluate_model(variants[0].config["model_name_or_path"], variants[0].config, spec, sweep_dir, "before")
        for variant in variants:
            if results.get(variant.label) in ("done", "skipped", "shared"):
                after = evaluate_model(str(variant.run_dir), variant.config, spec, variant.run_dir, "after")
                print(f"[sweep] {variant.label}: held-out exact match {after['overall']['exact_match']:.3f}", flush=True)

    report = None
    if any((v.run_dir / "metrics.jsonl").exists() for v in variants):
        report = build_report(sweep_dir, last_k=last_k)
        print(text_table(*summary_table(summarize(load_runs([sweep_dir]), last_k))))
        print(f"[sweep] report: {report}")
    return {"dir": sweep_dir, "status": results, "report": report}


def tail(path: Path, lines: int = 5) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def parse_overrides(extra: list[str]) -> dict:
    """`--field value` pairs (or `--field=value`) after the sweep's own flags; values read as YAML (2, true, 0.7)."""
    pairs, items = {}, list(extra)
    while items:
        flag = items.pop(0)
        if not flag.startswith("--"):
            raise ConfigError(flag, "expected --field value")
        if "=" in flag:
            key, value = flag[2:].split("=", 1)
        elif items and not items[0].startswith("--"):
            key, value = flag[2:], items.pop(0)
        else:
            raise ConfigError(flag, "needs a value")
        try:
            pairs[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"--{key}", f"cannot read {value!r} as a YAML value") from None
    return pairs


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)  # unknown flags are recipe overrides
    parser.add_argument("spec", help="sweep spec YAML (see sweeps/)")
    parser.add_argument("--out", default="runs/sweeps", help="runs go to <out>/<name>/<label>/")
    parser.add_argument("--launcher", default="python", choices=LAUNCHERS, help="how each run starts")
    parser.add_argument("--last_k", type=positive_int, default=5, help="generation steps averaged for final_* numbers")
    parser.add_argument("--dry_run", action="store_true", help="validate every variant and print the plan")
    parser.add_argument("--only", nargs="+", default=None, help="train only these run labels (seed suffix optional)")
    args, extra = parser.parse_known_args(argv)
    result = run_sweep(args.spec, args.out, parse_overrides(extra), args.launcher, args.dry_run, args.last_k, args.only)
    if "failed" in result["status"].values():
        failed = [label for label, state in result["status"].items() if state == "failed"]
        print(f"error: runs failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    return result


if __name__ == "__main__":
    cli(main)
