"""Shared machinery for the recipes: config, runner, trainer hooks, callbacks. Kept import-light on purpose.

`rewards/`, `data/` and `recipes/` sit at the top of the repository, where a reader looks first; they are the sub-packages
`rlvr.rewards`, `rlvr.data` and `rlvr.recipes`. An install copies them under `rlvr/` (pyproject's package-dir). In
a checkout they sit beside this folder, so the repository root joins this package's search path: `import
rlvr.rewards` then finds `<root>/rewards` from a plain clone, a git worktree or an editable install alike, with no
symlink and no second name for the same module.
"""

import os as _os

_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_ROOT, "rewards", "registry.py")):  # a checkout, not an installed copy
    __path__.append(_ROOT)

import logging as _logging

# Import-time lines of torchao (the 0.6B GPU recipe's 8-bit AdamW), which transformers' quantizers import whenever it
# is installed, so every command printed them: its optional C++ extensions, built for another Python, do not load
# (its optimizers are Python and do not use them), and torch 2.13 deprecates how it registers two enums. Dropped by
# message, here because they come before any other rlvr code runs; the run-time ones are in silence_known_warnings.
_logging.getLogger("torchao").addFilter(
    lambda r: not r.getMessage().startswith("Failed to load") or "_C_" not in r.getMessage()
)
_logging.getLogger("torch.utils._pytree").addFilter(
    lambda r: "is an Enum subclass and is now natively supported" not in r.getMessage()
)
