"""Task data: reasoning_gym specs in, HF `DatasetDict` (train/test) out."""

from data.generate import build_dataset, load_task_dataset
from data.spec import DataSpec, TaskSpec

__all__ = ["DataSpec", "TaskSpec", "build_dataset", "load_task_dataset"]
