"""Shared machinery for the recipes: config, runner, trainer hooks, callbacks. Kept import-light on purpose.

`rewards/`, `data/` and `recipes/` sit at the top of the repository, where a reader looks first; they are the sub-packages
`rlvr.rewards`, `rlvr.data` and `rlvr.recipes`. An install copies them under `rlvr/` (pyproject's package-dir), an
editable install maps them there. In a plain clone or worktree without an install, this file's path joins the
package's search path, and its finder (`_RootFolders`, consulted only for an `rlvr.<name>` that rlvr/ lacks) finds those
three, and no other root folder, in the repository root: no symlink, no second name for a module.
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


if _os.path.isfile(_os.path.join(_ROOT, "rewards", "registry.py")):  # a checkout, not an installed copy
    _sys.path_hooks.append(_RootFolders.hook)
    __path__.append(_ENTRY)

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
