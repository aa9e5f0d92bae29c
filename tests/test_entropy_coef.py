"""A negative `entropy_coef` minimises entropy: TRL's loss subtracts coef x the mean token entropy, and the entropy it
uses must carry its gradient on every path that computes it (TRL's, and the speed-ups' shared-prefix forward).
recipes/tiny/speedrun.yaml trains with -0.1 (results/speedrun/README.md). `failed_entropy_coef` adds an entropy bonus on
the tokens of all-wrong groups only."""

from types import SimpleNamespace

import pytest
import torch
from conftest import read_jsonl

from rlvr.metrics.reward_batch import ALL_WRONG_ROWS, all_wrong_rows
from rlvr.training.trainer import failed_group_entropy


@pytest.mark.parametrize("speedups", ["none", "all"])
def test_a_negative_coefficient_sharpens_where_a_positive_one_spreads(run_recipe, tmp_path, speedups):
    entropy = {}
    for coef in ("-2", "2"):
        _, out = run_recipe(
            "--max_steps", "3", "--speedups", speedups, "--entropy_coef", coef, output_dir=tmp_path / f"c{coef}"
        )
        rows = [row for row in read_jsonl(f"{out}/metrics.jsonl") if "entropy" in row]
        entropy[coef] = [row["entropy"] for row in rows]
    assert entropy["-2"][0] == pytest.approx(entropy["2"][0])  # the same first batch, before any update
    assert entropy["-2"][-1] < entropy["-2"][0] < entropy["2"][-1]


@pytest.mark.parametrize("speedups", ["none", "all"])
def test_the_failed_group_bonus_is_entropy_coef_where_every_group_fails(run_recipe, tmp_path, speedups):
    """The random test model solves nothing, so every group is all wrong: `failed_entropy_coef` then acts on every
    token, as TRL's `entropy_coef` does, and the two runs are the same run."""
    entropy = {}
    for flag in ("--entropy_coef", "--failed_entropy_coef"):
        _, out = run_recipe("--max_steps", "3", "--speedups", speedups, flag, "2", output_dir=tmp_path / flag[2:])
        rows = [row for row in read_jsonl(f"{out}/metrics.jsonl") if "entropy" in row]
        entropy[flag] = [row["entropy"] for row in rows]
    assert entropy["--failed_entropy_coef"] == pytest.approx(entropy["--entropy_coef"], rel=1e-4)
    assert entropy["--entropy_coef"][-1] > entropy["--entropy_coef"][0]  # it spreads: the term is on


def test_the_failed_group_term_counts_only_all_wrong_groups():
    """Groups of 2: the first solved once (mixed), the second never (all wrong). Only the second group's tokens enter
    the sum; the divisor is every completion token, as TRL's entropy bonus divides."""
    solved = torch.tensor([True, False, False, False])
    rows = all_wrong_rows(solved, num_generations=2)
    assert rows.tolist() == [False, False, True, True]
    entropies = torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 5.0], [4.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])  # the third row's last token is padding
    trainer = SimpleNamespace(model=SimpleNamespace(training=True), current_gradient_accumulation_steps=1)
    value = failed_group_entropy(trainer, entropies, mask, {ALL_WRONG_ROWS: rows})
    assert value.item() == pytest.approx((3.0 + 4.0 + 9.0) / 7)


def test_a_late_coefficient_is_trls_from_its_step_on(run_recipe, tmp_path):
    """`late_entropy_coef` switches TRL's own coefficient at `late_entropy_step` (steps already taken): from step 0 it
    is the same run as `entropy_coef`; from step 2 the first two updates are the plain run's, so the entropy read at
    steps 1-3 (before each update) matches it, and step 4's reads the first update that spread."""

    def entropies(*flags, name):
        _, out = run_recipe("--max_steps", "4", *flags, output_dir=tmp_path / name)
        return [row["entropy"] for row in read_jsonl(f"{out}/metrics.jsonl") if "entropy" in row]

    plain = entropies(name="plain")
    static = entropies("--entropy_coef", "2", name="static")
    assert entropies("--late_entropy_coef", "2", name="late0") == static
    late = entropies("--late_entropy_coef", "2", "--late_entropy_step", "2", name="late2")
    assert late[:3] == plain[:3]
    assert late[3] > plain[3]
