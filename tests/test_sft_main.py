"""`recipes/tiny/sft.py`, the warm start's documented command, run as a script on a tiny budget: recipes/tiny/sft.yaml
with only its size fields shrunk (400 rows, 16 probe words, 4 steps, a probe every 2). The full run (20,000 rows,
stopped by its probe around step 500) rebuilds models/tiny-speller and is not run in CI."""

import runpy
import sys

import pytest
import torch
import yaml
from conftest import REPO

SFT_SCRIPT = REPO / "recipes" / "tiny" / "sft.py"
STEPS, PROBE_EVERY = 4, 2


@pytest.fixture
def tiny_budget(tmp_path):
    """sft.yaml as committed (model shape, stop rule, learning rate, prompt) with the size fields cut down."""
    child = tmp_path / "sft_tiny.yaml"
    child.write_text(
        yaml.safe_dump(
            {
                "base": str(REPO / "recipes" / "tiny" / "sft.yaml"),
                "output_dir": str(tmp_path / "speller"),
                "heldout_recipe": str(REPO / "recipes" / "tiny" / "grpo.yaml"),
                "data": {"size": 400, "test_size": 16},
                "max_steps": STEPS,
                "probe_steps": PROBE_EVERY,
                "probe_samples": 1,
                "logging_steps": 1,
            }
        )
    )
    return child, tmp_path / "speller"


def test_sft_script_writes_the_configured_speller_and_probes_on_schedule(tiny_budget, monkeypatch, capsys):
    from rlvr.recipes.tiny.model import TAG_TOKENS
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config, out = tiny_budget
    monkeypatch.setattr(sys, "argv", [str(SFT_SCRIPT), "--config", str(config)])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the script sets no thread count; two threads on cores other jobs hold run 10x slower
    try:
        runpy.run_path(str(SFT_SCRIPT), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out

    shape = yaml.safe_load((REPO / "recipes" / "tiny" / "sft.yaml").read_text())["model_shape"]
    model = AutoModelForCausalLM.from_pretrained(out)
    assert {key: getattr(model.config, key) for key in shape if key != "seed"} == {
        key: value for key, value in shape.items() if key != "seed"
    }
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert all(len(tokenizer.encode(tag, add_special_tokens=False)) == 1 for tag in TAG_TOKENS)
    # a probe every PROBE_EVERY steps (a random start spells nothing exactly, so the 0.2 target never stops it)
    probes = [line for line in printed.splitlines() if line.startswith("[sft] step ")]
    assert [line.split(":")[0] for line in probes] == [
        f"[sft] step {s}" for s in range(PROBE_EVERY, STEPS + 1, PROBE_EVERY)
    ]
    assert f"[sft] checkpoint written to {out}" in printed
    card = (out / "README.md").read_text()
    assert card.startswith("# tiny-speller") and f"({STEPS} steps; last probe exact match" in card
    assert not (out / "training_args.bin").exists()  # the trainer's pickled arguments are dropped


def test_sft_script_bad_field_is_one_line_and_exit_2(tiny_budget, monkeypatch, capsys):
    config, out = tiny_budget
    monkeypatch.setattr(sys, "argv", [str(SFT_SCRIPT), "--config", str(config), "--probe_samples", "0"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SFT_SCRIPT), run_name="__main__")
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == ["error: probe_samples: must be a positive integer, got 0"]
    assert not out.exists()
