"""The range README's main-job figures come from: the main job over seeds x CPU kernel settings, one table.

    HF_HUB_OFFLINE=1 WANDB_MODE=disabled python benchmarks/main_job_range.py                 # seeds 42 1 2, both settings
    python benchmarks/main_job_range.py --seeds 42 --settings default --busy 1               # + a CPU hog beside it

The stated range spans the seeds and the CPU kernel settings this machine can run (`default`, `avx2`: why and what
each holds, `rlvr/runs/cpu_kernels.py`).

`--settle LOAD` waits before each run until the 1-minute load average is at most LOAD (benchmarks/machine_load.py), so
every run's GRPO phase is a quiet figure and not only the first one's; the table's load column is each run's load at
its start either way.

`--busy N` runs N busy-looping processes beside each run: a run's metrics must not depend on the machine's load, so
its `metrics.jsonl` must equal the quiet run's (timing fields aside); the table says whether it does. Each run is
`benchmarks/tiny_main_job.py --seed S --output_dir runs/main-job-range/<setting>-s<S>[-busy]`, skipped when its
benchmark.json exists (rerun to resume). Writes runs/main-job-range/summary.md.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the repo root

from benchmarks.machine_load import settle
from rlvr.analysis.loaders import read_jsonl
from rlvr.inputs import ArgumentParser, cli, non_negative_float, non_negative_int
from rlvr.metrics.keys import EXACT_MATCH, is_timing, mean_key, pass_key
from rlvr.runs import layout
from rlvr.runs.cpu_kernels import KERNEL_SETTINGS as SETTINGS
from rlvr.runs.cpu_kernels import environment_for

ROOT = Path("runs/main-job-range")


def spin() -> None:
    while True:
        pass


def metrics_without_timing(run_dir: Path) -> list[dict]:
    """A run folder's metrics rows without what the machine's speed moves: the time/* keys, epoch and timestamp."""
    rows = read_jsonl(run_dir / layout.METRICS)
    return [{k: v for k, v in row.items() if not is_timing(k) and k not in ("epoch", "timestamp")} for row in rows]


def run(setting: str, seed: int, busy: int, settle_below: float | None = None) -> Path:
    out = ROOT / f"{setting}-s{seed}{'-busy' if busy else ''}"
    if (out / "benchmark.json").exists():
        return out
    if settle_below is not None:
        settle(settle_below)
    hogs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(busy)]
    for hog in hogs:
        hog.start()
    try:
        env = environment_for(setting, os.environ)
        subprocess.run(
            [sys.executable, "benchmarks/tiny_main_job.py", "--seed", str(seed), "--output_dir", str(out)],
            env=env,
            check=True,
        )
    finally:
        for hog in hogs:
            hog.terminate()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=non_negative_int, nargs="+", default=[42, 1, 2])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--busy", type=non_negative_int, default=0, help="busy-looping processes beside each run")
    parser.add_argument(
        "--settle",
        type=non_negative_float,
        default=None,
        help="before each run, wait until the 1-minute load is at most this",
    )
    args = parser.parse_args(argv)
    lines = [
        "| setting | seed | load | before | after | mean correctness | pass@8 | GRPO s | same metrics as quiet |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for setting in args.settings:
        for seed in args.seeds:
            out = run(setting, seed, args.busy, args.settle)
            report = json.loads((out / "benchmark.json").read_text())
            same = "-"
            quiet = ROOT / f"{setting}-s{seed}"
            if args.busy and (quiet / "benchmark.json").exists():
                same = "yes" if metrics_without_timing(out / "grpo") == metrics_without_timing(quiet / "grpo") else "NO"
            load = report.get("load", {}).get("before")
            load = "?" if load is None else f"{load:.2f}"
            lines.append(
                f"| {setting}{' + busy' if args.busy else ''} | {seed} | {load} | "
                f"{report['before'][EXACT_MATCH]:.1%} | {report['after'][EXACT_MATCH]:.1%} | "
                f"{report['after'][mean_key('correctness')]:.3f} | {report['after'][pass_key(8)]:.3f} | "
                f"{report['wall_s']['grpo']:.0f} | {same} |"
            )
    ROOT.mkdir(parents=True, exist_ok=True)
    (ROOT / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    cli(main)
