"""DAPO's dynamic sampling on top of GRPOTrainer (TRL has no such option).

A group whose filter reward (correctness by default, never the shaped total) is the same for all G completions adds
nothing to the gradient under a group baseline, yet costs a full generation. DAPO drops such groups and generates more
prompts, up to `max_resample_rounds` extra rounds, then tops the batch up with dropped groups so every step keeps its
shape. Flat means (`dynamic_sampling_filter`): `zero_variance`, all G values equal, the exact test of the logged
`zero_std_frac/*` and the advantage (`flat_groups`; TRL's `isclose(std, 0)` misses groups flat at 0.2), or
`all_min_or_max`, upstream DAPO's all 0 or all 1, which keeps groups flat at partial credit (docs/algorithms.md).
`dapo/groups_flat_partial` counts the generated groups flat strictly inside (0, 1): the ones only `zero_variance` drops.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from rlvr.metrics.reward_batch import flat_groups
from rlvr.training.config import RLVRConfig
from rlvr.training.trainer import RLVRTrainer

FILTERS = ("zero_variance", "all_min_or_max")
LEFT_PADDED = ("prompt_ids", "prompt_mask")


@dataclass
class DAPOConfig(RLVRConfig):
    """RLVRConfig plus dynamic sampling."""

    dynamic_sampling: bool = field(
        default=True, metadata={"help": "Drop groups whose filter reward is flat, resample."}
    )
    dynamic_sampling_filter: str = field(
        default="zero_variance",
        metadata={
            "help": "Which groups are dropped: zero_variance (all G values equal) or all_min_or_max (all 0 or all 1)."
        },
    )
    max_resample_rounds: int = field(
        default=4, metadata={"help": "Extra generation rounds per step before topping up."}
    )
    dynamic_sampling_reward: str = field(
        default="correctness", metadata={"help": "Reward whose flat groups are dropped."}
    )

    def __post_init__(self):
        super().__post_init__()
        if self.dynamic_sampling_filter not in FILTERS:
            raise ValueError(f"dynamic_sampling_filter must be one of {FILTERS}, got {self.dynamic_sampling_filter!r}")
        if self.max_resample_rounds < 0:
            raise ValueError(f"max_resample_rounds must be >= 0, got {self.max_resample_rounds}")
        per_process = self.generation_batch_size // self.world_size
        if self.dynamic_sampling and per_process % self.num_generations:
            raise ValueError(
                f"generation_batch_size ({self.generation_batch_size}) over {self.world_size} processes gives "
                f"{per_process} rows each, not a multiple of num_generations ({self.num_generations}): dynamic "
                "sampling filters whole groups, so each process must hold whole groups"
            )


def all_min_or_max(values: torch.Tensor, num_generations: int, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
    """(num_groups,) bool: True where a group is all at `low` or all at `high` (upstream DAPO's flat groups)."""
    grouped = values.view(-1, num_generations)
    return (grouped <= low).all(dim=1) | (grouped >= high).all(dim=1)


def informative_groups(values: torch.Tensor, num_generations: int, rule: str = "zero_variance") -> torch.Tensor:
    """(num_groups,) bool: True for the groups the filter keeps under `rule` (see the module docstring)."""
    flat = flat_groups(values, num_generations) if rule == "zero_variance" else all_min_or_max(values, num_generations)
    return ~flat


def flat_partial_groups(values: torch.Tensor, num_generations: int) -> int:
    """How many groups are flat at a value strictly between the minimum and the maximum: only `zero_variance` drops them."""
    return int((flat_groups(values, num_generations) & ~all_min_or_max(values, num_generations)).sum())


def select_rows(outputs: list[tuple[dict, torch.Tensor]], pad_values: dict[str, float]) -> dict:
    """Concatenate the chosen rows of several generation outputs, re-padding each tensor to a common length."""
    merged = {}
    for key, first in outputs[0][0].items():
        if not torch.is_tensor(first) or first.dim() == 0:
            continue
        parts = [output[key][rows] for output, rows in outputs]
        if first.dim() > 1:
            width = max(part.shape[1] for part in parts)
            pad = pad_values.get(key, 0)
            left = key in LEFT_PADDED
            parts = [
                torch.nn.functional.pad(
                    part, (width - part.shape[1], 0) if left else (0, width - part.shape[1]), value=pad
                )
                for part in parts
            ]
        merged[key] = torch.cat(parts)
    return merged


class DAPOTrainer(RLVRTrainer):
    """GRPOTrainer with DAPO dynamic sampling."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._resample_rng = random.Random(self.args.seed * 1009 + self.accelerator.process_index)

    def _fresh_prompts(self, num_prompts: int) -> list[dict]:
        """More training prompts for this process, each repeated G times as the RepeatSampler lays them out."""
        indices = [self._resample_rng.randrange(len(self.train_dataset)) for _ in range(num_prompts)]
        return [self.train_dataset[i] for i in indices for _ in range(self.num_generations)]

    def _local_informative_groups(self, local_rows: int) -> tuple[torch.Tensor, int]:
        """The keep mask of this process's groups, and how many of them are flat at a partial-credit value."""
        start = self.accelerator.process_index * local_rows
        values = self._reward_batch.components()[self.args.dynamic_sampling_reward][start : start + local_rows].cpu()
        keep = informative_groups(values, self.num_generations, self.args.dynamic_sampling_filter)
        return keep, flat_partial_groups(values, self.num_generations)

    def _generate_and_score_completions(self, inputs):
        if not self.model.training or not self.args.dynamic_sampling:
            return super()._generate_and_score_completions(inputs)
        G, needed = self.num_generations, len(inputs) // self.num_generations
        outputs, kept, dropped, batch = [], [], [], inputs  # kept/dropped hold (round, group) pairs
        flat_partial = 0
        while True:
            self._sampling_round = len(outputs)
            outputs.append(super()._generate_and_score_completions(batch))
            keep, flat = self._local_informative_groups(len(batch))
            flat_partial += flat
            for group, informative in enumerate(keep.tolist()):
                (kept if informative else dropped).append((len(outputs) - 1, group))
            full = torch.tensor(float(len(kept) >= needed), device=self.accelerator.device)
            if self.accelerator.gather(full).min().item() == 1.0 or len(outputs) > self.args.max_resample_rounds:
                break
            batch = self._fresh_prompts(needed)
        self._sampling_round = 0
        chosen = kept[:needed] + dropped[: max(needed - len(kept), 0)]
        rows_per_round = [
            (output, torch.tensor([g * G + i for r, g in chosen if r == round_ for i in range(G)], dtype=torch.long))
            for round_, output in enumerate(outputs)
        ]
        rows_per_round = [(output, rows) for output, rows in rows_per_round if len(rows)]
        pad_id = self.processing_class.pad_token_id if hasattr(self.processing_class, "pad_token_id") else 0
        merged = select_rows(rows_per_round, {"prompt_ids": pad_id, "completion_ids": pad_id})
        loss_mask = merged["completion_mask"] * merged.get("tool_mask", 1)
        merged["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        generated = len(kept) + len(dropped)
        topped_up = max(needed - len(kept), 0)
        self._log_dynamic_sampling(generated, min(len(kept), needed), len(outputs) - 1, topped_up, flat_partial)
        return merged

    def _log_dynamic_sampling(self, generated: int, kept: int, rounds: int, topped_up: int, flat_partial: int) -> None:
        counts = [generated, kept, topped_up, flat_partial]
        local = torch.tensor(counts, dtype=torch.float32, device=self.accelerator.device)
        generated, kept, topped_up, flat_partial = (
            self.accelerator.gather(local).view(-1, len(counts)).sum(dim=0).tolist()
        )
        metrics = self._metrics["train"]
        metrics["dapo/groups_generated"].append(generated)
        metrics["dapo/groups_kept"].append(kept)
        metrics["dapo/groups_topped_up"].append(topped_up)
        metrics["dapo/groups_flat_partial"].append(flat_partial)
        metrics["dapo/oversampling"].append(generated / kept if kept else float("nan"))
        metrics["dapo/rounds"].append(float(rounds))
