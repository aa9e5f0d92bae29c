"""Peak GPU memory of a recipe, part by part, from the model's shape and the batch shape; nothing is loaded.

    rlvr plan --config recipes/grpo.yaml [--free_gib 6.9] [--accelerate_config FILE] [--field value]

`shapes` (model shapes, workloads, prompt length), `terms` (one function per memory term), `plan` (the per-phase plan,
remedies, the pre-flight budget check): their public names are re-exported here. The command (`rlvr plan`,
`rlvr/training/plan_cli.py`) parses recipes with `rlvr.training.config`, so it sits above this package, which the
runner's pre-flight check imports.
"""

from rlvr.planning.plan import *
from rlvr.planning.shapes import *
from rlvr.planning.terms import *
