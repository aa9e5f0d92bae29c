"""GPU memory over a whole run, not one step: the allocator setting, the cache released before each generation, the
generation batch sampled in pieces, and the peaks of every logged step. Only a run on CUDA imports this module.

Why: on a card with 6.9 GiB free, Qwen3-0.6B full fine-tuning and Qwen3-1.7B LoRA allocated at most 6.1 GiB, yet
both ran out of memory at the start of their second generation cycle: the caching allocator keeps the blocks it has
reserved, and after a training phase they are cut into pieces too small for a KV cache that grows by one token per
decoding step (every layer's keys and values are re-allocated one token longer, so a freed block never fits the next
request). Three changes, each what the field does:

- `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (prime-rl's and TRL's CI default) lets a segment grow in place
  instead of caching fixed blocks. It must be set before CUDA initialises; `configure_allocator` does it unless the
  user set the variable, and says which setting is in force.
- `torch.cuda.empty_cache()` right before each generation returns the training phase's cached blocks (rlhf-book's
  loop does the same after each phase; TRL's `torch_empty_cache_steps` empties after the forward pass, never here).
- `generation_chunk_size` sequences at a time: the KV cache and the allocator's slack scale with the sequences
  sampled at once, and the planner (`rlvr.planning.plan.generation_chunk_for`) sizes the pieces to the free memory.
"""

from __future__ import annotations

import os

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from rlvr.metrics.keys import PEAK_ALLOCATED, PEAK_RESERVED

ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE = "expandable_segments:True"


def configure_allocator(env=os.environ) -> str:
    """Expandable segments unless the user chose a setting; returns the setting in force, for the plan line.

    Set before CUDA initialises the allocator is read from the variable; when something already initialised CUDA
    (a library probing the device during argument parsing), the same setting is applied through
    `torch.cuda.memory._set_allocator_settings`, which governs the segments created from then on."""
    if ALLOC_CONF in env:
        return f"{ALLOC_CONF}={env[ALLOC_CONF]} (yours)"
    env[ALLOC_CONF] = EXPANDABLE
    if torch.cuda.is_initialized():
        torch.cuda.memory._set_allocator_settings(EXPANDABLE)
    return f"{ALLOC_CONF}={EXPANDABLE} (set by the runner)"


def pieces(count: int, size: int | None) -> list[slice]:
    """Slices of `count` rows, `size` at a time (one slice when size is None or covers them all)."""
    size = count if not size or size >= count else size
    return [slice(start, min(start + size, count)) for start in range(0, count, size)]


class GenerationPiecesTrainer(GRPOTrainer):
    """Releases the cached blocks before each generation and samples the batch `generation_chunk_size` sequences at
    a time. What changes in sampling: the pieces draw their tokens one after the other instead of side by side (the
    same distribution, another random stream) and each piece is left-padded to its own longest prompt. The batch's
    rows, its groups and everything after generation are unchanged. vLLM, continuous batching and multimodal inputs
    go to TRL whole."""

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if torch.cuda.is_initialized():  # the training phase's cached blocks go back before the cache grows
            torch.cuda.empty_cache()
        parts = pieces(len(prompt_ids), getattr(self.args, "generation_chunk_size", None))
        whole = self.use_vllm or self.use_transformers_continuous_batching or images is not None or multimodal_fields
        if whole or len(parts) == 1:
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        completion_ids = []
        for part in parts:
            ids, _ = super()._generate_single_turn(
                prompt_ids[part], images, multimodal_fields, num_generations, has_tool_images
            )
            completion_ids += ids
        return completion_ids, None  # transformers' generate returns no log-probs (TRL's regular path)


def with_generation_pieces(trainer_class: type) -> type:
    """`trainer_class` with `GenerationPiecesTrainer` right above TRL (below every mixin and opt-in layer)."""
    return type(f"{trainer_class.__name__}OnCuda", (trainer_class, GenerationPiecesTrainer), {})


class CudaMemoryCallback(TrainerCallback):
    """`memory/peak_allocated_gib` and `memory/peak_reserved_gib` in every logged row: this process's peaks since
    the previous log (then reset), so the records show each generation cycle's memory, allocator slack included."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None or not torch.cuda.is_available():
            return
        gib = 1024**3
        logs[PEAK_ALLOCATED] = torch.cuda.max_memory_allocated() / gib
        logs[PEAK_RESERVED] = torch.cuda.max_memory_reserved() / gib
        torch.cuda.reset_peak_memory_stats()
