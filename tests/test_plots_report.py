"""Plots, tables, report and before/after over KNOWN hand-written records: every number below is worked out by hand."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FAST_RECIPE, REPO

from rlvr.analysis import before_after, plots, report
from rlvr.analysis.loaders import load_run, load_runs
from rlvr.analysis.summaries import normalized_auc, samples_to_reach, summarize
from rlvr.analysis.zero_std import group_outcomes
from rlvr.inputs import ConfigError

# Four logged steps of 16 samples each, then TRL's closing row.
CORRECTNESS = [0.0, 0.25, 0.5, 0.5]
ZERO_STD_TOTAL = [0.5, 0.25, 0.25, 0.0]


# what every run's table and report show: the reward components and the flat-group share on total
EVERY_RUNS_SERIES = ("avg_correctness", "avg_format", "avg_success", "avg_binary", "zero_std_frac/total")


def metric_rows(samples_per_step=16, correctness=CORRECTNESS, zero_std=ZERO_STD_TOTAL, runtime=12.5):
    rows = []
    for i, (corr, zstd) in enumerate(zip(correctness, zero_std), start=1):
        rows.append(
            {
                "step": i,
                "epoch": i / 100,
                "time": 1000.0 + 4 * i,
                "loss": 0.01,
                "avg_correctness": corr,
                "avg_format": 0.5 + corr / 2,
                "avg_binary": corr / 2,
                "avg_success": corr / 4,
                "zero_std_frac/success": 1.0,
                "avg_total": corr + 0.5 * (0.5 + corr / 2),
                "avg_penalty": 0.0,
                "zero_std_frac/total": zstd,
                "zero_std_frac/correctness": 1.0 - corr,
                "zero_std_frac/format": 0.5,
                "zero_std_frac/penalty": 1.0,
                "zero_std_frac/binary": 1.0,
                "generation_step": float(i),
                "generated_samples": float(samples_per_step * i),
                "generated_tokens": float(100 * i),
                "time/generation_s": 2.0,
                "time/scoring_s": 0.5,
                "time/logprobs_s": 0.5,
                "time/optimization_s": 1.0,
                "time/total_s": 4.0,
                "time/generation_share": 0.5,
            }
        )
    rows.append({"step": len(correctness), "epoch": 0.04, "time": 1020.0, "train_runtime": runtime, "train_loss": 0.01})
    return rows


# Two steps, two groups of G = 2: step 1 has one all-wrong and one mixed group; step 2 one all-correct, one all-wrong.
ROLLOUT_CORRECTNESS = {(1, 0): [0.0, 0.0], (1, 1): [1.0, 0.0], (2, 0): [1.0, 1.0], (2, 1): [0.0, 0.0]}


def rollout_rows():
    return [
        {
            "step": step,
            "round": 0,
            "group": group,
            "question": "Spell this word backward: cat",
            "answer": "tac",
            "difficulty": 3,
            "completion": "<think>t a c</think><answer>tac</answer>",
            "completion_tokens": 10,
            "correctness": c,
            "format": 1.0,
            "success": float(c == 1.0),
            "penalty": 0.0,
            "total": c + 0.5,
            "binary": c,
        }
        for (step, group), scores in ROLLOUT_CORRECTNESS.items()
        for c in scores
    ]


def write_run(path: Path, rows, rollouts=None, config_text="# a recipe\nnum_generations: 2\n") -> Path:
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    if rollouts is not None:
        (path / "rollouts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rollouts))
    if config_text:
        (path / "config.yaml").write_text(config_text)
    return path


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return write_run(tmp_path / "known-run", metric_rows(), rollout_rows())


def test_summary_numbers_match_hand_computation(run_dir):
    (row,) = summarize([load_run(run_dir)], last_k=2)
    # trapezoids over samples 16..64: 16*(0+.25)/2 + 16*(.25+.5)/2 + 16*(.5+.5)/2 = 2 + 6 + 8 = 16; / 48 = 1/3
    assert row["auc_correctness"] == pytest.approx(1 / 3)
    assert row["auc_up_to_samples"] == 64
    assert row["final_correctness"] == pytest.approx(0.5)  # mean of the last 2
    assert row["final_binary"] == pytest.approx(0.25)
    assert row["final_success"] == pytest.approx(0.125)
    assert row["mean_zero_std_total"] == pytest.approx(0.25)  # (.5 + .25 + .25 + 0) / 4
    assert row["mean_zero_std_correctness"] == pytest.approx(0.6875)  # (1 + .75 + .5 + .5) / 4
    assert row["samples_to_0.85"] is None  # correctness never gets there
    # windows of 2 logged steps: 0, .125, .375 >= .3 at the third step, i.e. after 48 generated samples
    assert samples_to_reach(load_run(run_dir), 0.3, window=2) == 48
    assert samples_to_reach(load_run(run_dir), 0.0, window=2) == 32  # the first full window, not the first step
    assert row["generation_share"] == pytest.approx(0.5)  # 8 s of 16 s
    assert row["wall_time_s"] == 12.5 and row["finished"]
    assert (row["steps"], row["generated_samples"], row["generated_tokens"]) == (4, 64, 400)


def test_auc_is_cut_at_a_shared_budget_by_interpolation():
    xs, ys = [16, 32, 48, 64], CORRECTNESS
    # up to 40: 16*(0+.25)/2 = 2, then y(40) = .375 and 8*(.25+.375)/2 = 2.5; (2 + 2.5) / 24
    assert normalized_auc(xs, ys, 40) == pytest.approx(4.5 / 24)
    assert normalized_auc([16], [0.7]) == 0.7


def test_group_outcomes_split_zero_std_groups_into_all_wrong_and_all_correct():
    rows = group_outcomes(rollout_rows())
    assert [row["step"] for row in rows] == [1, 2]  # rollouts and metrics number the same step alike
    assert [row["generated_samples"] for row in rows] == [4, 8]
    assert [row["groups/all_wrong"] for row in rows] == [0.5, 0.5]
    assert [row["groups/all_correct"] for row in rows] == [0.0, 0.5]
    assert [row["groups/mixed"] for row in rows] == [0.5, 0.0]


def test_figures_are_legible_at_repository_page_size(run_dir, tmp_path, monkeypatch):
    """A four-panel figure is >= 1,600 px wide, every text on it >= 10 px high, and it stays a palette PNG."""
    from matplotlib.text import Text
    from PIL import Image

    smallest = []
    save = plots.save

    def measuring_save(fig, path):  # every figure plot_runs draws passes here: measure its text, then save it
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
        smallest.append(min(sizes) * plots.DPI / 72)  # points -> pixels at the saved resolution
        return save(fig, path)

    monkeypatch.setattr(plots, "save", measuring_save)
    keys = ["avg_correctness", "avg_format", "avg_binary", "avg_total"]
    path = plots.panel_figure(load_runs([str(run_dir)]), keys, "step", tmp_path / "four.png", "four panels")
    with Image.open(path) as image:
        assert image.width >= 1600, image.size
        assert image.mode == "P"  # palette compression kept
    plots.plot_runs(load_runs([str(run_dir)]), tmp_path / "all", ["step"])
    assert len(smallest) > 3 and min(smallest) >= 10, smallest


def test_plots_cli_writes_pngs_and_prints_the_series_table(run_dir, tmp_path, capsys):
    out = tmp_path / "plots"
    paths = plots.main([str(run_dir), "--out", str(out), "--x", "step", "samples", "tokens"])
    names = {p.name for p in paths}
    for x in ("step", "samples", "tokens"):
        assert {f"rewards_by_{x}.png", f"zero_std_by_{x}.png"} <= names
    assert "time_accounting.png" in names
    assert all((out / name).stat().st_size > 1000 for name in names)
    printed = capsys.readouterr().out
    for series in (*EVERY_RUNS_SERIES, "time/generation_share"):
        assert series in printed
    assert "0.250" in printed and "known-run" in printed


def test_throughput_and_off_policy_readings_get_a_figure_when_logged(run_dir, tmp_path):
    gpu = {
        "tokens_per_s/generation": 50.0,
        "sampling/importance_sampling_ratio/mean": 0.97,
        "clip_ratio/region_mean": 0.1,
    }
    logged = write_run(tmp_path / "gpu", [{**r, **gpu} if "loss" in r else r for r in metric_rows()])
    for folder, drawn in ((run_dir, False), (logged, True)):
        paths = plots.plot_runs(load_runs([folder]), tmp_path / folder.name, ("step",))
        assert ("throughput_by_step.png" in {p.name for p in paths}) == drawn


def test_run_report_holds_config_tables_plots_zero_std_reading_and_time(run_dir):
    path = report.build_report(run_dir, last_k=2)
    text = path.read_text()
    assert "num_generations: 2" in text  # the config used
    for series in (*EVERY_RUNS_SERIES, "zero_std_frac/correctness"):
        assert series in text
    assert (
        "| known-run | yes | 4 | 64 | 400 | 0.500 | 0.250 | 0.125 | 0.333 | 64 | - | 0.250 | 0.688 | - | 12.500 | 0.500 |"
        in text
    )
    assert "On average 25% of prompt groups had zero reward spread" in text
    assert "50% of the last steps' groups were all wrong and 25% all correct" in text
    # time table, with generated tokens/s of generation and of step time: 400 tokens / 8 s, / 16 s
    assert "| known-run | 8.000 | 2.000 | 2.000 | 4.000 | 16.000 | 0.500 | 12.500 | 4.000 | 50.000 | 25.000 |" in text
    assert "Not run yet: `python -m rlvr.analysis.before_after" in text
    for image in (
        "rewards_by_step",
        "rewards_by_samples",
        "zero_std_by_step",
        "zero_std_by_samples",
        "time_accounting",
    ):
        assert f"![{image}](plots/{image}.png)" in text
        assert (run_dir / "plots" / f"{image}.png").exists()


def test_sweep_report_compares_runs_at_the_budget_both_reached(tmp_path):
    sweep = tmp_path / "sweep"
    write_run(sweep / "g-2", metric_rows())
    write_run(sweep / "g-16", metric_rows(samples_per_step=8, correctness=[0.5, 0.5, 0.5, 1.0]))  # reaches 32 only
    (sweep / "sweep.yaml").write_text("name: sweep\n")
    (sweep / "g-2" / "code.json").write_text(
        json.dumps(
            {
                "trained_by": {
                    "sources": "0123abcd",
                    "libraries": {"torch": "2.13.0", "transformers": "4.99", "trl": "1.16.0"},
                },
                "machine": {"cpu": "Some CPU", "cpu_capability": "AVX2"},
            }
        )
    )
    text = report.build_report(sweep, last_k=2).read_text()
    assert (
        "Trained by code `0123abcd` (torch 2.13.0, transformers 4.99, trl 1.16.0) on Some CPU, AVX2 kernels "
        "(1 run); no readable code.json (1 run)."
    ) in text
    with (sweep / "summary.csv").open() as f:
        rows = {row["run"]: row for row in csv.DictReader(f)}
    assert list(rows) == ["g-2", "g-16"]  # numbers sort as numbers
    # g-2 up to 32 samples: 16*(0+.25)/2 / 16 = .125; g-16 over 8..32: (8*.5 + 8*.5 + 8*.75) / 24
    assert float(rows["g-2"]["auc_correctness"]) == pytest.approx(0.125)
    assert float(rows["g-16"]["auc_correctness"]) == pytest.approx(14 / 24)
    assert rows["g-2"]["auc_up_to_samples"] == rows["g-16"]["auc_up_to_samples"] == "32"
    assert json.loads((sweep / "summary.json").read_text())[1]["final_correctness"] == pytest.approx(0.75)
    assert "| g-16 |" in (sweep / "summary.md").read_text()
    assert "# Sweep report: sweep" in text and "name: sweep" in text
    assert "![rewards_by_samples](plots/rewards_by_samples.png)" in text
    assert (sweep / "plots" / "zero_std_by_samples.png").exists()


def test_unfinished_run_and_torn_last_line_are_read(tmp_path):
    path = write_run(tmp_path / "crashed", metric_rows()[:2])
    with (path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 3, "avg_corr')
    run = load_run(path)
    assert not run.finished and [row["step"] for row in run.rows] == [1, 2]
    assert "NOT finished" in report.build_report(path).read_text()


def test_bad_input_is_one_line_naming_the_field(tmp_path):
    with pytest.raises(ConfigError, match="RUN_DIR"):
        load_runs([tmp_path / "missing"])
    with pytest.raises(ConfigError, match="no metrics.jsonl"):
        load_runs([tmp_path])
    result = subprocess.run(
        [sys.executable, "-m", "rlvr.analysis.plots", str(tmp_path / "missing"), "--out", str(tmp_path)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: RUN_DIR: {tmp_path / 'missing'}: no such directory"]


def evaluation_record(prompt_id, sample, correctness, completion):
    return {
        "prompt_id": prompt_id,
        "sample": sample,
        "question": f"Spell q{prompt_id}",
        "answer": f"a{prompt_id}",
        "difficulty": 3 + prompt_id,
        "completion": completion,
        "correctness": correctness,
        "format": 1.0,
        "success": float(correctness == 1.0),
        "binary": correctness,
    }


def test_pair_prompts_matches_by_prompt_id_not_by_position():
    """Hand-written rollouts, the after side in another order: prompt 0 improves, 1 regresses, 2 stays level."""
    before = [
        evaluation_record(p, s, c, f"b{p}{s}")
        for p, s, c in [(0, 0, 0.0), (0, 1, 0.5), (1, 0, 1.0), (1, 1, 1.0), (2, 0, 0.5), (2, 1, 0.5)]
    ]
    after = [
        evaluation_record(p, s, c, f"a{p}{s}")
        for p, s, c in [(2, 0, 0.25), (1, 0, 0.0), (0, 0, 1.0), (2, 1, 0.75), (1, 1, 0.5), (0, 1, 1.0)]
    ]
    pairs = before_after.pair_prompts(before, after)
    assert [(p["prompt_id"], p["answer"]) for p in pairs] == [(0, "a0"), (1, "a1"), (2, "a2")]
    assert [(p["before"]["mean_correctness"], p["after"]["mean_correctness"]) for p in pairs] == [
        (0.25, 1.0),
        (1.0, 0.25),
        (0.5, 0.5),
    ]
    assert [(p["before"]["completion"], p["after"]["completion"]) for p in pairs] == [
        ("b00", "a00"),
        ("b10", "a10"),
        ("b20", "a20"),
    ]  # each side's first sample of that prompt
    assert before_after.changes(pairs) == {"improved": 1, "regressed": 1, "unchanged": 1}


def test_before_after_pairs_two_models_prompt_by_prompt_and_goes_into_the_report(tiny_model_dir, run_dir):
    """A random model before, the committed speller after: every pair holds each side's own rollouts of that prompt."""
    (run_dir / "config.yaml").write_text(Path(FAST_RECIPE).read_text())
    out = run_dir / "before_after"
    comparison = before_after.main(
        [
            "--before",
            tiny_model_dir,
            "--after",
            str(REPO / "models" / "tiny-speller"),
            "--config",
            FAST_RECIPE,
            "--num_prompts",
            "3",
            "--k",
            "1",
            "2",
            "--out",
            str(out),
        ]
    )
    rollouts = {
        side: [json.loads(line) for line in (out / f"{side}.rollouts.jsonl").read_text().splitlines()]
        for side in ("before", "after")
    }
    assert rollouts["before"] != rollouts["after"]
    assert len(comparison["prompts"]) == 3
    for pair in comparison["prompts"]:
        for side in ("before", "after"):
            own = [r for r in rollouts[side] if r["prompt_id"] == pair["prompt_id"]]
            assert own[0]["answer"] == pair["answer"] and own[0]["question"] == pair["question"]
            assert pair[side]["completion"] == own[0]["completion"]
            assert pair[side]["mean_correctness"] == pytest.approx(sum(r["correctness"] for r in own) / len(own))
    text = report.build_report(run_dir).read_text()
    assert "## Before / after training" in text and "pass@2 before" in text and "pass@2 after" in text
    assert f"`{comparison['prompts'][0]['answer']}`" in text


def test_before_after_rejects_a_missing_model(tmp_path):
    with pytest.raises(ConfigError, match="--before"):
        before_after.main(["--before", str(tmp_path), "--after", str(tmp_path), "--config", FAST_RECIPE])


def test_cli_overrides_are_flagged_against_the_recipe_yaml():
    recipe = {"max_steps": 100, "output_dir": "runs/x", "report_to": "none", "data": {"size": 10}, "seed": 42}
    args = {"max_steps": 2, "output_dir": "runs/x", "report_to": [], "seed": 42}
    assert report.cli_overrides_note(recipe, args) == (
        "# overridden on the command line (training_args.bin): max_steps: 2\n"
    )
    assert report.cli_overrides_note(recipe, {}) == ""


def test_settings_order_numerically_and_say_how_many_seeds_a_mean_covers():
    from rlvr.analysis.loaders import natural_key
    from rlvr.analysis.report import settings_section
    from rlvr.analysis.summaries import aggregate

    names = ["beta0.1-s1", "beta0-s1", "beta0.04-s2", "beta0.04-s1", "g16", "g2"]
    assert sorted(names, key=lambda n: natural_key(Path(n))) == [
        "beta0-s1",
        "beta0.04-s1",
        "beta0.04-s2",
        "beta0.1-s1",
        "g2",
        "g16",
    ]
    summary = [
        {"run": "hot-s1", "samples_to_0.85": 1000},
        {"run": "hot-s2", "samples_to_0.85": None},
        {"run": "hot-s3", "samples_to_0.85": 3000},
    ]
    (row,) = aggregate(summary, ["samples_to_0.85"])
    assert (row["samples_to_0.85"], row["samples_to_0.85_spread"], row["samples_to_0.85_n"]) == (2000, 1000, 2)
    assert "| hot | 3 | - | 2000 ± 1000 (2 of 3) |" in "\n".join(settings_section(summary))
    # Seconds are whole whether a mean lands above or below 100; a rate keeps three decimals.
    timed = [
        {"run": f"fast-s{seed}", "wall_time_s": t, "heldout_exact_match_after": em}
        for seed, (t, em) in enumerate([(92.9, 0.59), (103.2, 0.61)], 1)
    ]
    assert "| fast | 2 | - | 0.600 ± 0.010 | 98 ± 5 |" in "\n".join(settings_section(timed))


def test_settings_are_paired_by_seed_against_the_best():
    from rlvr.analysis.report import settings_section
    from rlvr.analysis.summaries import paired_by_seed

    summary = [
        {"run": f"{name}-s{seed}", "heldout_exact_match_after": value}
        for name, values in {"G4": (0.60, 0.62, 0.59), "G8": (0.59, 0.63, 0.55), "G16": (0.50, 0.52)}.items()
        for seed, value in zip((1, 2, 3), values)
    ]
    best, pairs = paired_by_seed(summary)
    assert best == "G4" and [name for name, _ in pairs] == ["G8", "G16"]
    assert pairs[0][1] == pytest.approx([-0.01, 0.01, -0.04]) and pairs[1][1] == pytest.approx([-0.10, -0.10])
    text = "\n".join(settings_section(summary))
    assert "Paired by seed against **G4**" in text
    assert "- G8: -1.0 / +1.0 / -4.0 (behind on 2 of 3)" in text and "- G16: -10.0 / -10.0 (behind on 2 of 2)" in text


def test_run_report_reads_the_evaluations_already_in_the_run_folder(run_dir):
    """A sweep's eval/after.json in the run folder (and the base model's eval/before.json beside the runs) show up in
    the report instead of "Not run yet"."""

    def evaluation(model, exact):
        block = {
            "prompts": 2,
            "samples": 16,
            "exact_match": exact,
            "mean_correctness": 0.9,
            "mean_success": exact,
            "pass@1": exact,
            "false_full_credit": 0.0625,
        }
        return {
            "model": model,
            "split": "test",
            "num_samples": 8,
            "sampling": {"temperature": 1.0},
            "overall": block,
            "by_length": {"3": block, "10": block},
        }

    (run_dir / "eval").mkdir()
    (run_dir / "eval" / "after.json").write_text(json.dumps(evaluation(str(run_dir), 0.625)))
    (run_dir.parent / "eval").mkdir()
    (run_dir.parent / "eval" / "before.json").write_text(json.dumps(evaluation("models/tiny-speller", 0.25)))
    text = report.build_report(run_dir, last_k=2).read_text()
    assert "Not run yet" not in text
    assert "after.json" in text and "before.json" in text and "models/tiny-speller" in text
    assert "0.625" in text and "false_full_credit" in text and "0.062" in text


def test_curriculum_curves_and_held_out_by_length_reach_plots_and_report(tmp_path):
    sweep = tmp_path / "curriculum"
    schedule = [
        {
            "curriculum/level": 5.0,
            "curriculum/weight/3": 0.5,
            "curriculum/weight/5": 0.5,
            "curriculum/pass_rate/3": 0.25 * i,
            "curriculum/pass_rate/5": 0.1,
        }
        for i in range(4)
    ]
    for label, exact in (
        ("fixed-s1", {"3": 0.5, "10": 0.0}),
        ("threshold-s1", {"3": 0.75, "10": 0.0}),
        ("threshold-s2", {"3": 0.25, "10": 0.5}),
    ):
        rows = metric_rows()
        if label.startswith("threshold"):
            rows = [{**row, **extra} for row, extra in zip(rows, schedule)] + rows[4:]
        run = write_run(sweep / label, rows)
        (run / "eval").mkdir()
        (run / "eval" / "after.json").write_text(
            json.dumps(
                {"overall": {"exact_match": 0.3}, "by_length": {k: {"exact_match": v} for k, v in exact.items()}}
            )
        )
    for label, exact in (("fixed-s1", 0.2), ("threshold-s1", 0.35), ("threshold-s2", 0.1)):  # at step 2: 32 samples
        (sweep / label / "eval" / "checkpoint-2.json").write_text(json.dumps({"overall": {"exact_match": exact}}))
    (sweep / "eval").mkdir()
    (sweep / "eval" / "before.json").write_text(
        json.dumps(
            {"overall": {"exact_match": 0.1}, "by_length": {"3": {"exact_match": 0.0}, "10": {"exact_match": 0.0}}}
        )
    )
    text = report.build_report(sweep, last_k=2).read_text()
    assert (sweep / "plots" / "curriculum_by_samples.png").exists()
    assert "## Curriculum" in text and "![curriculum_by_samples](plots/curriculum_by_samples.png)" in text
    assert "| setting | seeds | 3 | 10 |" in text  # lengths in numeric order
    assert "| threshold | 2 | 0.500 | 0.250 |" in text and "| before (base model) | - | 0.000 | 0.000 |" in text
    assert "mean_zero_std_correctness |" in text.split("## Settings")[1].split("\n")[2]  # idleness per setting
    # samples until held-out exact match reached fixed's final 0.3: threshold-s1 at its step-2 checkpoint, the
    # others only at the end (64 samples)
    reach = {
        row["run"]: row["heldout_samples_to_reference"] for row in json.loads((sweep / "summary.json").read_text())
    }
    assert reach == {"fixed-s1": 64, "threshold-s1": 32, "threshold-s2": 64}
    (sweep / "sweep.yaml").write_text("name: curriculum\nlabels: [threshold, fixed]\n")  # the spec names the reference
    (sweep / "threshold-s2" / "eval" / "after.json").write_text(json.dumps({"overall": {"exact_match": 0.5}}))
    report.build_report(sweep, last_k=2)  # threshold's final mean is now 0.4: only threshold-s2's end reaches it
    reach = {
        row["run"]: row["heldout_samples_to_reference"] for row in json.loads((sweep / "summary.json").read_text())
    }
    assert reach == {"fixed-s1": None, "threshold-s1": None, "threshold-s2": 64}
    run_text = report.build_report(sweep / "threshold-s1", last_k=2).read_text()
    assert "| step | samples | curriculum/level | curriculum/weight/3 | curriculum/weight/5 |" in run_text
    plain = report.build_report(sweep / "fixed-s1", last_k=2).read_text()
    assert "## Curriculum" not in plain and not (sweep / "fixed-s1" / "plots" / "curriculum_by_step.png").exists()
