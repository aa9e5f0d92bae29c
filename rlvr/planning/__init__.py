"""Peak GPU memory of a recipe, part by part, from the model's shape and the batch shape; nothing is loaded.

    python -m rlvr.planning --config recipes/grpo.yaml [--free_gib 6.9] [--accelerate_config FILE] [--field value]

`shapes` (model shapes, workloads, prompt length), `terms` (one function per memory term), `plan` (the per-phase plan,
remedies, the pre-flight budget check), `cli` (the command). The public names are re-exported here.
"""

from rlvr.planning.cli import main  # noqa: F401,E402
from rlvr.planning.plan import (  # noqa: F401
    MemoryPlan,
    Part,
    check_memory_budget,
    format_plan,
    generation_batch_for,
    gib,
    plan_memory,
    plan_recipe,
    remedies,
    smaller_model,
)
from rlvr.planning.shapes import (  # noqa: F401
    DTYPE_BYTES,
    GIB,
    KNOWN_SHAPES,
    LINEAR_MODULES,
    ModelShape,
    Workload,
    estimate_prompt_tokens,
    launch_shape,
    linear_shapes,
    lora_targets,
    resolve_shape,
    shape_from_config,
    workload_from_config,
    zero_stage_of,
)
from rlvr.planning.terms import (  # noqa: F401
    MARGIN_BYTES,
    activation_bytes,
    ddp_bucket_bytes,
    fused_head_bytes,
    kv_cache_bytes,
    layer_activation_bytes,
    lora_activation_bytes,
    lora_parameter_count,
    materialized_logits_bytes,
    parameter_count,
    quantized_weight_bytes,
    sampling_buffers_bytes,
    training_state_bytes,
)
