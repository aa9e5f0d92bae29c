"""Shared machinery for the recipes: config, runner, trainer hooks, callbacks. Kept import-light on purpose."""
