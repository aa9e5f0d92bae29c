"""The speedrun figure: the first in-training evaluation whose held-out exact match, averaged over a window of
evaluations, reaches the target; with the samples generated and the step time spent by then."""

from pathlib import Path

from rlvr.analysis.loaders import Run
from rlvr.analysis.report import settings_section
from rlvr.analysis.summaries import SPEEDRUN_SAMPLES, speedrun, speedrun_line, summarize
from rlvr.metrics.keys import EVAL_EXACT, GENERATED_SAMPLES, TIME_TOTAL


def run_with(evals: dict[int, float], steps: int = 6) -> Run:
    rows = []
    for step in range(1, steps + 1):
        rows.append({"step": step, GENERATED_SAMPLES: 64 * step, TIME_TOTAL: 2.0})
        if step in evals:
            rows.append({"step": step, EVAL_EXACT: evals[step]})
    return Run(path=Path("."), label="r", rows=rows)


def test_a_lucky_single_evaluation_does_not_count_the_windowed_mean_does():
    run = run_with({1: 0.9, 2: 0.1, 3: 0.2, 4: 0.7, 5: 0.8, 6: 0.6})
    # windows of 3: (0.9,0.1,0.2)=0.40, (0.1,0.2,0.7)=0.33, (0.2,0.7,0.8)=0.567, (0.7,0.8,0.6)=0.70
    result = speedrun(run, target=0.6, window=3)
    assert result == {"step": 6, "samples": 384, "seconds": 12.0, "value": result["value"]}
    assert abs(result["value"] - 0.7) < 1e-9
    assert speedrun(run, target=0.5, window=3)["step"] == 5
    assert speedrun(run, target=0.9, window=1)["step"] == 1


def test_never_reached_and_the_printed_line():
    run = run_with({2: 0.1, 4: 0.2, 6: 0.3})
    assert speedrun(run, target=0.6, window=3) is None
    assert speedrun_line(None).endswith("not reached")
    line = speedrun_line({"step": 90, "samples": 5760, "seconds": 146.4, "value": 0.651}, evaluation="32 words x 2")
    assert "at step 90: 5,760 samples, 146 s of step time" in line and ">= 60%" in line
    assert line.startswith("speedrun (proxy, 32 words x 2:")


def test_a_sweeps_summary_and_settings_table_carry_the_speedrun_samples():
    runs = [
        Run(path=Path("."), label="fast-s1", rows=run_with({2: 0.6, 4: 0.7, 6: 0.8}).rows),
        Run(path=Path("."), label="fast-s2", rows=run_with({2: 0.5, 4: 0.6, 6: 0.7}).rows),
        Run(path=Path("."), label="slow-s1", rows=run_with({2: 0.1, 4: 0.2, 6: 0.3}).rows),
    ]
    summary = summarize(runs)
    assert [row[SPEEDRUN_SAMPLES] for row in summary] == [384, 384, None]  # (.6+.7+.8)/3, (.5+.6+.7)/3 at step 6
    summary[1][SPEEDRUN_SAMPLES] = 256  # a second seed that got there earlier: the setting's mean and spread
    table = "\n".join(settings_section(summary))
    header = next(line for line in table.splitlines() if line.startswith("| setting"))
    assert SPEEDRUN_SAMPLES in header
    fast = next(line for line in table.splitlines() if line.startswith("| fast"))
    assert "320 ± 64" in fast
    assert SPEEDRUN_SAMPLES in table.split("spread = half the range")[1]  # the legend says what the column is
