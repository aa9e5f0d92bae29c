"""A negative `entropy_coef` minimises entropy: TRL's loss subtracts coef x the mean token entropy, and the entropy it
uses must carry its gradient on every path that computes it (TRL's, and the speed-ups' shared-prefix forward).
recipes/tiny/speedrun.yaml trains with -0.1 (results/speedrun/README.md)."""

import pytest
from conftest import read_jsonl


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
