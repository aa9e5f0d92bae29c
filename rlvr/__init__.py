"""Shared machinery for the recipes: config, runner, trainer hooks, callbacks. Kept import-light on purpose.

`rewards/`, `data/` and `recipes/` sit at the top of the repository, where a reader looks first; they are the sub-packages
`rlvr.rewards`, `rlvr.data` and `rlvr.recipes`. An install copies them under `rlvr/` (pyproject's package-dir), and an
editable install maps them there. In a plain clone or a git worktree run without an install, the finder below maps
those three names, and only those, to their root folders: no other root folder becomes `rlvr.<name>`, and there is no
symlink and no second name for the same module.
"""

import os as _os
import sys as _sys
from importlib.machinery import PathFinder as _PathFinder

ROOT_SUBPACKAGES = ("rewards", "data", "recipes")
_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))


class _RootSubpackages:
    """A meta-path finder for `rlvr.rewards`, `rlvr.data` and `rlvr.recipes` at the repository root (a checkout)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        package, _, name = fullname.partition(".")
        if package != __name__ or name not in ROOT_SUBPACKAGES:
            return None
        return _PathFinder.find_spec(fullname, [_ROOT])


if _os.path.isfile(_os.path.join(_ROOT, "rewards", "registry.py")):
    _sys.meta_path.append(_RootSubpackages)  # a checkout, not an installed copy
