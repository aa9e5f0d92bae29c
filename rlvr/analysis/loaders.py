"""A run's records (metrics.jsonl, rollouts.jsonl) as series and summary numbers: the one loader plots, report and
sweep share, so a number in a table and the curve in a figure can never disagree.

x axes: `step` (optimizer step), `samples` and `tokens` (cumulative generated completions / completion tokens, the
compute axis: runs with different G, batch or data compare fairly at equal generation cost).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from rlvr.analysis.zero_std import group_outcomes, zero_std_prediction
from rlvr.inputs import ConfigError, load_yaml_mapping, parse_json, read_allowed_pickle, read_json, read_text
from rlvr.metrics.keys import (
    ALL_WRONG,
    BY_LENGTH,
    CURRICULUM_PREFIX,
    ENTROPY,
    EVAL_PREFIX,
    EXACT_MATCH,
    EXACT_SERIES,
    GENERATED_SAMPLES,
    GENERATED_TOKENS,
    GENERATION_SHARE,
    GROUP_SERIES,
    LOSS,
    OVERALL,
    REWARD,
    REWARD_PREFIX,
    STEP_PREFIX,
    STOPPED_EARLY,
    TOTAL,
    TRAIN_RUNTIME,
    UNSCORED_PREFIX,
    components_in,
    ordered,
    reward_key,
    step_key,
    zero_std_key,
    zero_std_side_key,
)
from rlvr.runs import layout

X_AXES = {"step": "step", "samples": GENERATED_SAMPLES, "tokens": GENERATED_TOKENS}
X_LABELS = {
    "step": "optimizer step",
    "samples": "generated samples (cumulative)",
    "tokens": "generated tokens (cumulative)",
}


def count(value) -> int | None:
    """Counters are logged as floats (16.0); tables show them as integers."""
    return None if value is None else int(value)


def reward_series(runs) -> list[str]:
    """`avg_<component>` for every component any of the runs logged (custom rewards included)."""
    return [reward_key(c) for c in ordered(c for run in runs for c in run.components)]


def zero_std_series(runs) -> list[str]:
    return [zero_std_key(c) for c in ordered(c for run in runs for c in run.components)]


def step_metric_series(runs) -> list[str]:
    """Every `step/*` metric (rlvr/metrics/step_metrics.py) any of the runs logged, in first-seen order; a reward's
    `step/unscored/<name>` only where some completion went unscored (else every reward adds a panel of zeros)."""
    keys = dict.fromkeys(key for run in runs for row in run.rows for key in row if key.startswith(STEP_PREFIX))
    unscored = UNSCORED_PREFIX
    return [
        key for key in keys if not key.startswith(unscored) or any(row.get(key) for run in runs for row in run.rows)
    ]


def curriculum_series(runs) -> list[str]:
    """The `curriculum/*` keys any run logged (rlvr/training/curriculum.py): the level, then the weight and the pass
    rate of each level in level order; [] for runs without a curriculum."""
    keys = dict.fromkeys(key for run in runs for row in run.rows for key in row if key.startswith(CURRICULUM_PREFIX))

    def order(key: str):
        kind, _, value = key.removeprefix(CURRICULUM_PREFIX).partition("/")
        return ({"level": 0, "weight": 1, "pass_rate": 2}.get(kind, 3), float(value) if value.isdigit() else 0.0, key)

    return sorted(keys, key=order)


TABLE_READINGS = (
    zero_std_side_key(ALL_WRONG),
    step_key("truncated"),
    step_key("hollow_format"),
    ENTROPY,
)  # when logged


def table_series(run) -> list[str]:
    """The columns of a run's printed table: every reward component, zero-std on total and correctness, the
    `TABLE_READINGS` the run logged (all-wrong flat groups, truncation, hollow format, entropy), time share."""
    zero_std = [zero_std_key(c) for c in (TOTAL, "correctness") if c in run.components]
    readings = [key for key in TABLE_READINGS if any(key in row for row in run.rows)]
    return [*reward_series([run]), *zero_std, *readings, GENERATION_SHARE]


ROLLOUT_SERIES = GROUP_SERIES + EXACT_SERIES


def read_jsonl(path) -> list[dict]:
    """Rows of a JSONL record; a torn line (a run killed mid-write) is read around. A file that is not text, a line
    that is JSON but not an object, or not one whole line: one ConfigError naming the file."""
    rows, torn = [], 0
    for number, line in enumerate(read_text(path, "RUN_DIR").splitlines(), 1):
        try:
            row = parse_json(line)
        except ValueError:
            torn += bool(line.strip())
            continue
        if not isinstance(row, dict):
            raise ConfigError("RUN_DIR", f"{path}: line {number} is JSON but not an object: {line[:40]}")
        rows.append(row)
    if torn and not rows:
        raise ConfigError("RUN_DIR", f"{path}: none of its {torn} line(s) is whole JSON (torn, or not a record)")
    return rows


NUMBER, STRING = "a number", "a string"  # the kinds `typed` checks (or a tuple: one of those values)


def typed(mapping: dict, source, kinds: dict | None = None, default: str | None = None) -> dict:
    """THE check of values read back from a run's files: each key of `kinds` (every other key too, with a `default`)
    holds a number (not a bool), a string, or one of a tuple's values; None (not recorded) passes. A wrong one is one
    ConfigError on RUN_DIR naming the file, as a damaged file is: `"time/total_s": "slow"` never reaches the sum."""
    for key, value in mapping.items():
        kind = (kinds or {}).get(key, default)
        if value is None or kind is None:
            continue
        fits = (
            value in kind
            if isinstance(kind, tuple)
            else isinstance(value, str)
            if kind == STRING
            else isinstance(value, (int, float)) and not isinstance(value, bool)
        )
        if not fits:
            wanted = f"one of {', '.join(map(str, kind))}" if isinstance(kind, tuple) else kind
            raise ConfigError(
                "RUN_DIR", f"{source}: `{key}` is {type(value).__name__} {str(value)[:40]!r}, not {wanted}"
            )
    return mapping


def training_rows(rows: list, source) -> tuple[list[dict], dict]:
    """A record's training rows (a loss or a reward logged) and its closing row (train_runtime; {} while unfinished),
    ours or plain TRL's. A row that is not an object, or a training row without a step, is one ConfigError. Each
    training row takes the `EVAL_PREFIX` keys of the evaluation row logged at its step (TRL's `eval_strategy`), so
    held-out figures read, plot and compare as columns of that step; an evaluation with no training row at its step
    (`eval_on_start`) is left out."""
    training, final, evaluations = [], {}, []
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise ConfigError("RUN_DIR", f"{source}: row {number} is not an object: {str(row)[:40]}")
        if TRAIN_RUNTIME in row:
            final = row
        elif LOSS in row or REWARD in row or any(key.startswith(REWARD_PREFIX) for key in row):
            step = row.get("step")
            if not isinstance(step, (int, float)) or isinstance(step, bool) or not math.isfinite(step):
                raise ConfigError("RUN_DIR", f"{source}: row {number} has no step number ({', '.join(list(row)[:4])})")
            training.append(row)
        elif any(key.startswith(EVAL_PREFIX) for key in row):
            evaluations.append(row)
    for row in [*training, *evaluations]:  # every reading a number (None: not logged), whoever reads it
        typed(row, source, default=NUMBER)
    typed(final, source, {STOPPED_EARLY: STRING}, default=NUMBER)
    by_step = {row["step"]: row for row in training}
    for row in evaluations:
        if row.get("step") in by_step:
            by_step[row["step"]].update({key: value for key, value in row.items() if key.startswith(EVAL_PREFIX)})
    return training, final


@dataclass
class Run:
    """One run directory: its training rows (one per log step), the closing row, and its rollouts on demand."""

    path: Path
    label: str
    rows: list[dict]
    final: dict = field(default_factory=dict)  # train_runtime etc.; empty while the run has not finished
    _group_rows: list[dict] | None = field(default=None, repr=False)

    @property
    def components(self) -> list[str]:
        """The reward components this run logged (its recipe's rewards plus total, binary, penalty)."""
        return components_in(self.rows)

    def evaluation(self, name: str = "after") -> dict:
        """A held-out evaluation the sweep wrote (`eval/after.json`; the base model's `eval/before.json` sits in the
        sweep folder above); {} when there is none. A damaged one is a ConfigError (`read_evaluation`)."""
        for path in (self.path / layout.EVAL_DIR / f"{name}.json", self.path.parent / layout.EVAL_DIR / f"{name}.json"):
            if path.exists():
                return read_evaluation(path)
        return {}

    def checkpoint_evaluations(self) -> list[tuple[int, dict]]:
        """(step, evaluation) of every evaluated checkpoint (`eval/checkpoint-N.json`), in step order."""
        found = []
        for path in (self.path / layout.EVAL_DIR).glob("checkpoint-*.json"):
            if match := layout.CHECKPOINT.match(path.stem):
                found.append((int(match.group(1)), read_evaluation(path)))
        return sorted(found, key=lambda pair: pair[0])

    def read_back(self) -> None:
        """Read every evaluation file of the run now: a damaged one fails before a command writes anything, not
        halfway through its report."""
        self.evaluation("after"), self.evaluation("before"), self.checkpoint_evaluations(), evaluations_in(self.path)

    def held_out(self, name: str = "after") -> dict:
        """The overall block of a held-out evaluation; {} when there is none."""
        return self.evaluation(name).get(OVERALL, {})

    def held_out_curve(self, key: str = EXACT_MATCH) -> list[tuple[int, float]]:
        """(generated samples, held-out `key`) at every evaluated checkpoint (`eval/checkpoint-N.json`, the samples
        logged at step N) and at the end (`eval/after.json`), in sample order; [] without evaluations."""
        samples = {count(row.get("step")): count(row.get(GENERATED_SAMPLES)) for row in self.rows}
        points = []
        for step, evaluation in self.checkpoint_evaluations():
            value = evaluation.get(OVERALL, {}).get(key)
            if samples.get(step) is not None and value is not None:
                points.append((samples[step], value))
        final = self.held_out("after").get(key) if (self.path / layout.EVAL_DIR / "after.json").exists() else None
        if final is not None and self.rows:
            points.append((count(self.rows[-1].get(GENERATED_SAMPLES)), final))
        return sorted(points)

    def held_out_by_length(self, name: str = "after", key: str = EXACT_MATCH) -> dict[str, float]:
        """`key` of a held-out evaluation per word length (difficulty), e.g. {"3": 0.9, ...}; {} when none."""
        return {
            length: block[key] for length, block in self.evaluation(name).get(BY_LENGTH, {}).items() if key in block
        }

    @property
    def finished(self) -> bool:
        return TRAIN_RUNTIME in self.final and STOPPED_EARLY not in self.final

    def rollouts(self) -> list[dict]:
        path = self.path / layout.ROLLOUTS
        return read_jsonl(path) if path.exists() else []

    def group_rows(self) -> list[dict]:
        """Per-step rows of the `ROLLOUT_SERIES`, computed from rollouts.jsonl once."""
        if self._group_rows is None:
            rollouts = self.rollouts()
            self._group_rows = [{**a, **b} for a, b in zip(group_outcomes(rollouts), zero_std_prediction(rollouts))]
        return self._group_rows

    def series(self, key: str, x: str = "step") -> tuple[list[float], list[float]]:
        """(xs, ys) of `key` against x axis `x`, skipping rows that do not carry both."""
        x_key = X_AXES[x]
        source = self.group_rows() if key in ROLLOUT_SERIES else self.rows
        pairs = [(row[x_key], row[key]) for row in source if row.get(x_key) is not None and row.get(key) is not None]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def values(self, key: str) -> list[float]:
        return self.series(key)[1]


def load_run(path, label: str | None = None) -> Run:
    path = Path(path)
    metrics = path / layout.METRICS
    if not metrics.exists():
        raise ConfigError("RUN_DIR", f"{path}: no {layout.METRICS} here (not a run directory)")
    return Run(path, label or path.name, *training_rows(read_jsonl(metrics), metrics))


def read_evaluation(path) -> dict:
    """A held-out evaluation summary (`rlvr.analysis.evaluate` output): a JSON object whose `overall` is an object of
    numbers and whose `by_length` maps each word length to one; anything else is one ConfigError naming the file."""
    summary = read_json(path, "RUN_DIR", dict)
    for part in (OVERALL, BY_LENGTH):
        if not isinstance(summary.get(part, {}), dict):
            raise ConfigError("RUN_DIR", f"{path}: `{part}` is not an object: {str(summary[part])[:40]}")
    if not all(isinstance(block, dict) for block in summary.get(BY_LENGTH, {}).values()):
        raise ConfigError("RUN_DIR", f"{path}: `{BY_LENGTH}` must map each word length to an object")
    for block in [summary.get(OVERALL, {}), *summary.get(BY_LENGTH, {}).values()]:
        typed(block, path, default=NUMBER)
    return summary


def training_args_classes() -> tuple[list, list]:
    """(argument classes, what their fields hold): what a training_args.bin may build (`read_allowed_pickle`): the argument classes of transformers, of TRL's
    trainers and of this repo's, the enums their fields hold, and the two accelerate objects TrainingArguments caches
    (its device and distributed state), each filled in from the file without running its code."""
    # start-up: TRL and the training configs cost seconds to import; only a training_args.bin needs them
    import trl
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType
    from transformers import Seq2SeqTrainingArguments, TrainingArguments
    from transformers.debug_utils import DebugOption
    from transformers.trainer_pt_utils import AcceleratorConfig
    from transformers.trainer_utils import FSDPOption, HubStrategy, IntervalStrategy, SaveStrategy, SchedulerType
    from transformers.training_args import OptimizerNames

    from rlvr.training.config import RLVRConfig, SingleRolloutConfig
    from rlvr.training.dapo import DAPOConfig
    from rlvr.training.ppo import PPOConfig

    arguments = [
        TrainingArguments,
        Seq2SeqTrainingArguments,
        trl.GRPOConfig,
        trl.RLOOConfig,
        trl.SFTConfig,
        trl.DPOConfig,
        trl.KTOConfig,
        trl.RewardConfig,
        trl.DistillationConfig,
        RLVRConfig,
        SingleRolloutConfig,
        DAPOConfig,
        PPOConfig,
    ]
    held = [
        AcceleratorConfig,
        PartialState,
        DistributedType,
        DebugOption,
        FSDPOption,
        HubStrategy,
        IntervalStrategy,
        SaveStrategy,
        SchedulerType,
        OptimizerNames,
    ]
    return arguments, held


def saved_training_args(run_dir) -> tuple[dict, str | None]:
    """(TRL's arguments as the trainer saw them, after CLI overrides, from training_args.bin; why it was not read).
    ({}, None) without the file. The file is a pickle, so it is read without running anything (`read_allowed_pickle`);
    one that holds anything else, or is damaged, is ({}, one line naming it): the caller goes on without the settings."""
    path = Path(run_dir) / layout.TRAINING_ARGS
    if not path.exists():
        return {}, None
    arguments, held = training_args_classes()
    try:
        args = read_allowed_pickle(path, "RUN_DIR", [*arguments, *held])
    except ConfigError as err:
        return {}, err.message
    if not isinstance(args, tuple(arguments)):
        return {}, f"{path} not read: it holds {type(args).__name__}, not a trainer's arguments"
    names = {f.name for f in dataclasses.fields(args)}
    return {
        name: value.value if isinstance(value, enum.Enum) else value
        for name, value in vars(args).items()
        if name in names
    }, None


def find_run_dirs(path) -> list[Path]:
    """A run directory itself, or the run directories one level below it (a sweep)."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError("RUN_DIR", f"{path}: no such directory")
    if (path / layout.METRICS).exists():
        return [path]
    found = sorted((p for p in path.iterdir() if (p / layout.METRICS).exists()), key=natural_key)
    if not found:
        raise ConfigError("RUN_DIR", f"{path}: no {layout.METRICS} in it or in its subdirectories")
    return found


def natural_key(path: Path) -> list:
    """`g-2` before `g-16`, `beta0.04` before `beta0.1`: numbers in names (decimals too) compare as numbers."""
    parts = re.split(r"(\d+(?:\.\d+)?)", path.name)
    return [float(t) if i % 2 else t for i, t in enumerate(parts)]


def load_runs(paths) -> list[Run]:
    """Runs from run or sweep directories; labels are directory names, made unique with the parent's if needed."""
    dirs = [d for p in paths for d in find_run_dirs(p)]
    names = [d.name for d in dirs]
    return [load_run(d, d.name if names.count(d.name) == 1 else f"{d.parent.name}/{d.name}") for d in dirs]


# ---- summary numbers -------------------------------------------------------------------------------------------


EVALUATION_PLACES = ("*.json", "eval/*.json", "before_after/*.json")  # where a run folder keeps evaluations


def evaluations_in(run_dir) -> list[tuple[Path, dict]]:
    """Every held-out evaluation summary (`rlvr.analysis.evaluate` output: a JSON with `overall` and `by_length`) kept
    in a run folder: the sweep's `eval/after.json`, before_after's `before.json` / `after.json`, or an evaluate
    `--output` written into the folder; then the sweep's base-model `eval/before.json` one folder up."""
    run_dir = Path(run_dir)
    paths = [p for pattern in EVALUATION_PLACES for p in sorted(run_dir.glob(pattern))]
    paths += [run_dir.parent / "eval" / "before.json"]
    found = []
    for path in dict.fromkeys(paths):
        if not path.exists():
            continue
        if path.parent == run_dir:  # the folder's own *.json (run.json, code.json, ...) need not be evaluations
            try:
                summary = read_evaluation(path)
            except ConfigError:
                continue
        else:  # eval/ and before_after/ hold evaluations (and the pairing): a damaged file there is an error
            summary = read_evaluation(path)
        if OVERALL in summary and BY_LENGTH in summary:
            found.append((path, summary))
    return found


# ---- tables ----------------------------------------------------------------------------------------------------


def newest_trainer_state(path: Path) -> Path | None:
    """trainer_state.json at the folder's root, else in its highest-numbered checkpoint-*/ (TRL writes it there)."""
    if (path / layout.TRAINER_STATE).exists():
        return path / layout.TRAINER_STATE
    checkpoints = [
        (int(m.group(1)), p)
        for p in path.iterdir()
        if p.is_dir() and (m := layout.CHECKPOINT.match(p.name)) and (p / layout.TRAINER_STATE).exists()
    ]
    return max(checkpoints)[1] / layout.TRAINER_STATE if checkpoints else None


def load_trl_run(path: Path, state_file: Path) -> Run:
    """A plain TRL folder as a `Run`: log_history's training rows (those with a loss or a reward), the closing row
    (train_runtime) as `final`."""
    state = read_json(state_file, "RUN_DIR", dict)
    if "log_history" not in state:
        raise ConfigError("RUN_DIR", f"{state_file}: not a trainer_state.json (no log_history)")
    history = state["log_history"]
    if not isinstance(history, list):
        raise ConfigError("RUN_DIR", f"{state_file}: log_history is not a list")
    return Run(path, path.name, *training_rows(history, f"{state_file} log_history"))


def load_any_run(path, loaded: Run | None = None) -> tuple[Run, str, dict, list[str]]:
    """(run, where its rows came from, its settings, why a settings file was not read): ours from metrics.jsonl +
    config.yaml (`loaded`: its rows as the caller already read them), a plain TRL folder from trainer_state.json +
    training_args.bin (one that cannot be read safely is named in the last item, and the settings are {}). Bad
    input is a ConfigError on RUN_DIR."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError("RUN_DIR", f"{path}: no such directory")
    unread = []
    if (path / layout.METRICS).exists():
        run, source = loaded or load_run(path), "rlvr run (metrics.jsonl)"
        config = path / layout.CONFIG
        settings = load_yaml_mapping(config, "RUN_DIR") if config.exists() else {}
    elif state_file := newest_trainer_state(path):
        run, source = load_trl_run(path, state_file), f"plain TRL ({state_file.relative_to(path)})"
        settings = {}
        for folder in dict.fromkeys((state_file.parent, path)):  # the checkpoint's, else the final save's
            settings, why = saved_training_args(folder)
            unread += [why] if why else []
            if settings:
                break
    else:
        raise ConfigError(
            "RUN_DIR",
            f"{path}: neither {layout.METRICS} nor {layout.TRAINER_STATE} (in it or in a "
            "checkpoint-*/ folder): not a run directory",
        )
    if not run.rows:
        raise ConfigError("RUN_DIR", f"{path}: no training steps logged yet")
    return run, source, settings if isinstance(settings, dict) else {}, unread
