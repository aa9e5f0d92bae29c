"""Write a task dataset to disk and/or push it to the Hub.

    python -m rlvr data --config recipes/grpo.yaml --output_dir artifacts/spell_backward
    python -m rlvr data --config recipes/grpo.yaml --push_to_hub you/spell-backward-3to10

`--config` takes a recipe YAML (its `data:` block is used) or a bare spec file. Without network a push fails with
one line, after the local copy (if `--output_dir` is given) is already written.
"""

from __future__ import annotations

import sys
from pathlib import Path

from huggingface_hub import DatasetCard
from huggingface_hub.utils import HFValidationError, validate_repo_id
from rlvr.data.generate import build_dataset, dataset_card
from rlvr.data.spec import DataSpec

from rlvr.inputs import (
    ArgumentParser,
    ConfigError,
    check_writable_folder,
    cli,
    load_recipe_yaml,
    non_negative_int,
    one_line,
    positive_int,
)


def check_repo_id(repo_id: str) -> None:
    """An invalid Hub id fails before the data is generated, with the Hub library's message on one line."""
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise ConfigError("--push_to_hub", f"invalid repo id {repo_id!r}: {one_line(err)}") from None


def push_to_hub(dataset, spec: DataSpec, repo_id: str, private: bool) -> None:
    """Push rows and card. Any Hub failure (offline, no token, no network) becomes one line naming the flag."""
    try:
        dataset.push_to_hub(repo_id, private=private)
        DatasetCard(dataset_card(spec, dataset)).push_to_hub(repo_id, repo_type="dataset")
    except Exception as err:  # noqa: BLE001 - network, auth and offline errors all end here
        raise ConfigError("--push_to_hub", f"could not push to {repo_id!r}: {one_line(err)}") from None


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="recipe YAML with a `data:` block, or a bare data spec")
    parser.add_argument("--output_dir", help="save_to_disk folder (a README.md card is written beside the data)")
    parser.add_argument("--push_to_hub", metavar="REPO_ID", help="Hub dataset id to push to")
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--seed", type=non_negative_int, help="override data.seed")
    parser.add_argument("--size", type=positive_int, help="override data.size")
    args = parser.parse_args(argv)
    if not args.output_dir and not args.push_to_hub:
        raise ConfigError("--output_dir", "set --output_dir and/or --push_to_hub: otherwise nothing is kept")
    if args.output_dir:
        check_writable_folder(args.output_dir, "--output_dir")
    if args.push_to_hub:
        check_repo_id(args.push_to_hub)
    raw = load_recipe_yaml(args.config)  # a recipe's `base:` chain is followed, so tiny variants have their data block
    spec = DataSpec.from_dict(raw.get("data", raw))
    if args.seed is not None or args.size is not None:
        overrides = {k: v for k, v in (("seed", args.seed), ("size", args.size)) if v is not None}
        spec = DataSpec.from_dict({**spec.to_dict(), **overrides})
    print(
        "[data] writing to "
        + " and ".join(
            [
                *([f"{args.output_dir}/"] if args.output_dir else []),
                *([f"the Hub dataset {args.push_to_hub}"] if args.push_to_hub else []),
            ]
        ),
        flush=True,
    )
    dataset = build_dataset(spec)
    print(f"generated {', '.join(f'{k}: {len(v)} rows' for k, v in dataset.items())}")
    if args.output_dir:
        dataset.save_to_disk(args.output_dir)
        (Path(args.output_dir) / "README.md").write_text(dataset_card(spec, dataset))
        print(f"[data] saved to {args.output_dir}/ (dataset card: {Path(args.output_dir) / 'README.md'})")
    if args.push_to_hub:
        push_to_hub(dataset, spec, args.push_to_hub, args.private)
        print(f"[data] pushed to {args.push_to_hub}")
    return 0


if __name__ == "__main__":
    sys.exit(cli(main))
