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
