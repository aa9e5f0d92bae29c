"""GRPO on the tiny speller with a plain `trl.GRPOTrainer`: the repo's readings come from the two marked lines.

    python examples/plain_trl_grpo.py --output_dir runs/plain-trl --max_steps 4 --gradient_accumulation_steps 2
    torchrun --nproc_per_node 2 examples/plain_trl_grpo.py --output_dir runs/plain-trl-2 --max_steps 4

Everything else is what a TRL user writes: a dataset with a conversational `prompt` column (the tiny recipe's
spell_backward words, recipes/tiny/grpo.yaml), two reward functions, a `GRPOConfig` (every field is a flag, as in
`trl/scripts/grpo.py`) and `GRPOTrainer`. With the readings, each generation batch logs `avg_<component>`, exact
`zero_std_frac/<component>`, `zero_std_side/*`, `step/truncated`, `step/truncated_wrong`, `step/false_full_credit`
and `step/hollow_format` into TRL's logs (console, `report_to` trackers, `trainer_state.json`); its evaluation
rows (`--eval_strategy steps`) get `rlvr evaluate`'s held-out `eval_exact_match`, `eval_pass@1`,
`eval_mean_correctness` and exact match by word length (rlvr/metrics/held_out.py). 12 completions a
step (3 prompts x G = 4): per process 6 under torchrun with 2 processes, so one prompt group straddles the two;
one process needs `--gradient_accumulation_steps 2` for the same 12. (`accelerate launch --cpu --num_processes 2`
starts a single process on a CPU machine; use torchrun.)
"""

from __future__ import annotations

import sys

from rlvr.data import DataSpec, build_dataset
from rlvr.rewards.functions import correctness, format
from transformers import HfArgumentParser
from trl import GRPOConfig, GRPOTrainer

from rlvr.metrics.readings import with_readings  # the readings, line 1 of 2

DATA = {
    "size": 4000,
    "seed": 42,
    "test_size": 200,
    "system_prompt": "tiny",  # recipes/tiny/grpo.yaml's data
    "specs": [{"name": "spell_backward", "config": {"min_word_len": 3, "max_word_len": 6}}],
}
DEFAULTS = [  # the tiny recipe's settings, for a few CPU steps; any flag given on the command line wins
    "--use_cpu",
    "true",
    "--bf16",
    "false",
    "--learning_rate",
    "1e-3",
    "--beta",
    "0.04",
    "--num_generations",
    "4",
    "--per_device_train_batch_size",
    "6",
    "--max_completion_length",
    "48",
    "--temperature",
    "1.0",
    "--reward_weights",
    "1.0",
    "0.5",
    "--logging_steps",
    "1",
    "--save_strategy",
    "no",
    "--report_to",
    "none",
    "--log_completions",
    "true",
    "--num_completions_to_print",
    "1",
    "--seed",
    "42",
    "--max_steps",
    "4",
]


def main(argv: list[str] | None = None, model: str = "models/tiny-speller") -> GRPOTrainer:
    (args,) = HfArgumentParser(GRPOConfig).parse_args_into_dataclasses(
        DEFAULTS + list(sys.argv[1:] if argv is None else argv)
    )
    data = build_dataset(DataSpec.from_dict(DATA))
    trainer = GRPOTrainer(  # with --eval_strategy steps: the first 8 held-out words, every --eval_steps
        model=model,
        reward_funcs=[correctness, format],
        args=args,
        train_dataset=data["train"],
        eval_dataset=data["test"].select(range(8)) if args.eval_strategy != "no" else None,
    )
    trainer = with_readings(trainer)  # the readings, line 2 of 2
    trainer.train()
    trainer.save_state()  # trainer_state.json: the log history, readings included
    return trainer


if __name__ == "__main__":
    main()
