"""The readings: truncation, the sides of flat groups, the hollow-format watch, on hand-made batches and recounted from
a real tiny run's records; and the two-line readings on a plain `trl.GRPOTrainer` (examples/plain_trl_grpo.py)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import CHECKOUT_ENV, REPO, TORCHRUN_TWO, read_jsonl, run_ok
from rlvr.rewards.functions import completion_text, correctness, format, success

from rlvr.analysis.loaders import load_run
from rlvr.analysis.plots import plot_runs
from rlvr.metrics.callbacks import RolloutLogCallback
from rlvr.metrics.keys import GENERATED_SAMPLES, LOSS, group_key, zero_std_side_key
from rlvr.metrics.readings import batch_readings, zero_std_sides
from rlvr.metrics.reward_batch import RewardBatch, flat_groups, is_truncated, reward_components
from rlvr.metrics.step_metrics import compute_step_metrics, hollow_content
from rlvr.runs import layout

RIGHT = "<think>s u n -> n u s</think><answer>nus</answer>"  # the tiny speller's own format, for the word `sun`


def scored_batch(texts, G, truncated=None, answer="nus", task="spell_backward") -> RewardBatch:
    """A batch scored by the real reward functions, every row asking for `answer`."""
    answers = [answer] * len(texts)
    rewards = torch.tensor([correctness(texts, answers), format(texts)], dtype=torch.float32).T
    return RewardBatch(
        rewards_per_func=rewards,
        names=["correctness", "format"],
        weights=torch.tensor([1.0, 0.5]),
        num_generations=G,
        completions=list(texts),
        rows=[{"answer": answer, "task": task} for _ in texts],
        completion_lengths=[len(t) for t in texts],
        truncated=truncated,
    )


def test_a_completion_is_truncated_when_it_does_not_end_in_a_stop_token():
    stop = {0, 9}  # EOS and padding
    assert not is_truncated([5, 6, 0], stop) and not is_truncated([5, 9], stop)
    assert is_truncated([5, 6, 7], stop) and is_truncated([0, 5], stop) and is_truncated([], stop)


def test_truncated_and_truncated_wrong_on_a_hand_made_batch():
    texts = [RIGHT, "<think>s u", RIGHT.replace("nus</answer>", "nsu</answer>"), "<think>n u"]
    metrics = compute_step_metrics(scored_batch(texts, 2, truncated=[False, True, False, True]))
    assert metrics["step/truncated"] == 0.5
    assert metrics["step/truncated_wrong"] == pytest.approx(2 / 3)  # 2 of the 3 wrong ones were cut
    all_right = compute_step_metrics(scored_batch([RIGHT] * 2, 2, truncated=[False, False]))
    assert all_right["step/truncated"] == 0.0 and "step/truncated_wrong" not in all_right
    unknown = compute_step_metrics(scored_batch(texts, 2))  # no completion ids: nothing claimed
    assert "step/truncated" not in unknown and "step/truncated_wrong" not in unknown


def test_zero_std_sides_on_hand_made_groups():
    wrong_a, wrong_b = "<think>s u", "<think>x y"  # both format 0.25, correctness 0: the same total
    groups = [
        ([RIGHT, RIGHT], [False, False]),  # flat, all correct, identical
        ([wrong_a, wrong_b], [True, True]),  # flat, all wrong, all truncated
        ([wrong_a, wrong_b], [True, False]),  # flat, all wrong
        ([RIGHT, wrong_a], [False, True]),  # contrast: on no side
        ([wrong_a, wrong_a], [False, False]),  # flat, all wrong, identical
        ([wrong_b, wrong_b], [True, True]),  # flat, all wrong, all truncated, identical
        ([wrong_a, "<think>s u n -> n u s</think>"], [True, True]),  # all wrong and cut, but totals differ: not flat
    ]
    batch = scored_batch([t for g, _ in groups for t in g], 2, truncated=[c for _, cut in groups for c in cut])
    assert flat_groups(batch.components()["total"], 2).tolist() == [True] * 3 + [False] + [True] * 2 + [False]
    assert zero_std_sides(batch) == pytest.approx(
        {
            "zero_std_side/all_wrong": 4 / 7,
            "zero_std_side/all_correct": 1 / 7,
            "zero_std_side/all_truncated": 2 / 7,
            "zero_std_side/identical": 3 / 7,
        }
    )
    readings = batch_readings(batch)  # the one dict ReadingsCallback and the plain-TRL readings log
    assert readings["zero_std_frac/total"] == pytest.approx(5 / 7) and "step/hollow_format" in readings
    assert set(zero_std_sides(scored_batch([RIGHT] * 2, 2))) == {
        "zero_std_side/all_wrong",
        "zero_std_side/all_correct",
        "zero_std_side/identical",
    }  # no ids, no truncation


@pytest.mark.parametrize(
    "text, hollow",
    [
        (RIGHT, False),
        ("<think>s n u</think><answer>snu</answer>", False),  # a wrong attempt built from the word's letters relates
        ("<think>SUN</think><answer>nus</answer>", False),
        ("<think></think><answer>nus</answer>", True),  # empty think
        ("<think> \n </think><answer>nus</answer>", True),  # whitespace think
        ("<think>s u n</think><answer>  </answer>", True),  # empty answer
        ("</answer></think><think><answer>", True),  # the four tags, nothing between them
        ("<think>let me think</think><answer>nus</answer>", True),  # filler: unrelated to the word
        ("<think>c o w -> w o c</think><answer>nus</answer>", True),  # another word's spelling
        ("<think>123</think><answer>nus</answer>", True),  # no letters at all
        ("<think></think><answer>nus", False),  # not full format: the format reward does not pay it in full
    ],
)
def test_hollow_content_for_spell_backward(text, hollow):
    assert hollow_content(text, {"answer": "nus", "task": "spell_backward"}) is hollow


def test_hollow_content_judges_only_emptiness_for_tasks_without_a_relatedness_rule():
    row = {"answer": "42", "task": "basic_arithmetic"}
    assert not hollow_content("<think>let me think</think><answer>42</answer>", row)
    assert hollow_content("<think></think><answer>42</answer>", row)
    texts = [RIGHT, "<think></think><answer>nus</answer>", "<think>hmm</think><answer>nus</answer>", "<think>"]
    assert compute_step_metrics(scored_batch(texts, 2))["step/hollow_format"] == 0.5


# ---- a real run through our trainer: the new keys recounted from rollouts.jsonl -----------------------------------


def recount_from_rollouts(rollouts: list[dict], G: int) -> dict[str, float]:
    """The new readings of one step, from its rollouts alone (rows in the logged order, G contiguous a group)."""
    cut = torch.tensor([r["truncated"] for r in rollouts])
    solved = torch.tensor([r["success"] == 1.0 for r in rollouts])
    flat = flat_groups(torch.tensor([r["total"] for r in rollouts], dtype=torch.float32), G)
    texts = [r["completion"] for r in rollouts]
    out = {
        "step/truncated": cut.float().mean().item(),
        "step/hollow_format": sum(hollow_content(r["completion"], r) for r in rollouts) / len(rollouts),
        "zero_std_side/all_wrong": (flat & ~solved.view(-1, G).any(1)).float().mean().item(),
        "zero_std_side/all_correct": (flat & solved.view(-1, G).all(1)).float().mean().item(),
        "zero_std_side/all_truncated": (flat & cut.view(-1, G).all(1)).float().mean().item(),
        "zero_std_side/identical": (
            flat & torch.tensor([len(set(texts[i : i + G])) == 1 for i in range(0, len(texts), G)])
        )
        .float()
        .mean()
        .item(),
    }
    if (~solved).any():
        out["step/truncated_wrong"] = cut[~solved].float().mean().item()
    return out


def test_a_real_runs_new_readings_equal_a_recount_from_its_rollouts(run_recipe):
    G = 4
    _, out = run_recipe("--max_steps", "2", "--num_generations", str(G), "--max_completion_length", "12")
    rows = [row for row in read_jsonl(Path(out) / "metrics.jsonl") if "loss" in row]
    rollouts = read_jsonl(Path(out) / "rollouts.jsonl")
    assert [row["step"] for row in rows] == [1, 2]
    truncated_seen = 0
    for row in rows:
        step_rollouts = [r for r in rollouts if r["step"] == row["step"]]
        recount = recount_from_rollouts(step_rollouts, G)
        assert {key: row.get(key) for key in recount} == pytest.approx(recount, abs=1e-9), row["step"]
        assert set(recount) - {"step/truncated_wrong"} <= set(row)
        # TRL's own clipped share, counted by TRL from the same ids: an independent count of the same thing
        assert row["step/truncated"] == pytest.approx(row["completions/clipped_ratio"], abs=1e-6)
        assert math.isfinite(row["entropy"])  # TRL's sampling entropy, drawn by the plots
        truncated_seen += sum(r["truncated"] for r in step_rollouts)
    assert truncated_seen > 0, "12 tokens should cut some completions of the random tiny model; the test has no power"

    from rlvr.analysis.loaders import load_runs
    from rlvr.analysis.plots import panel_keys, plot_runs

    runs = load_runs([out])
    written = {path.name for path in plot_runs(runs, Path(out) / "plots", ("step",))}
    assert {"sampling_by_step.png", "zero_std_by_step.png", "step_metrics_by_step.png"} <= written
    sides = [f"zero_std_side/{side}" for side in ("all_wrong", "all_correct", "all_truncated", "identical")]
    assert panel_keys(runs, ["entropy", "zero_std_frac/penalty", *sides], "step") == ["entropy", *sides]


def test_plots_smooth_as_trackers_do_and_skip_panels_constant_by_construction():
    from rlvr.analysis.loaders import Run
    from rlvr.analysis.plots import panel_keys, smoothed

    assert smoothed([2.0] * 4) == pytest.approx([2.0] * 4)  # debiased: no pull toward 0 at the start
    step = smoothed([0.0] * 3 + [1.0] * 7)
    assert step[:3] == [0.0] * 3 and all(a < b < 1.0 for a, b in itertools.pairwise(step[3:]))
    assert step[3] == pytest.approx(0.4 / (1 - 0.6**4))  # 0.6 x 0 + 0.4 x 1, debiased at the 4th point
    rows = [{"step": i, "avg_penalty": 0.0, "zero_std_frac/penalty": 1.0, "zero_std_frac/total": 0.5} for i in range(6)]
    keys = ["avg_penalty", "zero_std_frac/penalty", "zero_std_frac/total"]
    assert panel_keys([Run(Path("plain"), "plain", rows)], keys, "step") == ["zero_std_frac/total"]
    configured = [{**row, "rewards/penalty/mean": 0.0} for row in rows]  # the overlong penalty is one of its rewards
    assert panel_keys([Run(Path("dapo"), "dapo", configured)], keys, "step") == keys


# ---- the readings on a plain trl.GRPOTrainer ---------------------------------------------------------------------


def test_group_stats_on_a_plain_trainer_without_the_readings_stops_the_run_loudly(tiny_model_dir, tmp_path):
    from rlvr.data import DataSpec, build_dataset
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.metrics.readings import ReadingsCallback

    data = build_dataset(
        DataSpec.from_dict({"size": 20, "test_size": 2, "system_prompt": "tiny", "specs": [{"name": "spell_backward"}]})
    )["train"]
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        max_steps=1,
        num_generations=2,
        per_device_train_batch_size=4,
        max_completion_length=8,
        report_to="none",
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=tiny_model_dir, reward_funcs=[format], args=args, train_dataset=data, callbacks=[ReadingsCallback()]
    )
    with pytest.raises(RuntimeError, match="with_readings"):
        trainer.train()


def recount_from_completions(output_dir: Path, G: int, weights=(1.0, 0.5)) -> dict[int, dict[str, float]]:
    """Per step, the readings recounted from TRL's own completions table (`log_completions`: every completion of
    the generation batch with each reward, in TRL's gathered order), then rounded to float32 as TRL's
    `log_metric` averages them."""
    import pandas as pd

    from rlvr.metrics.reward_batch import zero_std_fraction

    steps = {}
    for path in sorted((output_dir / "completions").glob("completions_*.parquet")):
        table = pd.read_parquet(path)
        rewards = torch.tensor(table[["correctness", "format"]].to_numpy(), dtype=torch.float32)
        components = reward_components(rewards, ["correctness", "format"], torch.tensor(weights))
        texts = [completion_text(list(c) if not isinstance(c, str) else c) for c in table["completion"]]
        flat = flat_groups(components["total"], G)
        identical = torch.tensor([len(set(texts[i : i + G])) == 1 for i in range(0, len(texts), G)])
        recount = {f"zero_std_frac/{name}": zero_std_fraction(values, G) for name, values in components.items()}
        recount["avg_total"] = components["total"].mean().item()
        recount["zero_std_side/identical"] = (flat & identical).float().mean().item()
        steps[int(table["step"].iloc[0])] = {k: float(torch.tensor(v, dtype=torch.float32)) for k, v in recount.items()}
    return steps


def check_plain_run(output_dir: Path, G: int, steps: int) -> list[dict]:
    history = [
        row for row in json.loads((output_dir / "trainer_state.json").read_text())["log_history"] if "loss" in row
    ]
    recounts = recount_from_completions(output_dir, G)
    assert [row["step"] for row in history] == list(range(1, steps + 1)) == sorted(recounts)
    for row in history:
        for key, value in recounts[row["step"]].items():
            if key.startswith("zero_std"):
                assert row[key] == value, (row["step"], key)  # exact, after TRL's float32 averaging
            else:
                assert row[key] == pytest.approx(value, rel=1e-6), (row["step"], key)
        assert row["step/truncated"] == pytest.approx(row["completions/clipped_ratio"], abs=1e-6)
        assert {
            "step/false_full_credit",
            "step/hollow_format",
            "zero_std_side/all_wrong",
            "zero_std_side/all_truncated",
        } <= set(row)
    return history


EXAMPLE = REPO / "examples" / "plain_trl_grpo.py"
EXAMPLE_FLAGS = [
    "--max_steps",
    "2",
    "--max_completion_length",
    "24",
    "--scale_rewards",
    "batch",
    "--num_completions_to_print",
    "0",
]


def load_example():
    import importlib.util

    spec = importlib.util.spec_from_file_location("plain_trl_grpo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plain_trl_example_logs_zero_std_fractions_equal_to_a_recount(tmp_path):
    """One process, 12 completions a step in two micro-batches, `scale_rewards: batch` (where TRL's own
    `frac_reward_zero_std` is all-or-nothing): the readings stay per group and match the completions TRL logged."""
    out = tmp_path / "plain"
    trainer = load_example().main(
        ["--output_dir", str(out), "--gradient_accumulation_steps", "2", *EXAMPLE_FLAGS],
        model=str(REPO / "models" / "tiny-speller"),
    )
    assert type(trainer).__module__.startswith("trl.")  # TRL's trainer, not ours
    history = check_plain_run(out, G=4, steps=2)
    assert all(row["frac_reward_zero_std"] in (0.0, 1.0) for row in history)  # TRL's, under scale_rewards: batch


@pytest.mark.slow
def test_the_plain_trl_example_across_two_processes(tmp_path):
    """torchrun with 2 processes of 6 rows: the second prompt group straddles the ranks and is judged whole."""
    out = tmp_path / "plain-2"
    run_ok(
        [*TORCHRUN_TWO, str(EXAMPLE), "--output_dir", str(out), *EXAMPLE_FLAGS],
        env={**CHECKOUT_ENV, "OMP_NUM_THREADS": "1"},
        timeout=900,
    )
    check_plain_run(out, G=4, steps=2)


def test_evaluation_reports_the_watches_by_word_length():
    from rlvr.analysis.evaluate import format_table
    from rlvr.metrics.scoring import summarize

    def record(prompt_id, length, text, answer, cut):
        return {
            "prompt_id": prompt_id,
            "difficulty": length,
            "completion": text,
            "answer": answer,
            "task": "spell_backward",
            "truncated": cut,
            "completion_tokens": len(text),
            "exact": text.endswith(f"<answer>{answer}</answer>"),
            "correctness": correctness([text], [answer])[0],
            "format": format([text])[0],
        }

    three = [record(0, 3, RIGHT, "nus", False), record(0, 3, "<think>s u n ->", "nus", True)]
    four = [
        record(1, 4, "<think></think><answer>drow</answer>", "drow", False),
        record(1, 4, "<think>w o r d ->", "drow", True),
    ]
    summary = summarize(three + four, 2, [1], components=("correctness", "format"))
    assert summary["by_length"]["3"]["truncated"] == 0.5 and summary["by_length"]["3"]["truncated_wrong"] == 1.0
    assert summary["by_length"]["3"]["hollow_format"] == 0.0 and summary["by_length"]["4"]["hollow_format"] == 0.5
    assert summary["by_length"]["4"]["truncated_wrong"] == 1.0  # the hollow one has the exact answer: right
    assert summary["overall"]["truncated"] == 0.5 and summary["overall"]["false_full_credit"] == 0.0
    assert format_table(summary).splitlines()[0].split()[-4:] == [
        "false_full_credit",
        "truncated",
        "truncated_wrong",
        "hollow_format",
    ]


def test_the_zero_std_figures_all_wrong_panels_agree_where_the_old_definitions_differed(tmp_path):
    """`groups/all_wrong` (from rollouts.jsonl) and `zero_std_side/all_wrong` (the batch readings), drawn side by side
    in zero_std_by_step.png, share one definition of "all wrong" (`rlvr.metrics.reward_batch.group_side`). Group 0 has
    partial credit and no exact answer: the old rollout definition (correctness all 0) called it not all wrong, the
    readings all wrong. Every group here is flat on total, so the two panels must read the same."""
    near = "<think>s u n</think><answer>nsu</answer>"  # partial credit, not the exact answer
    wrong = "<think>s u n</think><answer>xyz</answer>"  # no letter right
    texts = [near, near, RIGHT, RIGHT, wrong, wrong]
    answers = ["nus"] * len(texts)
    rewards = torch.tensor([correctness(texts, answers), format(texts), success(texts, answers)]).T
    batch = RewardBatch(
        rewards_per_func=rewards,
        names=["correctness", "format", "success"],  # as a run measures
        weights=torch.tensor([1.0, 0.5, 0.0]),
        num_generations=2,
        completions=texts,
        rows=[{"answer": "nus", "task": "spell_backward"} for _ in texts],
        completion_lengths=[len(t) for t in texts],
    )
    correctness_of = batch.components()["correctness"].tolist()
    assert 0 < correctness_of[0] < 1 and correctness_of[4] == 0  # where the old definitions split
    assert flat_groups(batch.components()["total"], 2).all()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    state = SimpleNamespace(is_world_process_zero=True, global_step=0)
    RolloutLogCallback(print_rollouts=False).on_rewards(
        SimpleNamespace(output_dir=str(run_dir)), state, None, batch=batch
    )
    row = {"step": 1, GENERATED_SAMPLES: batch.size, LOSS: 0.0, **batch_readings(batch)}
    (run_dir / layout.METRICS).write_text(json.dumps(row) + "\n")
    run = load_run(run_dir)
    for side, share in (("all_wrong", 2 / 3), ("all_correct", 1 / 3)):
        assert run.values(group_key(side)) == pytest.approx(run.values(zero_std_side_key(side)))
        assert run.values(group_key(side)) == [pytest.approx(share)]
    assert (tmp_path / "plots" / "zero_std_by_step.png") in plot_runs([run], tmp_path / "plots", ["step"])
