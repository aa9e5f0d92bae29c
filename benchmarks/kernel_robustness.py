"""Which sweep readings survive a switch of CPU kernels: every ablation comparison on two copies of the same sweeps,
one trained with the kernels the libraries pick (`rlvr sweep SPEC --jobs 2`, into runs/sweeps) and one with every
library held to AVX2 as on a CPU without AVX-512 (the same command under `ATEN_CPU_CAPABILITY=avx2
MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2`, `--out runs/sweeps-avx2`; benchmarks/main_job_range.py uses
the same switch), same seeds.

    python benchmarks/kernel_robustness.py                                   # runs/sweeps vs runs/sweeps-avx2
    python benchmarks/kernel_robustness.py --sets runs/sweeps runs/sweeps-avx2 --out results/robustness-table.md

A reading "A ahead of B" (held-out exact match after training, mean over seeds) **holds** on one kernel set when the
gap is larger than the seed spread there (half the best-to-worst range, the larger of A's and B's); it **holds on
both** (given more sets, on all N) when it holds on each set with the same sign. Anything else is **within noise**, and the table says why: the
order flips between kernel sets, or the gap is inside the spread on one of them. Each setting's numbers are printed
per kernel set and pooled over both (seeds x kernels), the range a stranger's machine should land in.

`--exclude_lengths 4` recomputes each run's held-out exact match without the words of those lengths (from its
`eval/after.json`, weighted by samples): the readings under the jump a few runs make on their 4-letter words, which no
setting controls (results/robustness.md).
"""

from __future__ import annotations

from pathlib import Path

from rlvr.analysis.loaders import read_evaluation
from rlvr.analysis.summaries import aggregate, seed_group, seed_of
from rlvr.inputs import ArgumentParser, ConfigError, check_writable_folder, cli, name_inside, read_json
from rlvr.metrics.keys import BY_LENGTH, EXACT_MATCH, SAMPLES

KEY = "heldout_exact_match_after"
# (sweep folder, question, [(A, B), ...]): each pair is a reading "A ahead of B" the ablation pages make.
QUESTIONS = [
    (
        "reference",
        "which algorithm",
        [
            ("grpo", "rloo"),
            ("grpo", "drgrpo"),
            ("grpo", "dapo"),
            ("grpo", "ppo"),
            ("grpo", "gspo"),
            ("sapo", "grpo"),
            ("cispo", "grpo"),
            ("rloo", "drgrpo"),
        ],
    ),
    ("reference", "baseline or not", [("grpo", "reinforce"), ("rloo", "reinforce")]),
    ("group-size", "which G", [("G4", "G2"), ("G4", "G8"), ("G4", "G16"), ("G8", "G16"), ("G2", "G16")]),
    ("temperature", "which temperature", [("T1.0", "T0.6"), ("T1.0", "T1.4"), ("T1.4", "T0.6")]),
    ("kl-beta", "KL or not", [("beta0.04", "beta0"), ("beta0.1", "beta0"), ("beta0.1", "beta0.04")]),
    ("truncation-masking", "mask cut completions or not", [("cut34-masked", "cut34"), ("full48", "cut34")]),
    ("kl-estimator", "which KL estimator", [("k3", "k1"), ("k3", "k2"), ("k1", "k2")]),
    ("word-length", "which word lengths to train on", [("max6", "max8"), ("max6", "max4"), ("max8", "max4")]),
    ("lr-grpo", "learning rate: GRPO", [("lr1e-3", "lr3e-4")]),
    ("lr-rloo", "learning rate: RLOO", [("lr1e-3", "lr3e-3")]),
    ("lr-maxrl", "learning rate: MaxRL", [("lr3e-4", "lr1e-3"), ("lr3e-4", "lr1e-4")]),
    ("lr-reinforce", "learning rate: REINFORCE", [("lr3e-4", "lr1e-3"), ("lr3e-4", "lr1e-4")]),
]


def exact_match_without(run_dir: Path, lengths: set[str]) -> float | None:
    """Held-out exact match of a run over the words whose length is not in `lengths` (by_length, weighted by samples);
    None when the run has no evaluation, or none of the kept lengths. A damaged evaluation is a ConfigError."""
    path = run_dir / "eval" / "after.json"
    if not path.exists():
        return None
    kept = [block for length, block in read_evaluation(path).get(BY_LENGTH, {}).items() if length not in lengths]
    numbers = [(block.get(EXACT_MATCH), block.get(SAMPLES)) for block in kept]
    if not all(isinstance(value, (int, float)) and isinstance(samples, (int, float)) for value, samples in numbers):
        raise ConfigError("--sets", f"{path}: a by_length entry lacks a numeric exact_match or samples")
    total = sum(samples for _, samples in numbers)
    return sum(value * samples for value, samples in numbers) / total if total else None


def load(sweep_dir: Path, exclude_lengths: set[str]) -> list[dict] | None:
    path = sweep_dir / "summary.json"
    if not path.exists():
        return None
    rows = read_json(path, "--sets", list)  # a sweep summary: one object per run
    rows = [row for row in rows if isinstance(row, dict) and isinstance(row.get("run"), str)]
    for row in rows:  # a run's name is a folder of this sweep
        name_inside(sweep_dir, row["run"], "--sets", f"{path}: run")
    seedless = [row["run"] for row in rows if seed_of(row["run"]) is None]
    if seedless and len(seedless) < len(rows):
        raise ConfigError(
            "--sets",
            f"{path}: run {seedless[0]!r} has no seed (-s<N>) beside seeded runs: readings over seeds need every "
            "run of a sweep seeded, or none",
        )
    if exclude_lengths:
        rows = [{**row, KEY: exact_match_without(sweep_dir / row["run"], exclude_lengths)} for row in rows]
    return [row for row in rows if isinstance(row.get(KEY), (int, float))]


def by_setting(rows: list[dict]) -> dict[str, dict[int, float]]:
    """{setting: {seed: held-out exact match}}."""
    values: dict[str, dict[int, float]] = {}
    for row in rows:
        values.setdefault(seed_group(row["run"]), {})[seed_of(row["run"])] = row[KEY]
    return values


def settings(rows: list[dict]) -> dict[str, tuple[float, float]]:
    """{setting: (mean, spread)} over its seeds, as the sweep report's settings table computes them."""
    return {row["setting"]: (row[KEY], row[f"{KEY}_spread"] or 0.0) for row in aggregate(rows, [KEY])}


def pct(mean: float, spread: float) -> str:
    return f"{100 * mean:.1f} ± {100 * spread:.1f}"


def reading(a: tuple[float, float], b: tuple[float, float], a_seeds: dict[int, float], b_seeds: dict[int, float]):
    """(gap, spread, per-seed differences, holds) of "a ahead of b" on one kernel set; a, b = (mean, spread)."""
    gap, spread = a[0] - b[0], max(a[1], b[1])
    return gap, spread, [a_seeds[s] - b_seeds[s] for s in sorted(a_seeds) if s in b_seeds], abs(gap) > spread


def verdict(readings: list[tuple[float, float, list[float], bool]]) -> str:
    """The reading over every kernel set: "both" for two sets, "all N" for more (a third CPU's sweeps, say)."""
    signs = {gap > 0 for gap, *_ in readings}
    if len(signs) > 1:
        return "within noise (order flips)"
    if not all(holds for *_, holds in readings):
        return "within noise (gap inside the spread)"
    every = "both" if len(readings) == 2 else f"all {len(readings)}"
    return f"**holds on {every}**" if next(iter(signs)) else f"**reversed on {every}**"


def page(sets: list[Path], exclude_lengths: set[str] = frozenset()) -> str:
    names = [path.name for path in sets]
    without = f", without the {'/'.join(sorted(exclude_lengths))}-letter words" if exclude_lengths else ""
    lines = [
        (
            f"Held-out exact match after training{without}, % (mean ± half the seed range); kernel sets: "
            f"{', '.join(f'`{p}`' for p in sets)}."
        ),
        "",
    ]
    settings_header = f"| sweep | setting | {' | '.join(names)} | pooled (seeds x kernels) |"
    lines += [settings_header, "|" + "---|" * (settings_header.count("|") - 1)]
    comparisons, missing = [], []
    for sweep in dict.fromkeys(q[0] for q in QUESTIONS):
        summaries = [load(path / sweep, exclude_lengths) for path in sets]
        if any(s is None for s in summaries):
            if any(s is not None for s in summaries):  # run on some kernel sets only: say so
                missing.append(sweep)
            continue
        per_set, seeds = [settings(s) for s in summaries], [by_setting(s) for s in summaries]
        pooled = settings([row for s in summaries for row in s])
        for setting in sorted(per_set[0], key=lambda k: -per_set[0][k][0]):
            cells = [pct(*v[setting]) if setting in v else "-" for v in per_set]
            count = sum(len(v.get(setting, {})) for v in seeds)
            lines.append(f"| {sweep} | {setting} | {' | '.join(cells)} | {pct(*pooled[setting])} ({count} runs) |")
        for question_sweep, question, pairs in QUESTIONS:
            if question_sweep != sweep:
                continue
            for a, b in pairs:
                if all(a in v and b in v for v in per_set):
                    readings = [reading(v[a], v[b], by_seed[a], by_seed[b]) for v, by_seed in zip(per_set, seeds)]
                    comparisons.append((question, f"{a} − {b}", readings, verdict(readings)))
    header = f"| question | reading | {' | '.join(f'{n}: gap (spread), per seed in ascending order' for n in names)} | verdict |"
    lines += ["", header, "|" + "---|" * (header.count("|") - 1)]
    for question, label, readings, said in comparisons:
        cells = [
            f"{100 * gap:+.1f} ({100 * spread:.1f}) {' / '.join(f'{100 * d:+.1f}' for d in diffs)}"
            for gap, spread, diffs, _ in readings
        ]
        lines.append(f"| {question} | {label} | {' | '.join(cells)} | {said} |")
    if missing:
        lines += ["", f"Not in every kernel set yet (left out): {', '.join(missing)}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sets",
        nargs="+",
        type=Path,
        default=[Path("runs/sweeps"), Path("runs/sweeps-avx2")],
        help="sweep output folders (--out of rlvr sweep), one per kernel set",
    )
    parser.add_argument(
        "--exclude_lengths",
        nargs="+",
        default=[],
        metavar="N",
        help="word lengths left out of held-out exact match (from each run's eval/after.json)",
    )
    parser.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    if not all(n.isdigit() for n in args.exclude_lengths):  # the flags' own form first, then the folders they name
        raise ConfigError("--exclude_lengths", f"word lengths (integers), got {' '.join(args.exclude_lengths)}")
    if len(args.sets) < 2:
        raise ConfigError("--sets", "two or more sweep folders, one per kernel set")
    for path in args.sets:
        if not path.is_dir():
            raise ConfigError("--sets", f"{path} is not a folder")
    if args.out:
        if args.out.is_dir():
            raise ConfigError("--out", f"{args.out} is a folder; name the Markdown file, e.g. {args.out / 'table.md'}")
        check_writable_folder(args.out.parent, "--out")
    text = page(args.sets, set(args.exclude_lengths))
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    cli(main)
