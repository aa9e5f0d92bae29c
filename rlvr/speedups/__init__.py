"""CPU / tiny-model speed-ups: how a step is computed, never what it computes (same samples, same loss up to float
rounding). Opt-in: a recipe names them in its `speedups:` field (`none`, the default, `all`, or a comma list), and
they enter the trainer in one place, `shared_prefix.with_speedups`, which `trainer_for` calls only when a recipe names
one; a trainer built without speed-ups has no class of this package in its MRO. The GPU recipes do not name them: they
were never measured exact or faster on a GPU.

  shared_prefix     the prompt prefix every row shares runs once, at batch size 1, in generation and log-prob passes
  group_prompts     rows that share their whole prompt (a GRPO group) run that prompt's rest once per group
  prefix_attention  generation attends the prefix's single copy of keys and values (prefix_attention.py)

What each does, where it applies and what it bought: docs/speed.md and docs/measurements/speed.md.
"""
