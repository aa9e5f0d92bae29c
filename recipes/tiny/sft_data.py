"""SFT rows for the tiny speller: our generator's chat prompts, completed in the exact format GRPO rewards.

The think part spells the word letter by letter and then backward (`<think>s u n -> n u s</think>`), so a person
reading a rollout sees where a wrong answer went wrong; the answer joins the reversed letters.
"""

from __future__ import annotations

from datasets import Dataset


def spelled_completion(answer: str) -> str:
    """`nus` -> `<think>s u n -> n u s</think><answer>nus</answer>` (the word is the answer reversed)."""
    return f"<think>{' '.join(answer[::-1])} -> {' '.join(answer)}</think><answer>{answer}</answer>"


def to_sft_row(row: dict) -> dict:
    """A generator row -> TRL's conversational prompt-completion row; the prompt is the one GRPO samples from."""
    return {
        "prompt": row["prompt"],
        "completion": [{"role": "assistant", "content": spelled_completion(row["answer"])}],
    }


def sft_dataset(rows: Dataset, exclude_questions: set[str] = frozenset()) -> Dataset:
    """Prompt-completion rows for SFTTrainer, minus any question in `exclude_questions` (the held-out words)."""
    kept = rows.filter(lambda row: row["question"] not in exclude_questions)
    return kept.map(to_sft_row, remove_columns=kept.column_names)
