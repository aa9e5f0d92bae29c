"""Task data: reasoning_gym specs in, HF `DatasetDict` (train/test) out."""

from rlvr.data.generate import build_dataset, load_task_dataset
from rlvr.data.spec import DataSpec, TaskSpec

__all__ = ["DataSpec", "TaskSpec", "build_dataset", "load_task_dataset"]
