"""`rlvr sweep --jobs 2` against the same sweep one run at a time: wall time of the whole smoke sweep, and whether each
run's metrics are the ones it gets trained alone at the same thread count.

    python benchmarks/sweep_jobs.py                               # 4-run smoke sweep, order seq, jobs, jobs, seq
    python benchmarks/sweep_jobs.py --rounds 1 --max_steps 1      # the smallest check that it works (seq, jobs)

Each pass is the command a user types (`python -m rlvr.analysis.sweep SPEC --smoke --only ... --out <fresh folder>`,
plus `--jobs N` for the parallel passes), timed from start to exit, evaluation and report included; passes alternate
(seq, jobs, jobs, seq, ...) so a change in the machine's load hits both alike, and the load average is printed before
each. Then every run is trained alone, one at a time, at the thread count the --jobs passes gave it (the cores
divided by N: `--cpu_threads` of that count), and its metrics.jsonl rows are compared with the same run's from every
--jobs pass, every key but the timings. The sequential passes train at the recipe's own thread count; whether they
too match the alone runs is printed as well (a different thread count may sum in another order).

Prints per pass: the load average (1/5/15 min) before it, its wall time and each run's thread count; per mode the mean and the spread (half
the best-to-worst range); the ratio jobs / sequential; and per run `equal` or the first differing key. Exit 1 when a
--jobs run's metrics differ from its run alone. Meaningful only on an otherwise idle machine.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlvr.analysis.loaders import read_jsonl
from rlvr.inputs import ArgumentParser, cli, positive_int
from rlvr.metrics.keys import is_timing
from rlvr.runs import layout

REPO = Path(__file__).resolve().parents[1]
SPEC = "sweeps/temperature.yaml"
ONLY = ["T0.6-s1", "T0.6-s2", "T1.4-s1", "T1.4-s2"]  # 4 runs of a committed sweep


def sweep_command(spec: str, only: list[str], out: Path, max_steps: int, extra: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlvr.analysis.sweep",
        spec,
        "--smoke",
        "--max_steps",
        str(max_steps),
        "--out",
        str(out),
        "--only",
        *only,
        *extra,
    ]


def timed(command: list[str], log: Path) -> float:
    """Run one sweep to its end (its console into `log`); its wall seconds. A failed sweep stops the benchmark."""
    start = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.run(command, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, check=False).returncode
    seconds = time.perf_counter() - start
    if code:
        sys.exit(f"error: sweep failed (exit {code}): {' '.join(command)}; see {log}")
    return seconds


def measured(row: dict) -> dict:
    """A metrics row without its timings: what the run computed."""
    return {key: value for key, value in row.items() if not is_timing(key)}


def first_difference(run: Path, alone: Path) -> str | None:
    """None when the two runs logged the same rows (every key but timings), else where they first differ."""
    rows = [[measured(row) for row in read_jsonl(path / layout.METRICS)] for path in (run, alone)]
    if len(rows[0]) != len(rows[1]):
        return f"{len(rows[0])} rows vs {len(rows[1])}"
    for index, (a, b) in enumerate(zip(*rows)):
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key), b.get(key)
            if x != y and not (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)):
                return f"row {index} {key}: {x!r} vs {y!r}"
    return None


def thread_counts(sweep_out: Path) -> str:
    """The intra-op thread counts the pass's runs report (`[threads] N ...` in each train.log), e.g. `2, 2, 2, 2` for a
    sequential pass on 2 cores and `1, 1, 1, 1` under `--jobs 2` (rlvr.runs.cpu_threads)."""
    logs = sorted(sweep_out.glob("*/*/train.log"))
    counts = [line.split()[1] for log in logs for line in log.read_text().splitlines() if line.startswith("[threads] ")]
    return ", ".join(counts) or "not reported"


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / 2


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--spec", default=SPEC)
    parser.add_argument("--only", nargs="+", default=ONLY, help="the sweep's runs to train (4 by default)")
    parser.add_argument("--jobs", type=positive_int, default=2)
    parser.add_argument("--max_steps", type=positive_int, default=2, help="steps per run (a smoke sweep: at most 5)")
    parser.add_argument("--rounds", type=positive_int, default=2, help="pairs of passes: 2 = seq, jobs, jobs, seq")
    parser.add_argument("--keep", default=None, help="folder for the runs (default: a fresh temporary folder, kept)")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    threads = cores // args.jobs
    root = Path(args.keep or tempfile.mkdtemp(prefix="sweep-jobs-"))
    root.mkdir(parents=True, exist_ok=True)
    print(
        f"[bench] {args.spec} --only {' '.join(args.only)}: {len(args.only)} runs x {args.max_steps} steps, "
        f"{cores} cores, --jobs {args.jobs} ({threads} thread(s) a run); runs under {root}",
        flush=True,
    )

    order = [mode for i in range(args.rounds) for mode in (("seq", "jobs") if i % 2 == 0 else ("jobs", "seq"))]
    times: dict[str, list[float]] = {"seq": [], "jobs": []}
    for index, mode in enumerate(order):
        out = root / f"{index}-{mode}"
        extra = ["--jobs", str(args.jobs)] if mode == "jobs" else []
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        seconds = timed(sweep_command(args.spec, args.only, out, args.max_steps, extra), root / f"{index}-{mode}.log")
        times[mode].append(seconds)
        print(
            f"[bench] pass {index + 1}/{len(order)} {mode:4s}: load {load} before, {seconds:.1f} s, threads per run "
            f"{thread_counts(out)}",
            flush=True,
        )

    alone = root / "alone"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    seconds = timed(
        sweep_command(args.spec, args.only, alone, args.max_steps, ["--cpu_threads", str(threads)]), root / "alone.log"
    )
    print(f"[bench] each run alone at {threads} thread(s): load {load} before, {seconds:.1f} s", flush=True)

    for mode, values in times.items():
        print(
            f"[bench] {mode:4s}: {' / '.join(f'{v:.1f}' for v in values)} s, mean {sum(values) / len(values):.1f} "
            f"± {spread(values):.1f} (half range)"
        )
    ratio = (sum(times["jobs"]) / len(times["jobs"])) / (sum(times["seq"]) / len(times["seq"]))
    print(f"[bench] ratio jobs / sequential: {ratio:.3f} (below 1: --jobs {args.jobs} is faster)")

    name = next(Path(p).name for p in (root / "0-seq").iterdir() if p.is_dir())  # the sweep's folder name
    mismatches = 0
    for label in args.only:
        runs = {f"{i}-{mode}": root / f"{i}-{mode}" / name / label for i, mode in enumerate(order)}
        verdicts = {key: first_difference(path, alone / name / label) for key, path in runs.items()}
        mismatches += sum(1 for key, why in verdicts.items() if why and key.endswith("jobs"))
        print(
            f"[bench] {label} vs alone at {threads} thread(s): "
            + "; ".join(f"{key} {'equal' if why is None else 'DIFFERS: ' + why}" for key, why in verdicts.items())
        )
    print(f"[bench] --jobs runs equal to the runs alone: {'yes' if mismatches == 0 else f'no ({mismatches} differ)'}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(cli(main))
