"""Peak GPU memory of a recipe, part by part, from the model's shape and the batch shape; nothing is loaded.

    python -m rlvr.planning --config recipes/grpo.yaml [--free_gib 6.9] [--accelerate_config FILE] [--field value]

`shapes` (model shapes, workloads, prompt length), `terms` (one function per memory term), `plan` (the per-phase plan,
remedies, the pre-flight budget check): their public names are re-exported here. The command, `cli` (`rlvr plan`,
`python -m rlvr.planning`), is not: it parses recipes with `rlvr.training.config`, and the trainer's pre-flight check
imports this package, so a run loads the planner without its command line.
"""

from rlvr.planning.plan import *
from rlvr.planning.shapes import *
from rlvr.planning.terms import *
