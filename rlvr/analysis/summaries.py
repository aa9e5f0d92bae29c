"""A run's summary numbers (final scores, area under the curve, samples to reach a level, time), and runs grouped
by seed: what the sweep tables and the report print, read from the same `Run` the figures draw."""

from __future__ import annotations

import re
from collections import defaultdict

from rlvr.analysis.loaders import Run, count
from rlvr.metrics.keys import (
    BINARY,
    EVAL_EXACT,
    GENERATED_SAMPLES,
    GENERATED_TOKENS,
    HELD_OUT,
    KNOWN_ORDER,
    PER_K,
    TIME_PHASES,
    TIME_TOTAL,
    TOKEN_RATES,
    TOTAL,
    TRAIN_RUNTIME,
    reward_key,
    time_key,
    zero_std_key,
)


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
    """Seconds per phase summed over the run, the total, generation's share of it, and generated tokens per second
    of each (`TOKEN_RATES`)."""
    totals = {phase: sum(run.values(time_key(phase))) for phase in TIME_PHASES}
    totals["total"] = sum(run.values(TIME_TOTAL))
    totals["generation_share"] = totals["generation"] / totals["total"] if totals["total"] else None
    tokens = last(run, GENERATED_TOKENS)
    totals.update(
        {key: tokens / totals[phase] if tokens and totals[phase] else None for key, phase in TOKEN_RATES.items()}
    )
    return totals


def wall_time(run: Run) -> float:
    """Training wall time: TRL's train_runtime when the run finished, else the summed step times so far."""
    return run.final.get(TRAIN_RUNTIME) or time_totals(run)["total"]


def last(run: Run, key: str):
    values = run.values(key)
    return values[-1] if values else None


def samples_to_reach(run: Run, threshold: float, window: int = 5) -> int | None:
    """Generated samples when avg_correctness, averaged over `window` logged steps, first reaches `threshold`. Only
    full windows count: one lucky first batch (64 samples of easy words) is not "reached"."""
    xs, ys = run.series(reward_key("correctness"), "samples")
    if not ys:  # no step logged (a run stopped before its first, or records without rewards): nothing reached
        return None
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


# The speedrun figure: held-out exact match of the in-training evaluations (`eval_steps` apart, the same held-out
# prompts every time), averaged over the last SPEEDRUN_WINDOW of them so one lucky evaluation does not count, first
# at SPEEDRUN_TARGET.
SPEEDRUN_TARGET, SPEEDRUN_WINDOW = 0.60, 3
SPEEDRUN_SAMPLES = "speedrun_samples"  # the summary column: generated samples until the speedrun target (None: never)


def speedrun(run: Run, target: float = SPEEDRUN_TARGET, window: int = SPEEDRUN_WINDOW) -> dict | None:
    """{step, samples, seconds, value} at the first in-training evaluation whose held-out exact match, averaged with
    the `window - 1` evaluations before it, reaches `target`; seconds are the summed step times (`time/total_s`) up
    to that step, so start-up and the evaluations themselves are left out. None when it never does."""
    samples, seconds, elapsed = {}, {}, 0.0
    for row in run.rows:
        step = count(row.get("step"))
        elapsed += row.get(TIME_TOTAL) or 0.0
        if step is not None:
            seconds[step] = elapsed
            if row.get(GENERATED_SAMPLES) is not None:
                samples[step] = count(row[GENERATED_SAMPLES])
    steps, values = run.series(EVAL_EXACT)
    for i in range(window - 1, len(values)):
        smoothed = mean(values[i - window + 1 : i + 1])
        if smoothed >= target:
            step = count(steps[i])
            return {"step": step, "samples": samples.get(step), "seconds": seconds.get(step), "value": smoothed}
    return None


def speedrun_line(
    result: dict | None,
    target: float = SPEEDRUN_TARGET,
    window: int = SPEEDRUN_WINDOW,
    evaluation: str = "in-training evaluations",
) -> str:
    """The speedrun figure in one line. It is the proxy: `evaluation` names the in-training held-out subset it reads
    (e.g. "32 words x 2 samples"), which reads above the full held-out set; `rlvr speedrun` judges on the full set."""
    what = f"proxy, {evaluation}: held-out exact match (mean of {window} evaluations) first >= {target:.0%}"
    if result is None:
        return f"speedrun ({what}): not reached"
    return (
        f"speedrun ({what}) at step {result['step']}: {result['samples']:,} samples, {result['seconds']:.0f} s of "
        f"step time (mean {result['value']:.1%})"
    )


def summarize(runs: list[Run], last_k: int = 5) -> list[dict]:
    """One summary row per run. The AUC runs up to the sample budget every run reached, so it is compute-aligned."""
    ends = [run.series(reward_key("correctness"), "samples")[0][-1:] for run in runs]
    common_end = min((e[0] for e in ends if e), default=None)
    rows = []
    for run in runs:
        xs, ys = run.series(reward_key("correctness"), "samples")
        totals = time_totals(run)
        reached = speedrun(run)
        rows.append(
            {
                "run": run.label,
                "finished": run.finished,
                "steps": count(last(run, "step")),
                GENERATED_SAMPLES: count(last(run, GENERATED_SAMPLES)),
                GENERATED_TOKENS: count(last(run, GENERATED_TOKENS)),
                "final_correctness": tail_mean(ys, last_k),
                "final_binary": tail_mean(
                    run.values(reward_key(BINARY)), last_k
                ),  # partial credit, as the homework defines it
                "final_success": tail_mean(
                    run.values(reward_key("success")), last_k
                ),  # 0/1: exact answer and full format
                "auc_correctness": normalized_auc(xs, ys, common_end),
                "auc_up_to_samples": count(common_end),
                f"samples_to_{REACH_CORRECTNESS}": samples_to_reach(run, REACH_CORRECTNESS),
                "mean_zero_std_total": mean(run.values(zero_std_key(TOTAL))),
                "mean_zero_std_correctness": mean(run.values(zero_std_key("correctness"))),
                SPEEDRUN_SAMPLES: reached and reached["samples"],
                "wall_time_s": wall_time(run),
                "generation_share": totals["generation_share"],
                **{
                    f"final_{c}": tail_mean(run.values(reward_key(c)), last_k)
                    for c in run.components
                    if c not in KNOWN_ORDER
                },
                **held_out_columns(run),
            }
        )
    return rows


def held_out_columns(run: Run) -> dict:
    """Held-out exact match, mean correctness, pass@k and maj@k before -> after, when the sweep evaluated the run."""
    columns = {}
    for name in ("before", "after"):
        block = run.held_out(name)
        for key in (*HELD_OUT[:2], *sorted(k for k in block if k.startswith(PER_K))):
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
    return best, [
        (setting, [by_seed[s] - values[best][s] for s in sorted(by_seed) if s in values[best]])
        for setting, by_seed in values.items()
        if setting != best
    ]


def aggregate(summary: list[dict], keys=None) -> list[dict]:
    """One row per setting: every numeric column as mean and spread (half the min-max range) over its seeds."""
    groups = defaultdict(list)
    for row in summary:
        groups[seed_group(row["run"])].append(row)
    keys = keys or [
        k for k in summary[0] if isinstance(summary[0][k], (int, float)) and not isinstance(summary[0][k], bool)
    ]
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
