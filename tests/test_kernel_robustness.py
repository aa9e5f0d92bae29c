"""benchmarks/kernel_robustness.py on hand-made sweep folders: a reading that keeps its order by more than the seed
spread on both kernel sets holds, one whose order flips or whose gap is inside the spread is within noise,
`--exclude_lengths` recomputes exact match from each run's by-length evaluation, and bad input is one line, exit 2."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from conftest import REPO

spec = importlib.util.spec_from_file_location("kernel_robustness", REPO / "benchmarks" / "kernel_robustness.py")
kernel_robustness = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel_robustness)


def write_sweep(root, name, values, by_length=None):
    """values: {label: [exact match per seed 1, 2, 3]}; by_length: {label: [{length: (exact, samples)} per seed]}."""
    folder = root / name
    rows = []
    for label, per_seed in values.items():
        for seed, value in enumerate(per_seed, 1):
            run = f"{label}-s{seed}"
            rows.append({"run": run, "heldout_exact_match_after": value})
            if by_length:
                (folder / run / "eval").mkdir(parents=True)
                lengths = {
                    str(n): {"exact_match": em, "samples": s} for n, (em, s) in by_length[label][seed - 1].items()
                }
                (folder / run / "eval" / "after.json").write_text(json.dumps({"by_length": lengths}))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(rows))


def test_holds_flips_and_inside_the_spread(tmp_path):
    write_sweep(
        tmp_path / "a",
        "temperature",
        {"T1.0": [0.60, 0.61, 0.59], "T0.6": [0.50, 0.51, 0.49], "T1.4": [0.52, 0.80, 0.52]},
    )
    write_sweep(
        tmp_path / "b",
        "temperature",
        {"T1.0": [0.60, 0.62, 0.58], "T0.6": [0.51, 0.50, 0.49], "T1.4": [0.55, 0.57, 0.56]},
    )
    write_sweep(
        tmp_path / "a",
        "kl-beta",
        {"beta0": [0.52, 0.56, 0.58], "beta0.04": [0.60, 0.61, 0.60], "beta0.1": [0.60, 0.61, 0.60]},
    )
    text = kernel_robustness.page([tmp_path / "a", tmp_path / "b"])
    lines = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| which temperature")}
    assert lines["T1.0 − T0.6"].endswith("| **holds on both** |")
    assert "+10.0 (1.0) +10.0 / +10.0 / +10.0" in lines["T1.0 − T0.6"]
    assert lines["T1.0 − T1.4"].endswith("| within noise (order flips) |")  # -1.3 on one set, +4.0 on the other
    assert lines["T1.4 − T0.6"].endswith("| within noise (gap inside the spread) |")  # +11.3 inside a spread of 14
    assert "| temperature | T1.0 | 60.0 ± 1.0 | 60.0 ± 2.0 | 60.0 ± 2.0 (6 runs) |" in text
    assert "Not in every kernel set yet (left out): kl-beta" in text  # only one set has it: no reading from it


def test_three_sets_say_all_three(tmp_path):
    # A third CPU's sweep: a reading that holds on every set says so; one that flips on the third is noise.
    for kernel, t14 in (("a", [0.52, 0.53, 0.52]), ("b", [0.55, 0.54, 0.55]), ("c", [0.70, 0.71, 0.70])):
        write_sweep(
            tmp_path / kernel,
            "temperature",
            {"T1.0": [0.60, 0.61, 0.59], "T0.6": [0.50, 0.51, 0.49], "T1.4": t14},
        )
    text = kernel_robustness.page([tmp_path / k for k in "abc"])
    lines = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| which temperature")}
    assert lines["T1.0 − T0.6"].endswith("| **holds on all 3** |")
    assert lines["T1.0 − T1.4"].endswith("| within noise (order flips) |")
    assert "| temperature | T1.0 | 60.0 ± 1.0 | 60.0 ± 1.0 | 60.0 ± 1.0 | 60.0 ± 1.0 (9 runs) |" in text


def test_exclude_lengths_reads_each_runs_evaluation(tmp_path):
    # The 4-letter words jump on one run (0.9 instead of 0.1): without them the two settings read the same.
    ones = [{3: (0.8, 10), 4: (0.1, 10)}] * 3
    jump = [{3: (0.8, 10), 4: (0.9, 10)}, *ones[1:]]
    for kernel in ("a", "b"):
        write_sweep(
            tmp_path / kernel,
            "group-size",
            {"G4": [0.45, 0.45, 0.45], "G8": [0.85, 0.45, 0.45]},
            by_length={"G4": ones, "G8": jump},
        )
    text = kernel_robustness.page([tmp_path / "a", tmp_path / "b"], {"4"})
    assert "without the 4-letter words" in text
    assert "| group-size | G4 | 80.0 ± 0.0 | 80.0 ± 0.0 | 80.0 ± 0.0 (6 runs) |" in text
    assert "| group-size | G8 | 80.0 ± 0.0 |" in text


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for args, message in [
        (["--sets", str(tmp_path)], "error: --sets: two or more sweep folders, one per kernel set"),
        (["--sets", str(tmp_path), str(tmp_path / "nope")], f"error: --sets: {tmp_path / 'nope'} is not a folder"),
        (["--exclude_lengths", "four"], "error: --exclude_lengths: word lengths (integers), got four"),
    ]:
        result = subprocess.run(
            [sys.executable, "benchmarks/kernel_robustness.py", *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=False,
        )
        assert (result.returncode, result.stderr.splitlines()) == (2, [message])
    (tmp_path / "a" / "reference").mkdir(parents=True)
    (tmp_path / "a" / "reference" / "summary.json").write_text("{not json")
    (tmp_path / "b").mkdir()
    result = subprocess.run(
        [sys.executable, "benchmarks/kernel_robustness.py", "--sets", str(tmp_path / "a"), str(tmp_path / "b")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(
        f"error: --sets: {tmp_path / 'a' / 'reference' / 'summary.json'} is not readable JSON"
    )
