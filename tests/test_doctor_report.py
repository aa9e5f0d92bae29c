"""`rlvr report` on the main job's run (benchmarks/tiny_main_job.py's layout): the doctor's findings, and the
held-out before/after the main job computed beside the run instead of "Not run yet"."""

import importlib.util
import json

from conftest import REPO
from test_doctor import from_step, healthy_rows, write_run

from rlvr.analysis.before_after import load
from rlvr.analysis.loaders import load_run
from rlvr.analysis.report import build_report


def evaluation(model: str, correctness: float, exact: float) -> tuple[dict, list[dict]]:
    """An evaluate summary and its rollouts: one 3-letter prompt, two samples."""
    summary = {
        "model": model,
        "config": "recipes/tiny/grpo.yaml",
        "split": "test",
        "num_samples": 2,
        "overall": {
            "prompts": 1,
            "exact_match": exact,
            "mean_correctness": correctness,
            "pass@2": exact,
            "mean_format": 1.0,
        },
        "by_length": {"3": {"prompts": 1, "exact_match": exact, "pass@2": exact, "mean_format": 1.0}},
    }
    rollouts = [
        {
            "prompt_id": 0,
            "sample": i,
            "question": "Spell this word backward: cat",
            "answer": "tac",
            "difficulty": 3,
            "completion": "<think>c a t</think><answer>tac</answer>",
            "correctness": correctness,
            "format": 1.0,
            "success": exact,
            "binary": correctness,
        }
        for i in range(2)
    ]
    return summary, rollouts


def main_job():
    spec = importlib.util.spec_from_file_location("tiny_main_job", REPO / "benchmarks" / "tiny_main_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_evaluations(bench, model_after: str) -> None:
    for side, correctness, exact in (("before", 0.5, 0.0), ("after", 1.0, 1.0)):
        summary, rollouts = evaluation("models/tiny-speller" if side == "before" else model_after, correctness, exact)
        (bench / f"eval_{side}.json").write_text(json.dumps(summary))
        (bench / f"eval_{side}.rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts))


def test_main_job_report_shows_its_before_after_and_the_doctor(tmp_path):
    bench = tmp_path / "bench-tiny"
    run = write_run(bench / "grpo", from_step(healthy_rows(), 11, **{"step/truncated": 0.9}))
    write_evaluations(bench, "runs/bench-tiny/grpo")
    main_job().write_comparison(
        bench,
        "recipes/tiny/grpo.yaml",
        {
            "wall_s": {"total": 200.0, "grpo": 170.0},
            "samples_per_s": 52.0,
            "before": {"exact_match": 0.0, "mean_correctness": 0.5, "pass@2": 0.0, "maj@2": 0.0},
            "after": {"exact_match": 1.0, "mean_correctness": 1.0, "pass@2": 1.0, "maj@2": 1.0},
        },
    )

    report = build_report(run).read_text()
    before_after = report.split("## Before / after training")[1].split("## Time accounting")[0]
    assert "Not run yet" not in before_after
    assert "**1 improved, 0 regressed, 0 unchanged**" in before_after
    assert "held-out exact_match 0.000 -> 1.000" in before_after and "52.0 generated samples/s" in before_after
    assert "pass@2 0.000 -> 1.000 · maj@2 0.000 -> 1.000" in before_after
    doctor = report.split("## Doctor")[1].split("## ")[0]
    assert "1. [problem] step 11: truncation: 90%" in doctor and "**1 problem(s) found.**" in doctor


def test_the_report_pairs_no_evaluations_it_finds_beside_the_run(tmp_path):
    """Only a comparison written into the run folder (`rlvr before-after`, the main job) is shown: evaluation files
    that merely lie beside the run, of another model, are not paired with it."""
    bench = tmp_path / "bench-tiny"
    run = write_run(bench / "grpo", healthy_rows())
    write_evaluations(bench, "runs/elsewhere/other")
    assert load(load_run(run).path) is None
    assert "Not run yet" in build_report(run).read_text().split("## Before / after training")[1]
