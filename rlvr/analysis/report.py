"""One Markdown page per run or sweep: config, records, curves, zero-std over training, before/after, time.

    python -m rlvr.analysis.report runs/tiny-grpo [--before models/tiny-speller] [--config recipes/tiny/grpo.yaml]
    python -m rlvr.analysis.report runs/sweeps/group-size            # a sweep: summary table + overlaid curves

Figures go to `plots/` beside the report (default `<dir>/report.md`), linked relatively so the page travels with
the folder. A sweep directory also gets `summary.md`, `summary.csv` and `summary.json`.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import yaml

from rlvr.analysis import before_after, doctor
from rlvr.analysis.evaluate import format_table
from rlvr.analysis.loaders import (
    Run,
    count,
    curriculum_series,
    evaluations_in,
    find_run_dirs,
    load_runs,
    saved_training_args,
)
from rlvr.analysis.plots import plot_runs
from rlvr.analysis.summaries import (
    REACH_CORRECTNESS,
    SPEEDRUN_SAMPLES,
    SPEEDRUN_TARGET,
    SPEEDRUN_WINDOW,
    aggregate,
    last,
    mean,
    paired_by_seed,
    samples_to_reach_held_out,
    seed_group,
    summarize,
    tail_mean,
    time_totals,
    wall_time,
)
from rlvr.analysis.tables import markdown_table, series_table, summary_table
from rlvr.inputs import (
    ArgumentParser,
    ConfigError,
    check_writable_folder,
    cli,
    load_yaml_mapping,
    positive_int,
    read_json,
    read_text,
)
from rlvr.metrics.keys import (
    ALL_CORRECT,
    ALL_WRONG,
    GENERATED_SAMPLES,
    GENERATED_TOKENS,
    TIME_PHASES,
    TOKEN_RATES,
    TOTAL,
    group_key,
    zero_std_key,
)
from rlvr.runs import layout
from rlvr.training.config import check_model_reachable

TRAINING_ARGS_SHOWN = (
    "learning_rate",
    "num_generations",
    "generation_batch_size",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_steps",
    "max_completion_length",
    "temperature",
    "top_p",
    "top_k",
    "loss_type",
    "scale_rewards",
    "beta",
    "epsilon",
    "epsilon_high",
    "reward_weights",
    "seed",
)


def config_text(run_dir: Path, config: str | None = None) -> str:
    """The YAML a run used: its own config.yaml, else `config` (copied in for next time), else training_args.bin."""
    own = run_dir / layout.CONFIG
    if config:
        load_yaml_mapping(config, "--config")  # missing, a folder, binary or not a mapping: one line, nothing copied
    if config and not own.exists():
        shutil.copyfile(config, own)
    args, unread = saved_training_args(run_dir)
    note = f"# {unread}\n" if unread else ""
    if own.exists():
        recipe = load_yaml_mapping(own, "RUN_DIR")
        return read_text(own, "RUN_DIR").rstrip("\n") + "\n" + note + cli_overrides_note(recipe, args)
    if not args:
        return note + "# no config.yaml or readable training_args.bin in the run directory; pass --config RECIPE.yaml\n"
    shown = {key: args[key] for key in TRAINING_ARGS_SHOWN if key in args}
    return (
        "# from training_args.bin (TRL's arguments only: pass --config RECIPE.yaml for the data spec and rewards)\n"
        + yaml.safe_dump(shown, sort_keys=False)
    )


def cli_overrides_note(recipe: dict, args: dict) -> str:
    """YAML comments for the scalar fields the run used with another value than the YAML says (CLI overrides)."""
    scalar = (int, float, str, bool)
    changed = [
        f"{key}: {args[key]!r}"
        for key, value in recipe.items()
        if isinstance(value, scalar) and isinstance(args.get(key), scalar) and args[key] != value
    ]
    if not changed:
        return ""
    return "# overridden on the command line (training_args.bin): " + ", ".join(changed) + "\n"


def link(target: Path, report_dir: Path) -> str:
    return os.path.relpath(target, report_dir)


def images(paths: list[Path], report_dir: Path, names: tuple[str, ...]) -> str:
    return "\n\n".join(f"![{p.stem}]({link(p, report_dir)})" for p in paths if p.name in names)


def zero_std_reading(run: Run, last_k: int = 5) -> str:
    """A one-paragraph reading of the zero-std curve, numbers first, then what they suggest."""
    total = run.values(zero_std_key(TOTAL))
    if not total:
        return "No zero_std_frac rows were logged."
    avg = mean(total)
    parts = [
        (
            f"On average {avg:.0%} of prompt groups had zero reward spread (`zero_std_frac/total`: {total[0]:.2f} at "
            f"the first step, {tail_mean(total, last_k):.2f} over the last {min(last_k, len(total))}). Their G "
            "completions scored alike, so the group-normalised advantage is 0 and they add no gradient: about "
            f"{1 - avg:.0%} of the generated groups carried the learning signal."
        )
    ]
    correctness = run.values(zero_std_key("correctness"))
    if correctness:
        tied = mean(correctness)
        from_format = " (so most of the total's contrast came from the format reward)" if tied > avg + 0.05 else ""
        parts.append(f"On correctness alone {tied:.0%} of groups were tied{from_format}.")
    wrong, right = run.values(group_key(ALL_WRONG)), run.values(group_key(ALL_CORRECT))
    if wrong:
        wrong_end, right_end = tail_mean(wrong, last_k), tail_mean(right, last_k)
        parts.append(
            f"In the rollouts, {wrong_end:.0%} of the last steps' groups were all wrong and "
            f"{right_end:.0%} all correct."
        )
        if avg >= 0.99:
            parts.append(
                "Every group is tied: with G = 1 (REINFORCE) this holds by definition and says nothing; "
                "otherwise nothing varies within groups and training has stalled."
            )
        elif wrong_end > max(right_end, 0.3):
            parts.append(
                "Mostly all-wrong groups: the prompts are too hard for the policy. More samples per prompt, "
                "a higher temperature, shorter words or DAPO's dynamic sampling buy contrast back."
            )
        elif right_end > max(wrong_end, 0.3):
            parts.append(
                "Mostly all-correct groups: these prompts are solved. Longer words (max_word_len) restore "
                "contrast; further steps on this data mostly cost generation time."
            )
        else:
            parts.append("Most groups still mix right and wrong answers: the signal is healthy.")
    return " ".join(parts)


def time_table(runs: list[Run]) -> tuple[list[str], list[list]]:
    headers = [
        "run",
        *(f"{phase}_s" for phase in TIME_PHASES),
        "step_total_s",
        "generation_share",
        "wall_time_s",
        "s_per_step",
        *TOKEN_RATES,
    ]
    rows = []
    for run in runs:
        totals, steps = time_totals(run), count(last(run, "step"))
        rows.append(
            [
                run.label,
                *(totals[p] for p in TIME_PHASES),
                totals["total"],
                totals["generation_share"],
                wall_time(run),
                totals["total"] / steps if steps else None,
                *(totals[k] for k in TOKEN_RATES),
            ]
        )
    return headers, rows


def time_reading(runs: list[Run]) -> str:
    shares = [(run.label, time_totals(run)["generation_share"]) for run in runs]
    text = ", ".join(f"{label} {share:.0%}" for label, share in shares if share is not None)
    if not text:
        return "No time/* keys were logged."
    return (
        f"Generation's share of step time: {text}. Generation is sampling completions; scoring the reward "
        "functions; logprobs the extra forward passes for old/reference log-probs; optimization the "
        "forward/backward/step. When generation dominates, the lever for speed is sampling (vLLM, shorter "
        "max_completion_length), not the optimizer."
    )


def write_summary(runs: list[Run], out_dir: Path, last_k: int, reference: str | None = None) -> list[dict]:
    """summary.json, summary.csv and summary.md: one row per run."""
    summary = summarize(runs, last_k)
    add_reference_reach(runs, summary, reference)
    (out_dir / layout.SUMMARY_JSON).write_text(json.dumps(summary, indent=2) + "\n")
    with (out_dir / layout.SUMMARY_CSV).open("w", newline="") as f:
        columns = list(dict.fromkeys(key for row in summary for key in row))  # runs not yet evaluated lack heldout_*
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(summary)
    (out_dir / layout.SUMMARY_MD).write_text(markdown_table(*summary_table(summary)) + "\n")
    return summary


REFERENCE_REACH = "heldout_samples_to_reference"


def add_reference_reach(runs: list[Run], summary: list[dict], reference: str | None = None) -> None:
    """With held-out evaluations: per run, the generated samples at which its held-out exact match first
    reached the reference setting's final one (the mean over its seeds): the spec's first label (in the curriculum
    sweep, the main job), else the first setting listed. Only for sweeps whose runs have checkpoint evaluations
    (`evaluate.every_steps`); a run whose checkpoints never reached it may still reach it at the end."""
    reference = reference or (seed_group(summary[0]["run"]) if summary else None)
    finals = [
        row["heldout_exact_match_after"]
        for row in summary
        if seed_group(row["run"]) == reference and row.get("heldout_exact_match_after") is not None
    ]
    if not finals or not any(len(run.held_out_curve()) > 1 for run in runs):  # only sweeps with checkpoint evals
        return
    threshold = mean(finals)
    for run, row in zip(runs, summary):
        row[REFERENCE_REACH] = samples_to_reach_held_out(run, threshold)


SETTING_COLUMNS = (
    "heldout_exact_match_before",
    "heldout_exact_match_after",
    "heldout_mean_correctness_after",
    "heldout_pass@8_after",
    "heldout_maj@8_after",
    "final_correctness",
    "auc_correctness",
    f"samples_to_{REACH_CORRECTNESS}",
    "mean_zero_std_correctness",
    REFERENCE_REACH,
    SPEEDRUN_SAMPLES,
    GENERATED_SAMPLES,
    "wall_time_s",
)


def settings_section(summary: list[dict]) -> list[str]:
    """With seeds: one row per setting, mean ± spread (half the min-max range) over its seeds."""
    if all(seed_group(row["run"]) == row["run"] for row in summary):
        return []
    columns = [c for c in SETTING_COLUMNS if any(row.get(c) is not None for row in summary)]
    rows = aggregate(summary, columns)
    status = learning_status(summary)
    table = [
        [
            row["setting"],
            row["seeds"],
            status.get(row["setting"], "-"),
            *(
                plus_minus(row[c], row[f"{c}_spread"])
                + ("" if row[f"{c}_n"] in (0, row["seeds"]) else f" ({row[f'{c}_n']} of {row['seeds']})")
                for c in columns
            ),
        ]
        for row in rows
    ]
    return [
        "## Settings (mean ± spread over seeds)",
        markdown_table(["setting", "seeds", "status", *columns], table),
        *paired_lines(summary),
        (
            "spread = half the range between the best and the worst seed; heldout_* come from `eval/` (the sweep's "
            "`evaluate:`), before = the base model on the same prompts. status: **learns** when held-out exact match "
            f"rose by at least {LEARNS_GAIN:.0%} points on every seed, else *does not learn* (read its curves). "
            "(2 of 3): the mean covers the seeds that have the value, e.g. those that reached the threshold. "
            f"{REFERENCE_REACH}: generated samples until held-out exact match first reached the final mean of the "
            "spec's first setting (checkpoints evaluated every `evaluate.every_steps`; the end point otherwise). "
            f"{SPEEDRUN_SAMPLES}: generated samples until the in-training held-out exact match, averaged over "
            f"{SPEEDRUN_WINDOW} evaluations, first reached {SPEEDRUN_TARGET:.0%} (the main job's speedrun line; "
            "blank: never)."
        ),
    ]


def paired_lines(summary: list[dict]) -> list[str]:
    """Held-out exact match of each setting minus the best setting's, seed for seed (points)."""
    best, pairs = paired_by_seed(summary)
    pairs = [(setting, diffs) for setting, diffs in pairs if diffs]
    if not pairs:
        return []
    lines = [
        (
            f"Paired by seed against **{best}** (held-out exact match after, points, run minus {best}'s run of the "
            "same training seed): behind on every seed by more than a point or two is behind; a setting that changes "
            "sides, or trails by a fraction of a point, is within noise."
        )
    ]
    for setting, diffs in pairs:
        behind = sum(d < 0 for d in diffs)
        lines.append(
            f"- {setting}: {' / '.join(f'{100 * d:+.1f}' for d in diffs)} (behind on {behind} of {len(diffs)})"
        )
    return ["\n".join(lines)]


LEARNS_GAIN = 0.15  # held-out exact-match gain every seed must reach for "learns"


def learning_status(summary: list[dict]) -> dict[str, str]:
    """Per setting: learns / does not learn, from each seed's held-out exact match before -> after."""
    gains = {}
    for row in summary:
        before, after = row.get("heldout_exact_match_before"), row.get("heldout_exact_match_after")
        if before is not None and after is not None:
            gains.setdefault(seed_group(row["run"]), []).append(after - before)
    return {setting: "learns" if min(values) >= LEARNS_GAIN else "does not learn" for setting, values in gains.items()}


def length_section(runs: list[Run]) -> list[str]:
    """Held-out exact match per word length, one row per setting (mean over its seeds) and the base model first:
    where a curriculum or a wider mix moved the policy, and where nothing did."""
    before = next((by for run in runs if (by := run.held_out_by_length("before"))), {})
    settings = {}
    for run in runs:
        if by_length := run.held_out_by_length("after"):
            settings.setdefault(seed_group(run.label), []).append(by_length)
    lengths = sorted(
        {length for rows in settings.values() for row in rows for length in row} | set(before),
        key=lambda length: (not length.isdigit(), int(length) if length.isdigit() else 0, length),
    )
    if len(lengths) < 2 or not settings:
        return []
    table = [["before (base model)", "-", *(before.get(length) for length in lengths)]] if before else []
    table += [
        [setting, len(rows), *(mean([row.get(length) for row in rows]) for length in lengths)]
        for setting, rows in settings.items()
    ]
    return [
        "## Held-out exact match by word length",
        markdown_table(["setting", "seeds", *lengths], table),
        (
            "Mean over the setting's seeds of `eval/after.json`'s `by_length` exact match; the columns are the "
            "held-out set's word lengths."
        ),
    ]


def curriculum_section(runs: list[Run], pngs: list[Path], report_dir: Path, max_rows: int | None = None) -> list[str]:
    """The schedule of runs trained with a curriculum: level, level mix and pass rate per level over training."""
    keys = curriculum_series(runs)
    if not keys:
        return []
    parts = [
        "## Curriculum",
        (
            "`curriculum/level` (the threshold policy's current level, else the weight-averaged level), "
            "`curriculum/weight/<level>` (the mix that drew each step's prompts, one generation step behind the pass "
            "rates: rlvr/training/curriculum.py) and `curriculum/pass_rate/<level>` (exact match over the last "
            "`window` completions of that level)."
        ),
        images(pngs, report_dir, ("curriculum_by_step.png", "curriculum_by_samples.png")),
    ]
    if max_rows is not None and len(runs) == 1:
        parts.append(markdown_table(*series_table(runs[0], max_rows, keys)))
    return parts


def plus_minus(value, spread) -> str:
    """A rate (0.603 ± 0.009) to three decimals; a count or seconds (2880 ± 704, 98 ± 5) whole."""
    if value is None:
        return "-"
    digits = 3 if isinstance(value, float) and abs(value) < 10 else 0
    return f"{value:.{digits}f}" + ("" if spread is None else f" ± {spread:.{digits}f}")


def summary_note(last_k: int) -> str:
    return (
        f"final_* = mean of the last {last_k} logged generation steps; auc_correctness = trapezoid area under "
        "avg_correctness over generated samples up to auc_up_to_samples (the budget every run reached), divided "
        "by that range; mean_zero_std_* = mean over logged steps."
    )


def doctor_section(run: Run) -> list[str]:
    """`rlvr doctor`'s findings on the run, one numbered line each, as the command prints them."""
    diagnosis = doctor.diagnose(run.path, run)
    verdict = f"**{len(diagnosis.problems)} problem(s) found.**" if diagnosis.problems else "**No problem found.**"
    skipped = f" Not checked (no keys for it in this run): {', '.join(diagnosis.skipped)}." if diagnosis.skipped else ""
    unread = "".join(f" {line[0].upper()}{line[1:]}." for line in diagnosis.unread_lines())
    return [
        "## Doctor",
        f"{verdict} `rlvr doctor {run.path}` (thresholds and their reasons: docs/doctor.md).{skipped}{unread}",
        "\n".join(diagnosis.lines()) or "(no findings)",
    ]  # each line starts "N. ": a Markdown numbered list


def run_report(
    run: Run, report_dir: Path, config: str | None, before: str | None, num_prompts: int, last_k: int, max_rows: int
) -> str:
    recipe = config_text(run.path, config)  # first: it copies --config in, which before/after then reads
    comparison = before_after.load(run.path)
    if before:
        if not (run.path / layout.CONFIG).exists():
            raise ConfigError("--config", f"--before needs the recipe YAML: {run.path} has no {layout.CONFIG}")
        comparison = before_after.compare(before, str(run.path), str(run.path / layout.CONFIG), num_prompts)
    pngs = plot_runs([run], report_dir / layout.PLOTS_DIR)
    summary = summarize([run], last_k)[0]
    records = [
        (
            f"- [{layout.METRICS}]({link(run.path / layout.METRICS, report_dir)}): {len(run.rows)} logged steps, "
            "one JSON row each (the closing row holds train_runtime)"
        )
    ]
    if (run.path / layout.ROLLOUTS).exists():
        records.append(
            f"- [{layout.ROLLOUTS}]({link(run.path / layout.ROLLOUTS, report_dir)}): "
            f"{len(run.rollouts())} rollouts with their reward components"
        )
    if (run.path / layout.TRAIN_LOG).exists():
        records.append(f"- [{layout.TRAIN_LOG}]({link(run.path / layout.TRAIN_LOG, report_dir)}): the full log")
    return "\n\n".join(
        [
            f"# Run report: {run.label}",
            (
                f"`{run.path}` · {'finished' if run.finished else 'NOT finished'} · {summary['steps']} steps · "
                f"{summary[GENERATED_SAMPLES]} generated samples · {summary[GENERATED_TOKENS]} completion tokens · "
                f"wall time {summary['wall_time_s']:.1f} s"
            ),
            "## Config used",
            f"```yaml\n{recipe.rstrip()}\n```",
            "## Records",
            "\n".join(records),
            "## Summary",
            markdown_table(*summary_table([summary])),
            summary_note(last_k),
            *doctor_section(run),
            "## Rewards over training",
            images(pngs, report_dir, ("rewards_by_step.png", "rewards_by_samples.png")),
            markdown_table(*series_table(run, max_rows)),
            "## Zero-std groups over training",
            images(pngs, report_dir, ("zero_std_by_step.png", "zero_std_by_samples.png")),
            zero_std_reading(run, last_k),
            images(
                pngs, report_dir, ("sampling_by_step.png", "step_metrics_by_step.png")
            ),  # entropy, truncation, watches
            *curriculum_section([run], pngs, report_dir, max_rows),
            "## Before / after training",
            before_after.render_markdown(comparison) if comparison else evaluations_section(run, report_dir),
            "## Time accounting",
            markdown_table(*time_table([run])),
            images(pngs, report_dir, ("time_accounting.png",)),
            time_reading([run]),
        ]
    )


def evaluations_section(run: Run, report_dir: Path) -> str:
    """The held-out evaluations already in the run folder (`evaluations_in`), each as evaluate prints it (per word
    length: exact match, reward means, pass@k, false_full_credit); "Not run yet" with the command only when none is."""
    found = evaluations_in(run.path)
    if not found:
        return (
            "Not run yet: `python -m rlvr.analysis.before_after --before BASE_MODEL --after "
            f"{run.path} --config {run.path / layout.CONFIG}` (or `--before BASE_MODEL` here)."
        )
    parts = [
        ("Held-out evaluations found in the run folder (no before_after pairing; `--before BASE_MODEL` adds one):")
    ]
    for path, summary in found:
        parts.append(
            f"**[{path.name}]({link(path, report_dir)})**: model `{summary.get('model')}`, split "
            f"{summary.get('split')}, {summary.get('num_samples')} samples per prompt, temperature "
            f"{(summary.get('sampling') or {}).get('temperature')}"
        )
        parts.append(f"```\n{format_table(summary)}\n```")
    return "\n\n".join(parts)


def trained_by(runs: list[Run]) -> str:
    """Which code and CPU trained the runs (their code.json): float results move with both, so a rerun lands in a
    page's numbers only on the same code and kernel set."""
    groups: dict[str, list[str]] = {}
    for run in runs:
        try:
            record = read_json(run.path / layout.CODE, "RUN_DIR", dict)
            code, machine = record["trained_by"], record.get("machine") or {}
            versions = ", ".join(f"{name} {code['libraries'][name]}" for name in ("torch", "transformers", "trl"))
            what = f"code `{code['sources']}` ({versions}) on {machine['cpu']}, {machine['cpu_capability']} kernels"
        except (ConfigError, KeyError, TypeError):
            what = f"no readable {layout.CODE}"
        groups.setdefault(what, []).append(run.label)
    said = [f"{what} ({len(labels)} run{'s' * (len(labels) > 1)})" for what, labels in groups.items()]
    return "Trained by " + "; ".join(said) + "."


def sweep_spec(sweep_dir: Path) -> dict | None:
    """The sweep.yaml a sweep folder keeps (its spec, as the sweep read it); None when there is none."""
    spec = sweep_dir / layout.SWEEP_SPEC
    return load_yaml_mapping(spec, "RUN_DIR", "a sweep spec mapping") if spec.exists() else None


def sweep_report(
    sweep_dir: Path,
    report_dir: Path,
    last_k: int,
    only: list[str] | None = None,
    x_axes=("step", "samples"),
    runs: list[Run] | None = None,
) -> str:
    runs = runs or load_runs([sweep_dir])
    if only:  # a page over some settings of a bigger sweep (an ablation that shares the reference runs)
        runs = [run for run in runs if run.label in only or seed_group(run.label) in only]
        if not runs:
            raise ConfigError("--only", f"no run of {sweep_dir} is labelled {' or '.join(only)}")
    pngs = plot_runs(runs, report_dir / layout.PLOTS_DIR, x_axes)
    summary_dir = report_dir  # beside the page (the sweep folder itself for its default report)
    spec = sweep_dir / layout.SWEEP_SPEC
    labels = (sweep_spec(sweep_dir) or {}).get("labels")
    summary = write_summary(runs, summary_dir, last_k, labels[0] if isinstance(labels, list) and labels else None)
    inside = lambda path: Path(os.path.abspath(path)).is_relative_to(os.path.abspath(report_dir))
    run_links = [  # a page published outside the sweep folder (results/) names the records instead of linking them
        f"- **{run.label}**: "
        + ", ".join(
            f"[{name}]({link(run.path / name, report_dir)})" if inside(run.path) else f"`{run.path / name}`"
            for name in (layout.CONFIG, layout.METRICS, layout.TRAIN_LOG)
            if (run.path / name).exists()
        )
        for run in runs
    ]
    return "\n\n".join(
        [
            f"# Sweep report: {sweep_dir.name}",
            f"`{sweep_dir}` · {len(runs)} runs",
            trained_by(runs),
            "## Sweep spec",
            f"```yaml\n{read_text(spec, 'RUN_DIR').rstrip()}\n```"
            if spec.exists()
            else "(no sweep.yaml in the directory)",
            *settings_section(summary),
            *length_section(runs),
            "## Summary",
            markdown_table(*summary_table(summary)),
            summary_note(last_k)
            + f" Also as [{layout.SUMMARY_CSV}]({link(summary_dir / layout.SUMMARY_CSV, report_dir)}) and "
            f"[{layout.SUMMARY_JSON}]({link(summary_dir / layout.SUMMARY_JSON, report_dir)}).",
            "## Curves at equal generation compute (x = generated samples)",
            images(pngs, report_dir, ("rewards_by_samples.png", "zero_std_by_samples.png")),
            "## Curves by optimizer step",
            images(pngs, report_dir, ("rewards_by_step.png", "zero_std_by_step.png")),
            "## Zero-std groups over training",
            (
                "Observed against predicted: the exact-match zero-std fraction of each step, and p^G + (1 - p)^G from the "
                "measured pass rates (p from the group itself, biased up; p from the step's other groups of the same word "
                "length, biased down); the logged partial-credit `zero_std_frac/correctness` in grey."
            ),
            images(pngs, report_dir, ("zero_std_prediction_by_samples.png",)),
            "\n".join(f"- **{run.label}**: {zero_std_reading(run, last_k)}" for run in runs),
            *curriculum_section(runs, pngs, report_dir),
            "## Per-step metrics",
            (
                "`step/completion_tokens/{correct,wrong}`: mean completion length of exactly-correct and of wrong completions "
                "(the length bias Dr. GRPO removes shows as wrong completions growing longer)."
            ),
            images(pngs, report_dir, ("step_metrics_by_samples.png",)),
            "## Time accounting",
            markdown_table(*time_table(runs)),
            images(pngs, report_dir, ("time_accounting.png",)),
            time_reading(runs),
            "## Runs",
            "\n".join(run_links),
        ]
    )


def build_report(
    path,
    out=None,
    before: str | None = None,
    config: str | None = None,
    num_prompts: int = 32,
    last_k: int = 5,
    max_rows: int = 20,
    only: list[str] | None = None,
    x_axes=("step", "samples"),
) -> Path:
    """Write the report for a run or sweep directory; returns its path."""
    path = Path(path)
    dirs = find_run_dirs(path)
    out = Path(out or path / layout.REPORT)
    if out.is_dir():
        raise ConfigError("--out", f"{out} is a folder; name the report file, e.g. {out / layout.REPORT}")
    check_writable_folder(out.parent, "--out")  # not under a file: fails now, not as a traceback from mkdir
    if only and dirs == [path]:
        raise ConfigError("--only", f"picks runs of a sweep; {path} is one run")
    if config and dirs != [path]:
        raise ConfigError("--config", "a sweep's runs each hold their own config.yaml; point the report at one run")
    if before:
        try:
            check_model_reachable(before, will_build=False)
        except ConfigError as err:
            raise ConfigError("--before", err.message) from None
    if before and dirs != [path]:
        raise ConfigError("--before", "before/after runs per run directory; point the report at one run")
    runs = load_runs([path])
    read_back(path, runs, single=dirs == [path])
    out.parent.mkdir(parents=True, exist_ok=True)
    if dirs == [path]:
        text = run_report(runs[0], out.parent, config, before, num_prompts, last_k, max_rows)
    else:
        text = sweep_report(path, out.parent, last_k, only, x_axes, runs)
    out.write_text(text + "\n")
    return out


def read_back(path: Path, runs: list[Run], single: bool) -> None:
    """Every file the report will read, read now: a damaged one is one line before anything is written."""
    for run in runs:
        run.read_back()
        before_after.load(run.path)
        if (run.path / layout.CONFIG).exists():
            load_yaml_mapping(run.path / layout.CONFIG, "RUN_DIR")
    if not single:
        sweep_spec(path)


def main(argv: list[str] | None = None) -> Path:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("path", help="a run directory (holding metrics.jsonl) or a sweep directory")
    parser.add_argument("--out", default=None, help="report file (default <path>/report.md); plots/ goes beside it")
    parser.add_argument("--config", default=None, help="the recipe YAML, when the run directory has no config.yaml")
    parser.add_argument("--before", default=None, help="base model: roll out before/after on held-out prompts")
    parser.add_argument("--num_prompts", type=positive_int, default=32, help="held-out prompts for --before")
    parser.add_argument("--last_k", type=positive_int, default=5, help="generation steps averaged for final_* numbers")
    parser.add_argument("--max_rows", type=positive_int, default=20, help="rows of the metrics table")
    parser.add_argument(
        "--only", nargs="+", default=None, help="a sweep's runs to include (labels, seed suffix optional)"
    )
    parser.add_argument(
        "--x",
        nargs="+",
        choices=("step", "samples", "tokens"),
        default=["step", "samples"],
        help="x axes of a sweep page's figures (--x samples: fewer, smaller files to publish)",
    )
    args = parser.parse_args(argv)
    print(
        f"[report] writing {args.out or Path(args.path) / layout.REPORT} (figures in {layout.PLOTS_DIR}/ beside it)",
        flush=True,
    )
    out = build_report(
        args.path,
        args.out,
        args.before,
        args.config,
        args.num_prompts,
        args.last_k,
        args.max_rows,
        args.only,
        tuple(args.x),
    )
    print(f"[report] wrote {out}")
    return out


if __name__ == "__main__":
    cli(main)
