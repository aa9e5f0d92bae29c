"""Warm-start the tiny speller: a random tiny Qwen3 + byte tokenizer, supervised on our own spell_backward rows.

    HF_HUB_OFFLINE=1 WANDB_MODE=disabled python recipes/tiny/sft.py --config recipes/tiny/sft.yaml

The GRPO main job needs a model that is right on a minority of held-out words, so SFT stops early. Reversal
"clicks" abruptly (about 10% -> 70% exact match within 100 steps) and the step where it clicks moves with
floating-point details (thread count, CPU), so the stop is a measured target, not a step count: every
`probe_steps` steps the model samples `probe_samples` answers for the SFT data's own test words (never trained on)
exactly as GRPO samples, and training stops at the first probe whose exact-match rate reaches
`stop_at_exact_match`. Words held out by the GRPO recipe (`heldout_recipe`'s test split) are never trained on here,
so its evaluation stays honest.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere in the repo

import torch
from rlvr.data.generate import build_dataset
from rlvr.data.spec import DataSpec
from rlvr.recipes.tiny.model import TinyModelConfig, build_tiny_model, build_tokenizer
from rlvr.recipes.tiny.sft_data import sft_dataset
from rlvr.rewards.registry import resolve_reward_funcs
from transformers import AutoModelForCausalLM, TrainerCallback
from trl import SFTConfig, SFTTrainer

from rlvr.analysis.evaluate import generate, hf_sampler, prompt_token_ids, sampling_settings
from rlvr.inputs import ConfigError, cli
from rlvr.metrics.keys import EXACT_MATCH, OVERALL
from rlvr.metrics.scoring import score, summarize
from rlvr.training.config import RecipeParser, load_recipe, parse_error, validate


@dataclass
class SpellerArguments:
    """What the SFT recipe adds to TRL's SFTConfig: the rows, the words to keep out, the shape, and the stop rule."""

    data: dict | str | None = field(
        default=None,
        metadata={
            "help": "Data spec of the SFT rows (same form as a GRPO recipe's `data:` block); "
            "its test split is the probe set."
        },
    )
    heldout_recipe: str = field(
        default="recipes/tiny/grpo.yaml",
        metadata={
            "help": "The GRPO recipe: its test-split words are removed from the SFT rows, and the probe "
            "samples with its settings (temperature, max_completion_length, ...)."
        },
    )
    model_shape: dict | str | None = field(
        default=None, metadata={"help": "TinyModelConfig fields (hidden_size, num_hidden_layers, ..., seed)."}
    )
    stop_at_exact_match: float | None = field(
        default=None,
        metadata={"help": "Stop at the first probe whose sampled exact match reaches this; unset = never."},
    )
    probe_steps: int = field(default=10, metadata={"help": "Probe every this many optimizer steps."})
    probe_samples: int = field(default=4, metadata={"help": "Samples per probe word."})


def parse(argv: list[str] | None) -> tuple[SpellerArguments, SFTConfig]:
    try:
        args, training = RecipeParser((SpellerArguments, SFTConfig)).parse_args_and_config(argv)
    except ConfigError:
        raise
    except FileNotFoundError as err:
        raise ConfigError("--config", " ".join(str(err).split())) from None
    except ValueError as err:
        raise parse_error(err, (SpellerArguments, SFTConfig)) from None
    if args.data is None:
        raise ConfigError("data", "set the spec of the SFT rows")
    if args.stop_at_exact_match is not None and not 0 < args.stop_at_exact_match <= 1:
        raise ConfigError("stop_at_exact_match", f"must be in (0, 1], got {args.stop_at_exact_match}")
    for name in ("probe_steps", "probe_samples"):
        if getattr(args, name) < 1:
            raise ConfigError(name, f"must be a positive integer, got {getattr(args, name)}")
    return args, training


def model_shape(raw: dict | None) -> TinyModelConfig:
    known = {f.name for f in fields(TinyModelConfig)}
    for key in raw or {}:
        if key not in known:
            raise ConfigError(f"model_shape.{key}", f"unknown field; expected one of {sorted(known)}")
    return TinyModelConfig(**(raw or {}))


def heldout(recipe: str) -> tuple[set[str], dict]:
    """The GRPO recipe's test questions (regenerated from its spec) and its sampling settings."""
    grpo = validate(load_recipe(["--config", recipe, "--build_tiny_model", "true"]))  # no model needed yet
    return set(grpo.dataset["test"]["question"]), sampling_settings(grpo.training, {})


class ExactMatchStop(TrainerCallback):
    """Samples the probe words every `every` steps; stops training once exact match reaches `target`."""

    def __init__(self, rows, tokenizer, settings: dict, every: int, samples: int, target: float | None, seed: int):
        self.rows, self.tokenizer, self.settings = rows, tokenizer, settings
        self.every, self.samples, self.target, self.seed = every, samples, target, seed
        self.history: list[tuple[int, float]] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.target is None or state.global_step % self.every:
            return
        model.eval()
        padding_side = self.tokenizer.padding_side  # the sampler pads left, as TRL's generation does; SFT pads right
        with torch.random.fork_rng():  # the probe must not move the training run's random stream
            torch.manual_seed(self.seed)
            prompt_ids = prompt_token_ids(self.tokenizer, [r["prompt"] for r in self.rows], None)
            sample = hf_sampler(model, self.tokenizer, self.settings, self.samples, str(model.device))
            ids = generate(sample, prompt_ids, len(prompt_ids), self.samples, show_progress=False)
        self.tokenizer.padding_side = padding_side
        model.train()
        completions = [self.tokenizer.batch_decode(per_prompt, skip_special_tokens=True) for per_prompt in ids]
        records = score(self.rows, completions, resolve_reward_funcs(["correctness", "format"]), ids)
        exact = summarize(records, self.samples, [1])[OVERALL][EXACT_MATCH]
        self.history.append((state.global_step, exact))
        print(f"[sft] step {state.global_step}: probe exact match {exact:.3f}", flush=True)
        if exact >= self.target:
            control.should_training_stop = True


def main(argv: list[str] | None = None) -> Path:
    args, training = parse(argv)
    shape = model_shape(args.model_shape)
    data = build_dataset(DataSpec.from_dict(args.data))
    excluded, settings = heldout(args.heldout_recipe)
    train = sft_dataset(data["train"], excluded)
    probe_rows = [row for row in data["test"] if row["question"] not in excluded]
    print(
        f"[sft] {len(train)} rows ({len(data['train']) - len(train)} GRPO test words removed), "
        f"{len(probe_rows)} probe words",
        flush=True,
    )

    with tempfile.TemporaryDirectory() as init_dir:
        model = AutoModelForCausalLM.from_pretrained(build_tiny_model(init_dir, shape), dtype="float32")
    print(f"[sft] model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters", flush=True)
    tokenizer = build_tokenizer()
    stop = ExactMatchStop(
        probe_rows, tokenizer, settings, args.probe_steps, args.probe_samples, args.stop_at_exact_match, training.seed
    )
    trainer = SFTTrainer(model=model, args=training, train_dataset=train, processing_class=tokenizer, callbacks=[stop])
    trainer.train()
    trainer.save_model(training.output_dir)  # model, generation config and tokenizer files
    return finish_checkpoint(Path(training.output_dir), shape, trainer.state.global_step, stop.history)


def finish_checkpoint(output_dir: Path, shape: TinyModelConfig, steps: int, probes: list[tuple[int, float]]) -> Path:
    """Replace the trainer's generic model card (it names a temporary path) and drop its pickled arguments."""
    (output_dir / "training_args.bin").unlink(missing_ok=True)
    last = f"; last probe exact match {probes[-1][1]:.3f}" if probes else ""
    (output_dir / "README.md").write_text(
        "# tiny-speller\n\n"
        f"A {shape.num_hidden_layers}-layer, hidden-{shape.hidden_size} Qwen3 with a byte-level tokenizer, fine-tuned "
        "on spell_backward to answer `<think>s u n -> n u s</think><answer>nus</answer>` and stopped early "
        f"({steps} steps{last}) so that GRPO has something to learn: the warm start of `recipes/tiny/grpo.yaml`.\n\n"
        "Rebuild:\n\n"
        "    HF_HUB_OFFLINE=1 WANDB_MODE=disabled python recipes/tiny/sft.py --config recipes/tiny/sft.yaml\n"
    )
    return output_dir


if __name__ == "__main__":
    print(f"[sft] checkpoint written to {cli(main, sys.argv[1:])}")
