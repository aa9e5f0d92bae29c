"""Shared machinery for the recipes: config, runner, trainer hooks, callbacks. Kept import-light on purpose.

`rewards/`, `data/` and `recipes/` sit at the top of the repository, where a reader looks first; they are the sub-packages
`rlvr.rewards`, `rlvr.data` and `rlvr.recipes`. An install copies them under `rlvr/` (pyproject's package-dir), and an
editable install maps them there. In a plain clone or a git worktree run without an install, this file's own path
joins the package's search path, and the finder that path gets (`_RootFolders`) finds those three names, and only
those, in the repository root: no other root folder becomes `rlvr.<name>`, and there is no symlink and no second name
for the same module. Python asks it only for an `rlvr.<name>` that rlvr/ itself lacks.
"""

import os as _os
import sys as _sys
from importlib.machinery import PathFinder as _PathFinder

ROOT_SUBPACKAGES = ("rewards", "data", "recipes")
_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
_ENTRY = _os.path.abspath(__file__)  # a file, so no other path hook (directories, zip archives) takes it


class _RootFolders:
    """The path-entry finder of `_ENTRY`: `rlvr.rewards`, `rlvr.data` and `rlvr.recipes` from the repository root."""

    @classmethod
    def hook(cls, entry: str):
        if entry != _ENTRY:
            raise ImportError("not rlvr's entry for its root folders")
        return cls()

    def find_spec(self, fullname, target=None):
        if fullname.rpartition(".")[2] not in ROOT_SUBPACKAGES:
            return None
        return _PathFinder.find_spec(fullname, [_ROOT])

    def invalidate_caches(self):
        return None


if _os.path.isfile(_os.path.join(_ROOT, "rewards", "registry.py")):  # a checkout, not an installed copy
    _sys.path_hooks.append(_RootFolders.hook)
    __path__.append(_ENTRY)
