"""Curves of one or more runs, overlaid: rewards, zero-std group fractions and time accounting.

    python -m rlvr.analysis.plots runs/tiny-grpo [runs/tiny-rloo ...] --out runs/plots [--x step samples tokens]

Each figure is drawn against optimizer step and against cumulative generated samples (the compute axis), one line
per run labelled with its directory name, each series raw and faint under its `smoothed` line; panels constant by
construction (`by_construction`) are left out. What each figure holds: docs/evaluation-and-reports.md ("Plots").
The same series print as a plain-text table for terminals.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import io

import matplotlib.pyplot as plt
from PIL import Image

from rlvr.analysis.loaders import (
    X_AXES,
    X_LABELS,
    Run,
    curriculum_series,
    load_runs,
    reward_series,
    step_metric_series,
    zero_std_series,
)
from rlvr.analysis.summaries import seed_group, time_totals
from rlvr.analysis.tables import series_table, text_table
from rlvr.inputs import ArgumentParser, check_writable_folder, cli, positive_int
from rlvr.metrics.keys import (
    ALL_CORRECT,
    ALL_TRUNCATED,
    ALL_WRONG,
    BINARY,
    CLIP_RATIO,
    CLIPPED_RATIO,
    CURRICULUM_PREFIX,
    ENTROPY,
    EVAL_EXACT,
    EXACT_SERIES,
    GENERATION_SHARE,
    GROUP_SERIES,
    IDENTICAL,
    MEAN_LENGTH,
    MIXED,
    OFF_POLICY_SERIES,
    PENALTY,
    TIME_PHASES,
    TOKEN_RATES,
    ZERO_STD_PREFIX,
    ZERO_STD_SIDE_PREFIX,
    ZERO_STD_SIDES,
    exact_key,
    group_key,
    reward_key,
    step_key,
    trl_reward_key,
    zero_std_key,
    zero_std_side_key,
)

DEFAULT_X = ("step", "samples")
# Legible at the width a repository page shows a figure: a panel is PANEL_INCHES x DPI = 540 px wide, so a
# three-column figure (four to six panels) is 1,620 px, and the smallest text (legends, MIN_FONT_PT) is
# 8 pt x 120 / 72 = 13 px high. Palette compression below keeps the committed PNGs small all the same.
DPI = 120
PANEL_INCHES = 4.5
MIN_FONT_PT = 8
PALETTE_COLOURS = 64  # line plots on white: 64 palette entries keep every line and its anti-aliasing, at ~1/3 the bytes


def finish_grid(fig, axes, used: int, title: str) -> None:
    """A grid of panels: the unused ones hidden, the legend on the first, the title above."""
    for ax in list(axes.flat)[used:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=MIN_FONT_PT)
    fig.suptitle(title)


def save(fig, path) -> Path:
    """The figure as a palette PNG (matplotlib renders it, Pillow, matplotlib's own dependency, quantizes it), then
    closed."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    image = Image.open(buffer).convert("RGB")
    image.quantize(colors=PALETTE_COLOURS, dither=Image.Dither.NONE).save(path, format="PNG", optimize=True)
    return path


UNIT_INTERVAL = (
    *map(reward_key, ("correctness", "format", "success", BINARY)),
    *GROUP_SERIES,  # fixed 0..1 axis,
    CLIPPED_RATIO,
    step_key("truncated"),
    step_key("truncated_wrong"),
    step_key("hollow_format"),
    step_key("false_full_credit"),
    CLIP_RATIO,
)  # with zero_std_frac/* and zero_std_side/*
SAMPLING_SERIES = (ENTROPY, MEAN_LENGTH, CLIPPED_RATIO)  # TRL's own keys
SMOOTHING = 0.6  # TensorBoard's default weight: each point keeps 60% of the running average
MIN_SMOOTHED_POINTS = 5  # shorter series are drawn raw only (with markers)
# A component that is a constant when its reward is not configured: (component, the TRL key its reward logs).
UNCONFIGURED_CONSTANT = {PENALTY: trl_reward_key(PENALTY)}
CURRICULUM_UNIT_INTERVAL = (f"{CURRICULUM_PREFIX}weight/", f"{CURRICULUM_PREFIX}pass_rate/")  # shares and rates
TITLES = {  # "all wrong" / "all right": no / every completion exactly right (`rlvr.metrics.reward_batch.group_side`)
    group_key(ALL_WRONG): "all groups, all wrong (no exact answer)",
    group_key(ALL_CORRECT): "all groups, all right (every answer exact)",
    group_key(MIXED): "all groups, right and wrong mixed",
    zero_std_side_key(ALL_WRONG): "flat on total, all wrong (no exact answer)",
    zero_std_side_key(ALL_CORRECT): "flat on total, all right (every answer exact)",
    zero_std_side_key(ALL_TRUNCATED): "flat on total, all cut off (length)",
    zero_std_side_key(IDENTICAL): "flat on total, one text (collapsed)",
    ENTROPY: "sampling entropy (TRL)",
}


def smoothed(values: list[float], weight: float = SMOOTHING) -> list[float]:
    """The debiased exponential moving average TensorBoard draws: s_t = w s_(t-1) + (1 - w) y_t from s_(-1) = 0,
    divided by 1 - w^(t+1) so the first points are not pulled toward 0. A constant stays that constant."""
    out, running = [], 0.0
    for t, value in enumerate(values):
        running = weight * running + (1 - weight) * value
        out.append(running / (1 - weight ** (t + 1)))
    return out


def by_construction(run: Run, key: str) -> bool:
    """`key` is constant in `run` whatever the policy does: a component whose reward the run does not configure
    (`UNCONFIGURED_CONSTANT`: `avg_penalty` 0 and `zero_std_frac/penalty` 1 without the overlong penalty)."""
    return any(
        key in (reward_key(component), zero_std_key(component)) and not run.values(logged)
        for component, logged in UNCONFIGURED_CONSTANT.items()
    )


def panel_keys(runs: list[Run], keys, x: str) -> list[str]:
    """The series worth a panel: some run has data for it that is not constant by construction."""
    return [k for k in keys if any(run.series(k, x)[0] and not by_construction(run, k) for run in runs)]


def panel_figure(runs: list[Run], keys, x: str, path: Path, title: str) -> Path | None:
    """One panel per series, every run overlaid, each raw (faint) under its smoothed line; panels no run has data
    for, or constant by construction, are left out."""
    keys = panel_keys(runs, keys, x)
    if not keys:
        return None
    cols = min(3, len(keys))
    rows = -(-len(keys) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL_INCHES * cols, 3.2 * rows), squeeze=False)
    colours = {group: f"C{i % 10}" for i, group in enumerate(dict.fromkeys(seed_group(run.label) for run in runs))}
    for ax, key in zip(axes.flat, keys):
        labelled = set()
        for run in runs:  # the seeds of one setting share a colour and one legend entry
            xs, ys = run.series(key, x)
            group = seed_group(run.label)
            if not xs or by_construction(run, key):
                continue
            label = None if group in labelled else group
            labelled.add(group)
            if len(xs) < MIN_SMOOTHED_POINTS:
                ax.plot(xs, ys, marker=".", color=colours[group], alpha=0.85, label=label)
            else:
                ax.plot(xs, ys, color=colours[group], alpha=0.25, linewidth=0.8)
                ax.plot(xs, smoothed(ys), color=colours[group], alpha=0.9, label=label)
        ax.set_title(TITLES.get(key, key), fontsize=10)
        ax.set_xlabel(X_LABELS[x])
        if key in UNIT_INTERVAL or key.startswith(
            (EVAL_EXACT, ZERO_STD_PREFIX, ZERO_STD_SIDE_PREFIX, *CURRICULUM_UNIT_INTERVAL)
        ):
            ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    finish_grid(fig, axes, len(keys), title)
    return save(fig, path)


PREDICTION_STYLES = {  # series -> (label, line style); the logged partial-credit series is the grey reference
    exact_key("observed"): ("exact match, observed", "-"),
    exact_key("predicted_self"): ("p^G+(1-p)^G, p = own group", "--"),
    exact_key("predicted_peers"): ("p^G+(1-p)^G, p = peer groups", ":"),
    zero_std_key("correctness"): ("correctness, logged", "-"),
}


def prediction_figure(runs: list[Run], x: str, path: Path) -> Path | None:
    """One panel per run (a G sweep reads left to right): zero-std exact match observed vs the closed form's
    predictions, with the logged partial-credit `zero_std_frac/correctness` in grey (see `zero_std_prediction`)."""
    firsts = {}  # one panel per setting: its first seed (the others read alike)
    for run in runs:
        if run.series(EXACT_SERIES[0], x)[0]:
            firsts.setdefault(seed_group(run.label), run)
    runs = list(firsts.values())
    if not runs:
        return None
    cols = min(5, len(runs))
    rows = -(-len(runs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL_INCHES * cols, 3.2 * rows), squeeze=False, sharey=True)
    for ax, run in zip(axes.flat, runs):
        for key, (label, style) in PREDICTION_STYLES.items():
            xs, ys = run.series(key, x)
            grey = {"color": "0.6", "linewidth": 1} if key.startswith(ZERO_STD_PREFIX) else {}
            ax.plot(xs, ys, linestyle=style, label=label, **grey)
        ax.set_title(run.label, fontsize=10)
        ax.set_xlabel(X_LABELS[x])
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    finish_grid(fig, axes, len(runs), "zero-std groups: observed vs predicted from pass rates")
    return save(fig, path)


def time_figure(runs: list[Run], path: Path) -> Path:
    """Where the seconds went: stacked seconds per phase for each run, and generation's share per step."""
    fig, (bars, share) = plt.subplots(1, 2, figsize=(2.5 * PANEL_INCHES, 3.8))
    bottoms = [0.0] * len(runs)
    for phase in TIME_PHASES:
        seconds = [time_totals(run)[phase] for run in runs]
        bars.bar([run.label for run in runs], seconds, bottom=bottoms, label=phase)
        bottoms = [b + s for b, s in zip(bottoms, seconds)]
    bars.set_ylabel("seconds (summed over steps)")
    bars.set_title("time per phase")
    bars.legend(fontsize=MIN_FONT_PT)
    bars.tick_params(axis="x", labelrotation=20)
    for run in runs:
        xs, ys = run.series(GENERATION_SHARE, "step")
        if xs:
            share.plot(xs, ys, marker="." if len(xs) < 30 else None, label=run.label)
    share.set_ylim(-0.05, 1.05)
    share.set_xlabel(X_LABELS["step"])
    share.set_title("generation share of step time")
    share.grid(alpha=0.3)
    share.legend(fontsize=MIN_FONT_PT)
    return save(fig, path)


def held_out_series(runs: list[Run]) -> list[str]:
    """Held-out exact match during training (`eval_exact_match`, then by word length), beside the training reward."""
    by_length = {key for run in runs for row in run.rows for key in row if key.startswith(EVAL_EXACT + "/")}
    return [EVAL_EXACT, *sorted(by_length, key=lambda key: (len(key), key))]


def plot_runs(runs: list[Run], out_dir, x_axes=DEFAULT_X) -> list[Path]:
    """Write every figure into out_dir; returns the PNG paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for x in x_axes:
        written.append(
            panel_figure(
                runs,
                [*reward_series(runs), *held_out_series(runs)],
                x,
                out / f"rewards_by_{x}.png",
                "mean reward per component; held-out exact match during training (eval_)",
            )
        )
        written.append(
            panel_figure(
                runs,
                (*zero_std_series(runs), *map(zero_std_side_key, ZERO_STD_SIDES), *GROUP_SERIES),
                x,
                out / f"zero_std_by_{x}.png",
                "zero-std groups: no contrast, no gradient (zero_std_side: which side)",
            )
        )
        written.append(
            panel_figure(
                runs,
                SAMPLING_SERIES,
                x,
                out / f"sampling_by_{x}.png",
                "sampling: entropy (collapse: near 0), length, clipped share",
            )
        )
        written.append(
            panel_figure(runs, step_metric_series(runs), x, out / f"step_metrics_by_{x}.png", "per-step metrics")
        )
        written.append(
            panel_figure(
                runs,
                (*TOKEN_RATES, *OFF_POLICY_SERIES),
                x,
                out / f"throughput_by_{x}.png",
                "generated tokens/s; vLLM: importance ratio, log-prob gap; reused batches: clip",
            )
        )
        written.append(prediction_figure(runs, x, out / f"zero_std_prediction_by_{x}.png"))
        written.append(
            panel_figure(  # only runs with a curriculum log these; None (no figure) otherwise
                runs,
                curriculum_series(runs),
                x,
                out / f"curriculum_by_{x}.png",
                "curriculum: level, level mix (weights that drew each step) and exact-match pass rate per level",
            )
        )
    written.append(time_figure(runs, out / "time_accounting.png"))
    return [p for p in written if p is not None]


def terminal_tables(runs: list[Run], max_rows: int = 20) -> str:
    return "\n\n".join(f"== {run.label} ==\n" + text_table(*series_table(run, max_rows)) for run in runs)


def main(argv: list[str] | None = None) -> list[Path]:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("run_dirs", nargs="+", help="run directories (holding metrics.jsonl) or sweep directories")
    parser.add_argument("--out", required=True, help="folder for the PNGs")
    parser.add_argument("--x", nargs="+", choices=list(X_AXES), default=list(DEFAULT_X), help="x axes to draw")
    parser.add_argument("--max_rows", type=positive_int, default=20, help="rows per run in the printed table")
    args = parser.parse_args(argv)
    check_writable_folder(args.out, "--out")
    runs = load_runs(args.run_dirs)
    print(f"[plots] writing to {args.out}/", flush=True)
    paths = plot_runs(runs, args.out, args.x)
    print(terminal_tables(runs, args.max_rows))
    print("\n" + "\n".join(f"[plots] wrote {p}" for p in paths))
    return paths


if __name__ == "__main__":
    cli(main)
