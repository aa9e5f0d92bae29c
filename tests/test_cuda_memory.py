"""The CUDA memory path (rlvr/training/cuda_memory.py) on the CPU: the allocator setting and who chose it, the cache
released before each generation, generation in pieces (the same rows and groups; each piece its own `generate` call),
and the per-row peaks; a CPU run carries none of it."""

from __future__ import annotations

import torch

from rlvr.metrics.keys import PEAK_ALLOCATED, PEAK_RESERVED
from rlvr.training import trainer as trainer_module
from rlvr.training.cuda_memory import (
    ALLOC_CONF,
    EXPANDABLE,
    CudaMemoryCallback,
    GenerationPiecesTrainer,
    configure_allocator,
    pieces,
)
from rlvr.training.runner import prepare


def test_the_runner_sets_expandable_segments_unless_the_user_chose_a_setting():
    env = {}
    assert configure_allocator(env) == f"{ALLOC_CONF}={EXPANDABLE} (set by the runner)"
    assert env == {ALLOC_CONF: EXPANDABLE}
    mine = {ALLOC_CONF: "max_split_size_mb:128"}
    assert configure_allocator(mine) == f"{ALLOC_CONF}=max_split_size_mb:128 (yours)"
    assert mine == {ALLOC_CONF: "max_split_size_mb:128"}


def test_pieces_cover_every_row_once_in_order():
    assert pieces(32, None) == [slice(0, 32)]
    assert pieces(32, 64) == [slice(0, 32)]
    assert pieces(32, 24) == [slice(0, 24), slice(24, 32)]
    assert [i for part in pieces(20, 8) for i in range(20)[part]] == list(range(20))


def tiny_trainer(tiny_model_dir, tmp_path, *flags):
    """The tiny recipe's trainer on the random tiny model (prepared, not trained)."""
    argv = ["--config", "recipes/tiny/grpo.yaml", "--model_name_or_path", tiny_model_dir, "--report_to", "none"]
    return prepare([*argv, "--output_dir", str(tmp_path / "run"), *flags])[1]


def cuda_trainer(monkeypatch, tiny_model_dir, tmp_path):
    """The tiny recipe's trainer as a CUDA run builds it (generation in pieces), on the CPU."""
    monkeypatch.setattr(trainer_module, "trains_on_cuda", lambda training: True)
    trainer = tiny_trainer(tiny_model_dir, tmp_path, "--speedups", "none")
    assert isinstance(trainer, GenerationPiecesTrainer)
    return trainer


def test_generation_in_pieces_samples_every_row_piece_by_piece(monkeypatch, tiny_model_dir, tmp_path):
    trainer = cuda_trainer(monkeypatch, tiny_model_dir, tmp_path)
    prompts = [[1, 5, 6, 7]] * 4 + [[1, 8, 9]] * 4 + [[1, 10, 11, 12, 13]] * 4  # 3 groups of G=4
    calls, released = [], []
    generate = trainer.model.generate

    def spy(**kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return generate(**kwargs)

    monkeypatch.setattr(trainer.model, "generate", spy)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: released.append(True))

    torch.manual_seed(0)
    whole, _ = trainer._generate_single_turn(prompts, None, {}, 4)
    assert calls == [12] and released == [True]
    torch.manual_seed(0)
    trainer.args.generation_chunk_size = 12  # one piece: TRL's call as it is, the same draws
    assert trainer._generate_single_turn(prompts, None, {}, 4)[0] == whole
    calls.clear()
    trainer.args.generation_chunk_size = 8
    completions, logprobs = trainer._generate_single_turn(prompts, None, {}, 4)
    assert calls == [8, 4] and len(completions) == 12 and logprobs is None and len(released) == 3


def test_the_peaks_go_into_each_row_and_reset(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 3 * 1024**3)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda: 4 * 1024**3)
    resets = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: resets.append(True))
    row = {"loss": 0.1}
    CudaMemoryCallback().on_log(None, None, None, logs=row)
    assert row == {"loss": 0.1, PEAK_ALLOCATED: 3.0, PEAK_RESERVED: 4.0} and resets == [True]


def test_a_cpu_run_carries_none_of_it(tiny_model_dir, tmp_path, capsys):
    trainer = tiny_trainer(tiny_model_dir, tmp_path)
    assert not isinstance(trainer, GenerationPiecesTrainer)
    assert not any(isinstance(cb, CudaMemoryCallback) for cb in trainer.callback_handler.callbacks)
    assert "CUDA allocator" not in capsys.readouterr().out
