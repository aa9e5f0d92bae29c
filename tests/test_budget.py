"""`max_generated_samples`: the run stops at a budget in generated samples (DAPO's resampling included) and its
learning-rate schedule advances with samples, so a budget-stopped run still ends its schedule."""

import math
from types import SimpleNamespace

import pytest
import torch
from conftest import read_jsonl
from transformers import TrainingArguments

from rlvr.inputs import ConfigError
from rlvr.metrics.callbacks import RolloutLedger
from rlvr.training.trainer import SampleScheduleMixin


class StepSchedule:
    def create_scheduler(self, num_training_steps, optimizer=None):
        from transformers import get_scheduler

        self.lr_scheduler = get_scheduler(
            self.args.lr_scheduler_type, optimizer=optimizer, num_warmup_steps=0, num_training_steps=num_training_steps
        )
        return self.lr_scheduler


class Trainer(SampleScheduleMixin, StepSchedule):
    def __init__(self, budget, schedule="cosine"):
        self.args = TrainingArguments("/tmp/unused", lr_scheduler_type=schedule, learning_rate=1.0, use_cpu=True)
        self.args.max_generated_samples = budget
        self.ledger = RolloutLedger()
        self.callback_handler = SimpleNamespace(callbacks=[self.ledger])
        self.lr_scheduler = None
        self.optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)


def lr_after(trainer, samples):
    trainer.ledger.generated_samples = samples
    trainer.optimizer.step()  # no gradient: a no-op, in the order torch expects
    trainer.lr_scheduler.step()
    return trainer.optimizer.param_groups[0]["lr"]


def test_schedule_follows_samples_not_steps():
    trainer = Trainer(budget=1000)
    trainer.create_scheduler(num_training_steps=140, optimizer=trainer.optimizer)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1.0)  # nothing generated yet: the start
    assert lr_after(trainer, 500) == pytest.approx(0.5)  # half the samples: cosine at its midpoint, whatever the step
    assert lr_after(trainer, 1000) == pytest.approx(0.0, abs=1e-12)  # the budget: the schedule's end
    assert lr_after(trainer, 1200) == pytest.approx(0.0, abs=1e-12)  # past it (the last step overshoots): stays there


def test_equal_samples_per_step_is_the_step_schedule():
    """64 samples a step and a budget of 140 steps' worth: step k reads the step schedule at k exactly."""
    by_samples, by_steps = Trainer(budget=140 * 64), Trainer(budget=None)
    by_samples.create_scheduler(140, by_samples.optimizer)
    by_steps.create_scheduler(140, by_steps.optimizer)
    for k in range(1, 141):
        by_steps.optimizer.step()
        by_steps.lr_scheduler.step()
        assert lr_after(by_samples, 64 * k) == by_steps.optimizer.param_groups[0]["lr"]


def test_no_budget_keeps_the_step_schedule():
    trainer = Trainer(budget=None)
    trainer.create_scheduler(10, trainer.optimizer)
    assert lr_after(trainer, 10**6) == pytest.approx(0.5 * (1 + math.cos(math.pi / 10)))  # one step in, samples ignored


def test_a_run_stops_at_its_sample_budget(run_recipe):
    trainer, out = run_recipe("--max_steps", "10", "--max_generated_samples", "40")
    rows = [row for row in read_jsonl(f"{out}/metrics.jsonl") if "loss" in row]
    assert trainer.state.global_step == 3  # 16 samples a step: 16, 32, 48 >= 40
    assert [row["generated_samples"] for row in rows] == [16, 32, 48]


def test_dapo_resampling_counts_toward_the_budget(run_recipe):
    """On the random tiny model most groups are flat, so DAPO resamples: more than 16 samples a step, fewer steps."""
    trainer, out = run_recipe(
        "--max_steps",
        "10",
        "--max_generated_samples",
        "64",
        "--num_generations",
        "4",
        "--max_resample_rounds",
        "2",
        algorithm="dapo",
    )
    rows = [row for row in read_jsonl(f"{out}/metrics.jsonl") if "loss" in row]
    assert rows[-1]["generated_samples"] >= 64 and all(row["generated_samples"] < 64 for row in rows[:-1])
    assert trainer.state.global_step == len(rows) < 4  # 4 steps of 16 would be the budget without resampling


def test_bad_budget_is_one_named_line(run_recipe):
    with pytest.raises(ConfigError) as err:
        run_recipe("--max_generated_samples", "0")
    assert err.value.field == "max_generated_samples"
