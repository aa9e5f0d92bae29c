"""Speed-up switches (rlvr/speed.py): a switch off really turns its path off; on gives the same samples and loss."""

from pathlib import Path

import pytest
import torch
from conftest import FAST_RECIPE, read_jsonl

from rlvr.cli import ConfigError
from rlvr.training.runner import main
from rlvr.training.speed import SPEEDUPS, apply_process_speedups, common_prefix_length, parse_speedups, shared_prefix_plan


def test_speedups_field_parses_all_none_and_lists():
    assert parse_speedups("all") == frozenset(SPEEDUPS)
    assert parse_speedups("none") == frozenset()
    assert parse_speedups("threads") == {"threads"}
    assert parse_speedups(" shared_prefix , threads ") == {"threads", "shared_prefix"}
    with pytest.raises(ValueError, match="bogus"):
        parse_speedups("threads,bogus")


def test_unknown_speedup_names_the_field_before_any_model_loads(tmp_path):
    argv = ["--config", FAST_RECIPE, "--model_name_or_path", str(tmp_path / "none"), "--build_tiny_model", "false",
            "--output_dir", str(tmp_path / "o"), "--speedups", "warp_drive"]
    with pytest.raises(ConfigError) as err:
        main(argv)
    assert err.value.field == "speedups" and "warp_drive" in str(err.value)


def test_threads_switch_sets_one_thread_only_when_on_and_unset(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        torch.set_num_threads(2)
        apply_process_speedups(frozenset(), use_cpu=True)
        assert torch.get_num_threads() == 2
        apply_process_speedups(frozenset({"threads"}), use_cpu=False)
        assert torch.get_num_threads() == 2
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        apply_process_speedups(frozenset({"threads"}), use_cpu=True)
        assert torch.get_num_threads() == 2
        monkeypatch.delenv("OMP_NUM_THREADS")
        apply_process_speedups(frozenset({"threads"}), use_cpu=True)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_shared_prefix_plan_finds_the_prefix_and_steps_aside_when_it_cannot_apply():
    prefix = list(range(10, 30))  # 20 shared tokens
    prompts = [prefix + [1, 2], prefix + [3], prefix + [4, 5, 6]]
    width = max(map(len, prompts))
    ids = torch.zeros(3, width + 4, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) : width] = torch.tensor(p)
        mask[i, width - len(p) : width] = 1
        mask[i, width : width + 2 + i % 2] = 1  # right-padded completions
    assert common_prefix_length([torch.tensor(p) for p in prompts]) == 20
    assert shared_prefix_plan(ids, mask, 4).prefix_length == 20
    short = torch.tensor([[5, 6, 7, 1, 1], [5, 6, 8, 1, 1]])
    assert shared_prefix_plan(short, torch.ones_like(short), 2) is None  # 2 shared tokens: not worth a call
    holed = mask.clone()
    holed[2, width - 2] = 0  # a pad inside a prompt: not a left-padded batch
    assert shared_prefix_plan(ids, holed, 4) is None


def _batch(trainer, num_rows=8, completion=12, seed=0):
    """Left-padded chat prompts from the recipe's data + random right-padded completions."""
    rows = [trainer.train_dataset[i]["prompt"] for i in range(num_rows)]
    tokenizer = trainer.processing_class
    texts = [tokenizer.apply_chat_template(r, add_generation_prompt=True, tokenize=False) for r in rows]
    prompts = tokenizer(texts, add_special_tokens=False)["input_ids"]
    width = max(map(len, prompts))
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((num_rows, width + completion), trainer.processing_class.pad_token_id)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) : width] = torch.tensor(p)
        length = int(torch.randint(1, completion + 1, (1,), generator=gen))
        ids[i, width : width + length] = torch.randint(0, 256, (length,), generator=gen)
        mask[i, width - len(p) : width + length] = 1
    return ids, mask


def test_shared_prefix_gives_trls_logps_entropies_and_gradients(run_recipe):
    trainer, _ = run_recipe("--max_steps", "1", "--beta", "0.04")
    ids, mask = _batch(trainer)
    results = {}
    for speedups in (frozenset(), frozenset({"shared_prefix"})):
        trainer.speedups = speedups
        calls = trainer._shared_prefix_calls
        trainer.model.zero_grad()
        logps, entropies, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, 12, compute_entropy=True)
        (logps * mask[:, -12:]).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
        results[speedups] = (logps.detach(), entropies.detach(), grads)
        assert (trainer._shared_prefix_calls > calls) == bool(speedups)  # off really takes TRL's path
    for off, on in zip(results[frozenset()], results[frozenset({"shared_prefix"})]):
        torch.testing.assert_close(on, off, rtol=1e-4, atol=1e-4)


def test_runs_with_and_without_speedups_sample_the_same_and_score_the_same_loss(run_recipe, tmp_path):
    args = ("--max_steps", "2", "--beta", "0.04", "--seed", "7")
    off, off_dir = run_recipe(*args, "--speedups", "none", output_dir=tmp_path / "off")
    on, on_dir = run_recipe(*args, "--speedups", "all", output_dir=tmp_path / "on")
    assert off._shared_prefix_calls == 0 and on._shared_prefix_calls > 0
    off_dir, on_dir = Path(off_dir), Path(on_dir)
    completions = [[r["completion"] for r in read_jsonl(d / "rollouts.jsonl")] for d in (off_dir, on_dir)]
    assert completions[0] == completions[1]
    rows = [[r for r in read_jsonl(d / "metrics.jsonl") if "loss" in r] for d in (off_dir, on_dir)]
    for a, b in zip(*rows):
        assert b["reward"] == a["reward"]
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-3, abs=1e-6)
        assert b["kl"] == pytest.approx(a["kl"], rel=1e-3, abs=1e-6)


def test_shared_prefix_gives_the_critics_values_and_gradients(run_recipe):
    """PPO's critic on the shared-prefix path: the same values and value-head/body gradients as its full pass."""
    trainer, _ = run_recipe("--max_steps", "1", "--num_generations", "1", "--generation_batch_size", "8",
                            "--per_device_train_batch_size", "8", algorithm="ppo")
    ids, mask = _batch(trainer)
    width = ids.shape[1] - 12
    inputs = {"prompt_ids": ids[:, :width], "prompt_mask": mask[:, :width],
              "completion_ids": ids[:, width:], "completion_mask": mask[:, width:]}
    assert not any(m.p for m in trainer.value_model.modules() if isinstance(m, torch.nn.Dropout))  # disable_dropout
    results = {}
    for speedups in (frozenset(), frozenset({"shared_prefix"})):
        trainer.speedups = speedups
        calls = trainer._shared_prefix_calls
        trainer.value_model.zero_grad()
        values = trainer._token_values(inputs)
        (values * mask[:, width:]).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in trainer.value_model.parameters() if p.grad is not None])
        results[speedups] = ((values * mask[:, width:]).detach(), grads)
        assert (trainer._shared_prefix_calls > calls) == bool(speedups)
    for off, on in zip(results[frozenset()], results[frozenset({"shared_prefix"})]):
        torch.testing.assert_close(on, off, rtol=1e-4, atol=1e-4)
