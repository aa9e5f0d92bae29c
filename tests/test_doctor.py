"""`rlvr doctor`: each finding on a hand-made run that has exactly that problem (and none on a healthy one), plain
TRL folders, bad input, the thresholds table in the docs, and a real short run read the same way by the report.

The planted-problem runs on the real tiny speller (>= 5 kinds, slow) are benchmarks/doctor_cases.py; its output is
docs/measurements/doctor.md."""

import json
import math
from pathlib import Path

import pytest
import yaml

from rlvr.__main__ import main as rlvr_main
from rlvr.analysis import doctor

REPO = Path(__file__).resolve().parents[1]
STEPS = 30


def healthy_rows(n: int = STEPS) -> list[dict]:
    """A run that learns: success 0.2 -> 0.7, a tenth of groups flat, nothing cut, entropy and KL moderate."""
    rows = []
    for i in range(n):
        success = 0.2 + 0.5 * i / (n - 1)
        rows.append(
            {
                "step": i + 1,
                "loss": 0.01,
                "grad_norm": 0.5 + 0.1 * (i % 3),
                "learning_rate": 1e-3,
                "kl": 0.0 if i == 0 else 0.2,
                "entropy": 0.2,
                "avg_total": 1.0 + success / 2,
                "avg_success": success,
                "avg_correctness": 0.6 + success / 2,
                "avg_format": 1.0,
                "zero_std_frac/total": 0.1,
                "zero_std_frac/format": 1.0,
                "step/truncated": 0.0,
                "step/false_full_credit": 0.0,
                "step/hollow_format": 0.0,
                "generated_samples": 64.0 * (i + 1),
                "time/generation_s": 0.3,
                "time/total_s": 1.0,
            }
        )
    return rows


def write_run(folder: Path, rows: list[dict], **config) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    final = {"step": rows[-1]["step"], "train_runtime": float(len(rows))}
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows, final]))
    settings = {
        "learning_rate": 1e-3,
        "max_completion_length": 48,
        "temperature": 1.0,
        "num_generations": 8,
        "beta": 0.04,
        **config,
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(settings))
    return folder


def from_step(rows, step: int, **values) -> list[dict]:
    """`rows` with `values` set on every row from `step` on."""
    return [{**r, **values} if r["step"] >= step else r for r in rows]


def problems(folder) -> list[doctor.Finding]:
    return doctor.diagnose(folder).problems


def test_healthy_run_has_no_problem_and_a_compute_note(tmp_path):
    diagnosis = doctor.diagnose(write_run(tmp_path / "run", healthy_rows()))
    assert diagnosis.problems == []
    [note] = diagnosis.findings
    assert note.severity == "note" and "generation 30% of step time" in note.what and "64.0 samples/s" in note.what


PLANTED = {  # name -> (rows, config, the problem's title, its step, a word of its remedy)
    "truncation": (
        from_step(healthy_rows(), 11, **{"step/truncated": 0.9}),
        {},
        "truncation:",
        11,
        "mask_truncated_completions is no substitute",
    ),  # results/ablations/truncation-masking
    "entropy": (
        from_step(healthy_rows(), 16, entropy=0.01),
        {"temperature": 0.05},
        "entropy collapse:",
        16,
        "temperature",
    ),
    "false full credit": (
        from_step(healthy_rows(), 21, **{"step/false_full_credit": 0.2}),
        {},
        "reward hack:",
        21,
        "capped_correctness",
    ),
    "hollow": (from_step(healthy_rows(), 9, **{"step/hollow_format": 0.3}), {}, "step/hollow_format", 9, "gate format"),
    "nan loss": (from_step(healthy_rows(), 7, loss=None), {}, "divergence: loss is None", 7, "learning_rate"),
    "grad spike": (
        [{**r, "grad_norm": 40.0} if r["step"] == 12 else r for r in healthy_rows()],
        {},
        "grad_norm spiked to 40",
        12,
        "max_grad_norm",
    ),
    "kl blow-up": (from_step(healthy_rows(), 18, kl=3.0), {}, "KL to the reference blew up", 18, "beta"),
    "lr does nothing": (
        [{**r, "kl": 1e-7} for r in healthy_rows()],
        {"learning_rate": 1e-9},
        "learning rate does nothing",
        2,
        "raise learning_rate",
    ),
    "lr too high": (
        [{**r, "avg_total": 1.4 if r["step"] < 15 else 0.3} for r in healthy_rows()],
        {},
        "learning rate too high",
        12,
        "lower learning_rate",
    ),
    "format early": (
        [{**r, "avg_success": 0.1} for r in healthy_rows()],
        {},
        "format saturated early",
        1,
        "reward weight",
    ),
}


@pytest.mark.parametrize("name", PLANTED)
def test_each_planted_problem_is_the_one_named_at_its_step(tmp_path, name):
    rows, config, title, step, remedy = PLANTED[name]
    found = problems(write_run(tmp_path / "run", rows, **config))
    assert len(found) == 1, [f.what for f in found]  # no other check fires on what was planted
    assert title in found[0].what and found[0].step == step and remedy in found[0].remedy


def test_idle_groups_name_their_side_and_the_remedy_for_it(tmp_path):
    sides = {
        "zero_std_side/all_wrong": 0.7,
        "zero_std_side/all_correct": 0.0,
        "zero_std_side/all_truncated": 0.65,
        "zero_std_side/identical": 0.0,
    }
    rows = from_step(healthy_rows(), 5, **{"zero_std_frac/total": 0.7, **sides})
    [finding] = problems(write_run(tmp_path / "truncated", rows))
    assert finding.step == 5 and "all truncated 65%" in finding.what and "max_completion_length" in finding.remedy

    rows = from_step(healthy_rows(), 5, **{"zero_std_frac/total": 0.7, **sides, "zero_std_side/all_truncated": 0.0})
    [finding] = problems(write_run(tmp_path / "wrong", rows, num_generations=2))
    assert "easier prompts" in finding.remedy and finding.remedy.startswith("raise num_generations")


def test_a_stretch_the_run_recovered_from_is_not_a_finding(tmp_path):
    rows = [{**r, "zero_std_frac/total": 0.9} if 10 <= r["step"] < 16 else r for r in healthy_rows()]
    assert problems(write_run(tmp_path / "run", rows)) == []


def trl_state(rows: list[dict], runtime: float = 10.0) -> dict:
    closing = {"step": rows[-1]["step"], "train_runtime": runtime}
    return {"global_step": rows[-1]["step"], "log_history": [*rows, closing]}


def test_plain_trl_folder_reads_the_newest_checkpoint_and_trl_keys(tmp_path):
    def row(step, clipped):
        return {
            "step": step,
            "loss": 0.0,
            "grad_norm": 0.4,
            "reward": 0.8,
            "reward_std": 0.3,
            "entropy": 0.3,
            "frac_reward_zero_std": 0.8,
            "completions/clipped_ratio": clipped,
            "completions/mean_length": 12.0,
            "rewards/accuracy_reward/mean": 0.1,
            "learning_rate": 1e-6,
            "num_tokens": 1000.0 * step,
        }

    for checkpoint, clipped in ((2, 0.0), (10, 0.95)):  # numeric order: checkpoint-10 is the newest, not -2
        folder = tmp_path / f"checkpoint-{checkpoint}"
        folder.mkdir()
        rows = [row(step, clipped) for step in range(1, checkpoint + 1)]
        (folder / "trainer_state.json").write_text(json.dumps(trl_state(rows)))
    diagnosis = doctor.diagnose(tmp_path)
    assert diagnosis.source == "plain TRL (checkpoint-10/trainer_state.json)"
    titles = [f.what for f in diagnosis.problems]
    assert any(t.startswith("truncation: 95%") and "completions/clipped_ratio" in t for t in titles)
    idle = next(t for t in titles if t.startswith("idle groups"))
    assert "frac_reward_zero_std (TRL's isclose(std, 0) count" in idle and "side not logged" in idle  # not guessed
    assert "1000 tokens/s" in diagnosis.findings[-1].what  # the bill from num_tokens and train_runtime


def test_plain_trl_nan_is_read_as_divergence(tmp_path):
    rows = [{"step": s, "loss": 0.0, "grad_norm": float("nan") if s == 4 else 0.5, "reward": 0.5} for s in range(1, 9)]
    (tmp_path / "trainer_state.json").write_text(json.dumps(trl_state(rows)))  # json writes NaN as NaN
    [finding] = [f for f in problems(tmp_path) if "divergence" in f.what]
    assert finding.step == 4 and math.isnan(float(finding.what.split("grad_norm is ")[1].split()[0]))


def test_a_grad_norm_after_flat_steps_is_no_spike(tmp_path):
    """Steps whose groups were all flat have grad norm exactly 0: the first step with contrast is not a spike."""
    rows = [{**r, "grad_norm": 0.0 if r["step"] <= 10 else r["grad_norm"]} for r in healthy_rows()]
    assert problems(write_run(tmp_path / "run", rows)) == []


def test_format_flat_and_low_is_not_saturated(tmp_path):
    rows = [{**r, "avg_success": 0.1, "avg_format": 0.0} for r in healthy_rows()]  # flat on format at 0: never found
    assert problems(write_run(tmp_path / "run", rows)) == []


def plain_trl(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps(trl_state(rows)))
    return folder


def test_plain_trl_constant_reward_is_named_not_a_side(tmp_path):
    rows = [
        {
            "step": s,
            "loss": 0.0,
            "grad_norm": 0.0,
            "reward": 0.0,
            "reward_std": 0.0,
            "frac_reward_zero_std": 1.0,
            "rewards/accuracy_reward/mean": 0.0,
        }
        for s in range(1, 21)
    ]
    [idle] = [f for f in problems(plain_trl(tmp_path / "run", rows)) if f.what.startswith("idle groups")]
    assert "the reward is constant: reward_std 0" in idle.what and "all wrong" not in idle.what
    assert "reward functions" in idle.remedy


def test_plain_trl_reward_up_while_correctness_falls_is_a_hack(tmp_path):
    rows = [
        {
            "step": s,
            "loss": 0.0,
            "grad_norm": 0.5,
            "reward": 0.5 + s / 20,
            "reward_std": 0.3,
            "rewards/accuracy_reward/mean": 0.6 - s / 50,
        }
        for s in range(1, 21)
    ]
    [hack] = problems(plain_trl(tmp_path / "run", rows))
    assert hack.what.startswith("reward hack: reward rose") and "rewards/accuracy_reward/mean fell" in hack.what
    assert hack.step == 6 and "gate the other rewards" in hack.remedy  # window from step 6: 0.42 <= 0.54 - 0.1


def test_symptoms_after_a_divergence_take_its_remedy(tmp_path):
    rows = from_step(from_step(healthy_rows(), 7, loss=None), 16, entropy=0.01)
    nan, entropy = problems(write_run(tmp_path / "run", rows, temperature=0.05))
    assert nan.step == 7 and "lower learning_rate" in nan.remedy
    assert entropy.what.startswith("entropy collapse") and "raise temperature" not in entropy.remedy
    assert entropy.remedy.startswith("follows the divergence at step 7 (finding 1)")


def vllm_rows(ratio: float, gap: float, length: float = 100.0) -> list[dict]:
    """A healthy run as TRL logs it with use_vllm: its importance-sampling ratio and log-prob gap per token."""
    return [
        {
            **r,
            "sampling/importance_sampling_ratio/mean": ratio,
            "sampling/importance_sampling_ratio/min": 0.0,
            "sampling/sampling_logp_difference/mean": gap,
            "sampling/sampling_logp_difference/max": 0.5,
            "completions/mean_length": length,
        }
        for r in healthy_rows()
    ]


def test_vllm_readings(tmp_path):
    """TRL's defaults: sequence_mask, clip 3.0. A ratio mean of 0.6 under top_p/top_k is their kept mass; without
    them, a real mismatch; 0.012 nats/token x 100 tokens = 1.2 > log 3 masks the typical completion."""
    assert problems(write_run(tmp_path / "healthy", vllm_rows(0.99, 0.002))) == []
    [cut] = problems(write_run(tmp_path / "cut", vllm_rows(0.6, 0.002), top_p=0.95, top_k=20))
    assert cut.what.startswith("vLLM mismatch: importance-sampling ratio mean 0.6 from step 1")
    assert cut.remedy.startswith("top_p 0.95 and top_k 20 truncate") and "trl#6789" in cut.remedy
    [real] = problems(write_run(tmp_path / "real", vllm_rows(0.6, 0.002), top_p=1.0, top_k=0))
    assert "dtype" in real.remedy
    [drift] = problems(write_run(tmp_path / "drift", vllm_rows(1.0, 0.012)))
    assert "= 1.2 nats per completion" in drift.what and "past log(3) = 1.10" in drift.what
    assert problems(write_run(tmp_path / "short", vllm_rows(1.0, 0.012, length=80.0))) == []  # 0.96 < log 3
    trl_rows = [
        {
            "step": s,
            "loss": 0.0,
            "reward": 0.5,
            "sampling/importance_sampling_ratio/mean": 0.6,
            "clip_ratio/region_mean": 0.3 * (s % 2 == 0),
        }
        for s in range(1, 11)
    ]  # a plain TRL folder reads alike
    titles = [f.what.split(":")[0] for f in problems(plain_trl(tmp_path / "trl", trl_rows))]
    assert titles == ["off-policy steps", "vLLM mismatch"]


def test_clip_fraction_on_reused_batches(tmp_path):
    """num_iterations 2: odd steps are a batch's first pass (clip 0 by construction), even steps its reuse."""
    rows = [
        {**r, "clip_ratio/region_mean": 0.0 if r["step"] % 2 else (0.15 if r["step"] >= 8 else 0.05)}
        for r in healthy_rows()
    ]
    [clip] = problems(write_run(tmp_path / "run", rows, num_iterations=2))
    assert clip.step == 8 and "15% of tokens clipped at step 8 (12 logged step(s)" in clip.what
    assert "num_iterations 2" in clip.what and "lower learning_rate (now 0.001)" in clip.remedy


def test_the_bill_has_generated_tokens_per_second(tmp_path):
    rows = [{**r, "generated_tokens": 1000.0 * r["step"]} for r in healthy_rows()]
    [note] = doctor.diagnose(write_run(tmp_path / "run", rows)).findings
    assert "generated tokens/s: 3333 of generation time, 1000 of total time" in note.what  # 30k tokens, 9 s, 30 s


def run_cli(*argv) -> int:
    with pytest.raises(SystemExit) as stop:
        rlvr_main(["doctor", *argv])
    return stop.value.code


def test_exit_status_and_bad_input(tmp_path, capsys):
    assert run_cli(str(write_run(tmp_path / "ok", healthy_rows()))) == 0
    assert run_cli(str(write_run(tmp_path / "bad", from_step(healthy_rows(), 11, **{"step/truncated": 0.9})))) == 1
    out = capsys.readouterr().out
    assert "1. [problem] step 11: truncation" in out and "1 problem(s) found" in out
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "trainer_state.json").write_text("{not json")
    (tmp_path / "empty").mkdir()
    for folder in ("missing", "empty", "broken"):
        assert run_cli(str(tmp_path / folder)) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: RUN_DIR: {tmp_path / folder}") and err.count("\n") == 1


NOT_FINITE = {"nan": float("nan"), "inf": float("inf"), "null": None}  # null: how metrics.jsonl writes NaN/inf


def never_finite_rows(value, n: int = STEPS) -> list[dict]:
    """A run in which every reading the doctor has a key for (ours, else TRL's) is `value` at every step, and so are
    the time keys and counters the compute bill reads."""
    keys = [key for keys in doctor.READINGS.values() for key in keys if "*" not in key]
    keys += ["time/generation_s", "time/total_s", "generated_samples", "step_time", "num_tokens", "learning_rate"]
    return [{"step": i + 1, **dict.fromkeys(keys, value)} for i in range(n)]


@pytest.mark.parametrize("kind", NOT_FINITE)
@pytest.mark.parametrize("check", [check for check, _ in doctor.CHECKS], ids=lambda check: check.__name__)
def test_a_series_never_finite_is_a_finding_for_every_check(tmp_path, check, kind):
    """Each check on a run whose every reading is NaN (inf, null) ends without an exception, and every key the check
    reads is named in a problem: a divergence for loss, grad norm, KL and reward, `unreadable` for the rest."""
    run = doctor.load_any_run(write_run(tmp_path / "run", never_finite_rows(NOT_FINITE[kind])))[0]
    keys = {reading: doctor.key_for(run, reading) for reading in doctor.READINGS}
    assert isinstance(check(run, {}, keys), list)
    diagnosis = doctor.diagnose(tmp_path / "run")
    needs = dict(doctor.CHECKS)[check]
    named = " ".join(f.what for f in diagnosis.problems)
    for reading in needs:
        assert keys[reading] in named, (reading, named)
    assert f"is {NOT_FINITE[kind]} from step 1 on" in named and "never a finite number" in named
    assert run_cli(str(tmp_path / "run")) == 1


def test_a_reward_nan_at_every_step_is_a_finding_not_a_crash(tmp_path, capsys):
    """Plain TRL keeps NaN in trainer_state.json: a reward NaN from step 1 is named as such, exit 1 (the task-vs-reward
    check used to end in an IndexError on the empty series)."""
    rows = [
        {"step": s, "loss": 0.0, "grad_norm": 0.5, "reward": float("nan"), "rewards/accuracy_reward/mean": 0.2}
        for s in range(1, 9)
    ]
    (tmp_path / "trainer_state.json").write_text(json.dumps(trl_state(rows)))
    assert run_cli(str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "divergence: reward is nan from step 1 on, at every logged step (8)" in out
    assert "a reward function returns NaN" in out


class RunsCode:
    """A pickle that creates a file when it is loaded: what a hostile training_args.bin does."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os
        import shlex

        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def plain_trl_checkpoint(folder: Path) -> Path:
    """checkpoint-2/ of a plain TRL run whose reward is truncated away: a valid trainer_state.json."""
    (folder / "checkpoint-2").mkdir(parents=True)
    rows = [
        {"step": s, "loss": 0.0, "grad_norm": 0.4, "reward": 0.5, "completions/clipped_ratio": 0.9} for s in range(1, 3)
    ]
    (folder / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(trl_state(rows)))
    return folder / "checkpoint-2"


def test_a_code_running_training_args_runs_nothing_and_the_doctor_reports(tmp_path, capsys):
    import torch

    marker = tmp_path / "marker"
    checkpoint = plain_trl_checkpoint(tmp_path / "run")
    torch.save(RunsCode(marker), checkpoint / "training_args.bin")
    assert run_cli(str(tmp_path / "run")) == 1  # the truncation, read from trainer_state.json
    out = capsys.readouterr().out.splitlines()
    assert not marker.exists()
    assert out[0].endswith("plain TRL (checkpoint-2/trainer_state.json), 2 logged steps (step 1 to 2), finished")
    assert out[1] == (
        f"settings not read: {checkpoint / 'training_args.bin'} not read: Trying to load unsupported "
        "GLOBAL posix.system whose module posix is blocked.; the checks run without the run's settings"
    )
    assert out[2].startswith("1. [problem] step 1: truncation: 90% of completions cut off at max_completion_length ?")


def test_trls_own_training_args_are_read(tmp_path):
    """A GRPOConfig as GRPOTrainer saves it: its enums and accelerate state are on the allow-list, its values read."""
    import torch
    from trl import GRPOConfig

    checkpoint = plain_trl_checkpoint(tmp_path / "run")
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        max_completion_length=77,
        lr_scheduler_type="cosine",
        save_strategy="steps",
    )
    torch.save(args, checkpoint / "training_args.bin")
    diagnosis = doctor.diagnose(tmp_path / "run")
    assert diagnosis.unread == [] and diagnosis.settings["max_completion_length"] == 77
    assert diagnosis.settings["lr_scheduler_type"] == "cosine" and diagnosis.settings["save_strategy"] == "steps"
    assert "max_completion_length 77" in diagnosis.problems[0].what


def test_docs_show_the_thresholds_table_of_the_code():
    assert doctor.thresholds_table() in (REPO / "docs" / "doctor.md").read_text()


def test_real_short_run(run_recipe):
    """A real run of the random tiny model: it never closes its tags within 32 tokens, so TRL's
    completions/clipped_ratio is ~1 and the doctor must say truncation, from the first step, from the run's own keys."""
    _, out = run_recipe("--max_steps", "3")
    diagnosis = doctor.diagnose(out)
    [truncation] = [f for f in diagnosis.problems if f.what.startswith("truncation:")]
    assert truncation.step == 1 and "max_completion_length 32" in truncation.what


def test_real_run_with_reused_batches_and_a_learning_rate_too_high(tmp_path):
    """The warm-started speller, num_iterations 2 at 30x the main job's learning rate: step 1's update moves the
    policy so far that step 2, the same batch's second pass, clips ~20% of its tokens (the main job's 1e-3 clips
    <= 7%); the doctor names it at step 2, and the bill has the run's generated tokens per second."""
    from rlvr.training.runner import main

    out = tmp_path / "run"
    main(
        [
            "--config",
            str(REPO / "recipes/tiny/grpo.yaml"),
            "--model_name_or_path",
            str(REPO / "models/tiny-speller"),
            "--output_dir",
            str(out),
            "--max_steps",
            "2",
            "--num_iterations",
            "2",
            "--learning_rate",
            "3e-2",
            "--report_to",
            "none",
            "--print_rollouts",
            "false",
        ]
    )
    diagnosis = doctor.diagnose(out)
    [clip] = [f for f in diagnosis.problems if f.what.startswith("off-policy steps:")]
    assert clip.step == 2 and "num_iterations 2" in clip.what
    first, second = diagnosis.run.rows  # the second pass generates nothing: no rate on its row
    assert first["tokens_per_s/generation"] > first["tokens_per_s/step"] > 0 and "tokens_per_s/step" not in second
    assert "generated tokens/s: " in diagnosis.findings[-1].what and "samples/s" in diagnosis.findings[-1].what


def test_a_policy_sharpened_on_purpose_is_told_to_move_entropy_coef_not_the_learning_rate(tmp_path):
    sides = {"zero_std_side/all_correct": 0.3, "zero_std_side/all_wrong": 0.1, "zero_std_side/identical": 0.4}
    rows = from_step(healthy_rows(), 12, entropy=0.01, **{"zero_std_frac/total": 0.7, **sides})
    entropy, idle = problems(write_run(tmp_path / "sharpened", rows, entropy_coef=-0.1))
    assert entropy.what.startswith("entropy collapse") and idle.what.startswith("idle groups")
    for finding in (entropy, idle):
        assert finding.remedy.startswith("entropy_coef -0.1 minimises entropy on purpose")
    entropy, idle = problems(
        write_run(tmp_path / "late", rows, entropy_coef=-0.1, late_entropy_coef=-1.0, late_entropy_step=30)
    )
    assert entropy.remedy.startswith("late_entropy_coef -1 from step 30 minimises entropy on purpose")
    entropy, idle = problems(write_run(tmp_path / "plain", rows))
    assert "lower learning_rate" in entropy.remedy and idle.remedy.startswith("raise temperature")
