"""A run's records (metrics.jsonl, rollouts.jsonl) as series and summary numbers: the one loader plots, report and
sweep share, so a number in a table and the curve in a figure can never disagree.

x axes: `step` (optimizer step), `samples` and `tokens` (cumulative generated completions / completion tokens, the
compute axis: runs with different G, batch or data compare fairly at equal generation cost).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from rlvr import run_layout as layout
from rlvr.cli import ConfigError
from rlvr.metrics.keys import (
    CURRICULUM_PREFIX,
    REWARD_PREFIX,
    STEP_PREFIX,
    STOPPED_EARLY,
    TIME_PHASES,
    components_in,
    ordered,
    reward_key,
    zero_std_key,
)

X_AXES = {"step": "step", "samples": "generated_samples", "tokens": "generated_tokens"}
X_LABELS = {"step": "optimizer step", "samples": "generated samples (cumulative)", "tokens": "generated tokens (cumulative)"}
# From rollouts.jsonl: why a correctness group has no contrast (all wrong = too hard, all correct = solved).
GROUP_SERIES = ("groups/all_wrong", "groups/all_correct", "groups/mixed")


def reward_series(runs) -> list[str]:
    """`avg_<component>` for every component any of the runs logged (custom rewards included)."""
    return [reward_key(c) for c in ordered(c for run in runs for c in run.components)]


def zero_std_series(runs) -> list[str]:
    return [zero_std_key(c) for c in ordered(c for run in runs for c in run.components)]


def step_metric_series(runs) -> list[str]:
    """Every `step/*` metric (rlvr/metrics/step_metrics.py) any of the runs logged, in first-seen order."""
    return list(dict.fromkeys(key for run in runs for row in run.rows for key in row if key.startswith(STEP_PREFIX)))


def curriculum_series(runs) -> list[str]:
    """The `curriculum/*` keys any run logged (rlvr/training/curriculum.py): the level, then the weight and the pass
    rate of each level in level order; [] for runs without a curriculum."""
    keys = dict.fromkeys(key for run in runs for row in run.rows for key in row if key.startswith(CURRICULUM_PREFIX))

    def order(key: str):
        kind, _, value = key.removeprefix(CURRICULUM_PREFIX).partition("/")
        return ({"level": 0, "weight": 1, "pass_rate": 2}.get(kind, 3), float(value) if value.isdigit() else 0.0, key)

    return sorted(keys, key=order)


TABLE_READINGS = ("zero_std_side/all_wrong", "step/truncated", "step/hollow_format", "entropy")  # when logged


def table_series(run) -> list[str]:
    """The columns of a run's printed table: every reward component, zero-std on total and correctness, the
    `TABLE_READINGS` the run logged (all-wrong flat groups, truncation, hollow format, entropy), time share."""
    zero_std = [zero_std_key(c) for c in ("total", "correctness") if c in run.components]
    readings = [key for key in TABLE_READINGS if any(key in row for row in run.rows)]
    return [*reward_series([run]), *zero_std, *readings, "time/generation_share"]


# From rollouts.jsonl: zero-std groups of exact match (correctness == 1), observed and predicted (`zero_std_prediction`).
EXACT_SERIES = ("zero_std_exact/observed", "zero_std_exact/predicted_self", "zero_std_exact/predicted_peers")
ROLLOUT_SERIES = GROUP_SERIES + EXACT_SERIES


def read_jsonl(path) -> list[dict]:
    """Rows of a JSONL file; a torn last line (a run killed mid-write) is dropped, not fatal."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


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
        sweep folder above); {} when there is none."""
        for path in (self.path / layout.EVAL_DIR / f"{name}.json", self.path.parent / layout.EVAL_DIR / f"{name}.json"):
            if path.exists():
                return json.loads(path.read_text())
        return {}

    def held_out(self, name: str = "after") -> dict:
        """The overall block of a held-out evaluation; {} when there is none."""
        return self.evaluation(name).get("overall", {})

    def held_out_curve(self, key: str = "exact_match") -> list[tuple[int, float]]:
        """(generated samples, held-out `key`) at every evaluated checkpoint (`eval/checkpoint-N.json`, the samples
        logged at step N) and at the end (`eval/after.json`), in sample order; [] without evaluations."""
        samples = {count(row.get("step")): count(row.get("generated_samples")) for row in self.rows}
        points = []
        for path in (self.path / layout.EVAL_DIR).glob("checkpoint-*.json"):
            step = int(path.stem.removeprefix("checkpoint-"))
            value = json.loads(path.read_text()).get("overall", {}).get(key)
            if samples.get(step) is not None and value is not None:
                points.append((samples[step], value))
        final = self.held_out("after").get(key) if (self.path / layout.EVAL_DIR / "after.json").exists() else None
        if final is not None and self.rows:
            points.append((count(self.rows[-1].get("generated_samples")), final))
        return sorted(points)

    def held_out_by_length(self, name: str = "after", key: str = "exact_match") -> dict[str, float]:
        """`key` of a held-out evaluation per word length (difficulty), e.g. {"3": 0.9, ...}; {} when none."""
        return {length: block[key] for length, block in self.evaluation(name).get("by_length", {}).items()
                if key in block}

    @property
    def finished(self) -> bool:
        return "train_runtime" in self.final and STOPPED_EARLY not in self.final

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
    rows, final = [], {}
    for row in read_jsonl(metrics):
        if "train_runtime" in row:
            final = row
        elif "loss" in row or any(key.startswith(REWARD_PREFIX) for key in row):
            rows.append(row)
    return Run(path, label or path.name, rows, final)


def saved_training_args(run_dir) -> dict:
    """TRL's arguments as the trainer saw them (after CLI overrides), from training_args.bin; {} if absent."""
    path = Path(run_dir) / "training_args.bin"
    if not path.exists():
        return {}
    import torch  # only for this pickle: reading records needs no torch otherwise

    return torch.load(path, weights_only=False).to_dict()


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


def rollout_steps(rollouts: list[dict]) -> list[tuple[dict, list[list[dict]]]]:
    """Per generation step, in order: the row's x values and the step's prompt groups (each a list of its rollouts).

    A rollout's `step` is the optimizer step it was generated for, numbered as metrics.jsonl numbers it (1-based);
    `generated_samples` / `generated_tokens` count every rollout up to that step, as the trainer's ledger does.
    DAPO's extra rounds are groups of the same step.
    """
    groups = defaultdict(list)
    for r in rollouts:
        groups[(r["step"], r.get("round", 0), r["group"])].append(r)
    by_step = defaultdict(list)
    for (step, _, _), members in groups.items():
        by_step[step].append(members)
    samples, tokens = defaultdict(int), defaultdict(int)
    for r in rollouts:
        samples[r["step"]] += 1
        tokens[r["step"]] += r.get("completion_tokens") or 0
    steps, seen_samples, seen_tokens = [], 0, 0
    for step in sorted(by_step):
        seen_samples += samples[step]
        seen_tokens += tokens[step]
        x = {"step": step, "generated_samples": seen_samples, "generated_tokens": seen_tokens}
        steps.append((x, by_step[step]))
    return steps


def group_outcomes(rollouts: list[dict]) -> list[dict]:
    """Per optimizer step, the fraction of prompt groups whose correctness is all 0, all 1, or mixed."""
    rows = []
    for x, groups in rollout_steps(rollouts):
        scored = [s for s in ([r.get("correctness") for r in g if r.get("correctness") is not None] for g in groups) if s]
        n = len(scored) or 1
        rows.append({
            **x,
            "groups/all_wrong": sum(all(v == 0 for v in s) for s in scored) / n,
            "groups/all_correct": sum(all(v == 1 for v in s) for s in scored) / n,
            "groups/mixed": sum(len(set(s)) > 1 for s in scored) / n,
        })
    return rows


def flat_probability(p: float, num_generations: int) -> float:
    """P(all G outcomes equal) for G independent 0/1 draws with success probability p: p^G + (1 - p)^G."""
    return p**num_generations + (1 - p) ** num_generations


def exact_match(rollout: dict) -> bool:
    """A rollout's exact match: its `exact` field (the extracted answer is exactly right), written by runs since it
    exists; older rollouts fall back to correctness == 1.0, which a wrong answer can reach (step/false_full_credit)."""
    return bool(rollout["exact"]) if "exact" in rollout else rollout.get("correctness") == 1.0


def zero_std_prediction(rollouts: list[dict]) -> list[dict]:
    """Per step, the fraction of groups with zero std on exact match (`exact_match`), observed and predicted.

    The closed form p^G + (1 - p)^G holds for 0/1 outcomes. Correctness has partial credit: the logged
    `zero_std_frac/correctness` counts a group scoring 0.5 G times as flat and a group of 0.2s and 0.5s as mixed,
    neither of which a pass rate can predict. So the comparison is made on exact match (correctness == 1), 0/1:
      * `zero_std_exact/observed`: groups whose G exact-match outcomes are all equal (all 0 or all 1);
      * `zero_std_exact/predicted_self`: p = the group's own exact-match rate k/G. Biased upward: x^G is convex, so
        E[(k/G)^G] > p^G (for G = 2 the prediction is too high by p(1 - p)); a flat group predicts itself as 1;
      * `zero_std_exact/predicted_peers`: p = the exact-match rate of the step's other groups at the same difficulty
        (all other groups where none shares it), leave-one-group-out, so independent of the group's own draws. Its
        plug-in bias is that of the pool's sample, which shrinks as the pool grows; pooling prompts of different
        pass rates errs the other way (mean(p_i^G) >= mean(p_i)^G).
    Against the observed series, they say how well the picture of G independent draws at a per-prompt pass rate holds. A group flat on correctness is flat on exact match too (all 1, or all 0), so the
    logged `zero_std_frac/correctness` is at most `zero_std_exact/observed`; the gap is the groups that differ only
    in partial credit.
    """
    rows = []
    for x, groups in rollout_steps(rollouts):
        outcomes = []  # (difficulty, exact-match outcomes) per scored group
        for g in groups:
            exact = [float(exact_match(r)) for r in g if r.get("correctness") is not None]
            if exact:
                outcomes.append((g[0].get("difficulty"), exact))
        row = {**x, **dict.fromkeys(EXACT_SERIES)}
        if outcomes:
            row["zero_std_exact/observed"] = mean([float(len(set(e)) == 1) for _, e in outcomes])
            row["zero_std_exact/predicted_self"] = mean([flat_probability(sum(e) / len(e), len(e)) for _, e in outcomes])
            row["zero_std_exact/predicted_peers"] = mean([
                flat_probability(peers, len(e)) for i, (_, e) in enumerate(outcomes)
                if (peers := peer_rate(outcomes, i)) is not None
            ])
        rows.append(row)
    return rows


def peer_rate(outcomes: list[tuple], index: int) -> float | None:
    """Exact-match rate of the other groups at group `index`'s difficulty, or of all other groups if none shares it."""
    others = [o for i, o in enumerate(outcomes) if i != index]
    same = [e for difficulty, e in others if difficulty == outcomes[index][0]]
    pool = [v for e in (same or [e for _, e in others]) for v in e]
    return sum(pool) / len(pool) if pool else None


# ---- summary numbers -------------------------------------------------------------------------------------------

def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def tail_mean(values, last_k: int) -> float | None:
    """Mean of the last k logged values: a final score less noisy than the last step alone."""
    return mean(list(values)[-last_k:])


def normalized_auc(xs, ys, x_end: float | None = None) -> float | None:
    """Trapezoid area under y(x) from the first x to `x_end` (default: the last x), divided by that width.

    The result is the curve's average height: 1.0 means correct from the first sample on. Comparing runs at one
    shared `x_end` (in generated samples) compares them at equal generation compute.
    """
    if not xs:
        return None
    x_end = xs[-1] if x_end is None else x_end
    if x_end <= xs[0]:
        return ys[0]
    area = 0.0
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x0 >= x_end:
            break
        if x1 > x_end:  # cut the last segment at x_end, interpolating y there
            y1 = y0 + (y1 - y0) * (x_end - x0) / (x1 - x0)
            x1 = x_end
        area += (x1 - x0) * (y0 + y1) / 2
    return area / (min(x_end, xs[-1]) - xs[0])


def time_totals(run: Run) -> dict[str, float]:
    """Seconds per phase summed over the run, the total, and generation's share of it."""
    totals = {phase: sum(run.values(f"time/{phase}_s")) for phase in TIME_PHASES}
    totals["total"] = sum(run.values("time/total_s"))
    totals["generation_share"] = totals["generation"] / totals["total"] if totals["total"] else None
    return totals


def wall_time(run: Run) -> float:
    """Training wall time: TRL's train_runtime when the run finished, else the summed step times so far."""
    return run.final.get("train_runtime") or time_totals(run)["total"]


def last(run: Run, key: str):
    values = run.values(key)
    return values[-1] if values else None


def samples_to_reach(run: Run, threshold: float, window: int = 5) -> int | None:
    """Generated samples when avg_correctness, averaged over `window` logged steps, first reaches `threshold`. Only
    full windows count: one lucky first batch (64 samples of easy words) is not "reached"."""
    xs, ys = run.series("avg_correctness", "samples")
    for i in range(min(window, len(ys)) - 1, len(ys)):
        if mean(ys[max(0, i - window + 1) : i + 1]) >= threshold:
            return count(xs[i])
    return None


REACH_CORRECTNESS = 0.85  # the fixed correctness level whose samples-to-reach the summaries report


def samples_to_reach_held_out(run: Run, threshold: float) -> int | None:
    """Generated samples at the first evaluated checkpoint (or the end) whose held-out exact match reaches
    `threshold`; None when none does or the run has no held-out curve. Unlike `samples_to_reach` this reads the same
    prompts for every run, so runs trained on different data (a curriculum) compare fairly."""
    return next((samples for samples, value in run.held_out_curve() if value >= threshold), None)


def summarize(runs: list[Run], last_k: int = 5) -> list[dict]:
    """One summary row per run. The AUC runs up to the sample budget every run reached, so it is compute-aligned."""
    ends = [run.series("avg_correctness", "samples")[0][-1:] for run in runs]
    common_end = min((e[0] for e in ends if e), default=None)
    rows = []
    for run in runs:
        xs, ys = run.series("avg_correctness", "samples")
        totals = time_totals(run)
        rows.append({
            "run": run.label,
            "finished": run.finished,
            "steps": count(last(run, "step")),
            "generated_samples": count(last(run, "generated_samples")),
            "generated_tokens": count(last(run, "generated_tokens")),
            "final_correctness": tail_mean(ys, last_k),
            "final_binary": tail_mean(run.values("avg_binary"), last_k),  # partial credit, as the homework defines it
            "final_success": tail_mean(run.values("avg_success"), last_k),  # 0/1: exact answer and full format
            "auc_correctness": normalized_auc(xs, ys, common_end),
            "auc_up_to_samples": count(common_end),
            f"samples_to_{REACH_CORRECTNESS}": samples_to_reach(run, REACH_CORRECTNESS),
            "mean_zero_std_total": mean(run.values("zero_std_frac/total")),
            "mean_zero_std_correctness": mean(run.values("zero_std_frac/correctness")),
            "wall_time_s": wall_time(run),
            "generation_share": totals["generation_share"],
            **{f"final_{c}": tail_mean(run.values(reward_key(c)), last_k)
               for c in run.components if c not in ("correctness", "success", "binary", "format", "total", "penalty")},
            **held_out_columns(run),
        })
    return rows


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
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(summary, dict) and isinstance(summary.get("overall"), dict) and "by_length" in summary:
            found.append((path, summary))
    return found


def held_out_columns(run: Run) -> dict:
    """Held-out exact match, mean correctness and pass@k before -> after, when the sweep evaluated the run."""
    columns = {}
    for name in ("before", "after"):
        block = run.held_out(name)
        for key in ("exact_match", "mean_correctness", *sorted(k for k in block if k.startswith("pass@"))):
            if key in block:
                columns[f"heldout_{key}_{name}"] = block[key]
    return columns


SEED_SUFFIX = re.compile(r"-s(\d+)$")  # a sweep's seeded run label: <setting>-s<seed>


def seed_group(label: str) -> str:
    """`grpo-s2` -> `grpo`: the runs of one setting that differ only in their seed."""
    return SEED_SUFFIX.sub("", label)


def seed_of(label: str) -> int | None:
    """`grpo-s2` -> 2; None for a label without a seed suffix."""
    match = SEED_SUFFIX.search(label)
    return int(match.group(1)) if match else None


def paired_by_seed(summary: list[dict], key: str = "heldout_exact_match_after") -> tuple[str | None, list]:
    """Each setting against the best one (highest mean `key`), seed for seed: (best, [(setting, [its value - best's
    value per shared seed])]). Seeds share data order and sampling noise, so these differences are what a third seed is
    for: a setting behind on every seed is behind, one that changes sides is within noise."""
    values = defaultdict(dict)
    for row in summary:
        if isinstance(row.get(key), (int, float)) and (seed := seed_of(row["run"])) is not None:
            values[seed_group(row["run"])][seed] = row[key]
    if len(values) < 2:
        return None, []
    best = max(values, key=lambda setting: mean(values[setting].values()))
    return best, [(setting, [by_seed[s] - values[best][s] for s in sorted(by_seed) if s in values[best]])
                  for setting, by_seed in values.items() if setting != best]


def aggregate(summary: list[dict], keys=None) -> list[dict]:
    """One row per setting: every numeric column as mean and spread (half the min-max range) over its seeds."""
    groups = defaultdict(list)
    for row in summary:
        groups[seed_group(row["run"])].append(row)
    keys = keys or [k for k in summary[0] if isinstance(summary[0][k], (int, float)) and not isinstance(summary[0][k], bool)]
    rows = []
    for label, members in groups.items():
        row = {"setting": label, "seeds": len(members)}
        for key in keys:
            values = [m[key] for m in members if isinstance(m.get(key), (int, float))]
            row[key] = mean(values)
            row[f"{key}_spread"] = (max(values) - min(values)) / 2 if len(values) > 1 else None
            row[f"{key}_n"] = len(values)  # seeds that have the value (a threshold some never reached)
        rows.append(row)
    return rows


# ---- tables ----------------------------------------------------------------------------------------------------

def downsample(items: list, max_rows: int) -> list:
    """At most max_rows items, evenly spaced, always keeping the first and the last."""
    if max_rows < 2 or len(items) <= max_rows:
        return list(items)
    picks = sorted({round(i * (len(items) - 1) / (max_rows - 1)) for i in range(max_rows)})
    return [items[i] for i in picks]


def series_table(run: Run, max_rows: int = 20, keys=None) -> tuple[list[str], list[list]]:
    """(headers, rows): step, samples and `keys` (default: `table_series`) for each logged step, downsampled."""
    keys = table_series(run) if keys is None else keys
    headers = ["step", "samples", *keys]
    rows = [[count(row.get("step")), count(row.get("generated_samples")), *(row.get(k) for k in keys)] for row in run.rows]
    return headers, downsample(rows, max_rows)


def cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}" if math.isfinite(value) else str(value)
    return str(value)


def count(value) -> int | None:
    """Counters are logged as floats (16.0); tables show them as integers."""
    return None if value is None else int(value)


def text_table(headers: list[str], rows: list[list]) -> str:
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda values: "  ".join(v.rjust(w) for v, w in zip(values, widths))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


def markdown_table(headers: list[str], rows: list[list]) -> str:
    escape = lambda v: cell(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(escape(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_table(summary: list[dict]) -> tuple[list[str], list[list]]:
    headers = list(dict.fromkeys(key for row in summary for key in row))  # rows may differ (held-out columns)
    return headers, [[row.get(h) for h in headers] for row in summary]
