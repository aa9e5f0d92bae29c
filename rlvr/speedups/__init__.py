"""CPU / tiny-model speed-ups: how a step is computed, never what it computes (same samples, same loss up to float
rounding). Opt-in: a recipe names them in its `speedups:` field (`none`, the default, `all`, or a comma list), and
they enter the trainer in one place, `shared_prefix.with_speedups`, which `trainer_for` calls only when a
recipe names one. The tiny CPU recipes name them
(recipes/tiny/grpo.yaml, `speedups: all`); the GPU recipes do not, because on a GPU they were never measured to be
exact or faster there. A trainer built without speed-ups has no class of this package in its MRO.

  shared_prefix  Log-prob passes (policy with gradient, reference, old policy, PPO's critic) run the prompt prefix
                 that every row of the batch shares (system prompt, task preamble) once, at batch size 1, and the
                 rows only from there on. For the tiny speller the shared prefix is ~140 of ~190 tokens per row, so
                 forward and backward shrink about 3x. Generation prefills the prefix once too.
  group_prompts  One level further: rows that share their whole prompt (a GRPO group's G completions) run that
                 prompt's rest once per group, and each row only its completion. Measured alone, interleaved
                 (benchmarks/speed.py): the policy's forward and backward 12-19% faster, the reference pass ~10%.
  prefix_attention
                 Generation where the prefix's keys and values are never repeated per row: every row's queries meet
                 the single copy in one stacked matmul, in a forward written out over the model's fused weights, with
                 `generate`'s sampling loop restated (prefix_attention.py: the same logits processors and multinomial
                 draws, so the same samples). Float32 llama-family models only (`prefix_attention.reason_not`).

Where each applies, and its hidden costs: shared_prefix.py and prefix_attention.py. Why they exist (a 0.8M-parameter
model on 2 cores spends its time in per-op overhead and repeated prefix work, not arithmetic) and what they bought:
docs/speed.md.
"""
