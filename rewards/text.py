"""Turn whatever TRL hands a reward function into the text the model actually wrote.

TRL passes plain strings for text prompts and `[{"role": "assistant", "content": ...}]` for conversational ones.
With transformers 5, a tokenizer that carries a response parser (Qwen3's, once TRL's `add_response_schema` is
applied) splits `<think>...</think>` out of `content` into `reasoning_content`; we put it back so the format reward
still sees the tags the model wrote.
"""

from __future__ import annotations

from typing import Any

THINKING_KEYS = ("reasoning_content", "thinking", "reasoning")


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: [{"type": "text", "text": ...}, ...]
        return "".join(_content_text(part.get("text", "") if isinstance(part, dict) else part) for part in content)
    return str(content)


def _message_text(message: Any) -> str:
    if not isinstance(message, dict):
        return _content_text(message)
    content = _content_text(message.get("content"))
    reasoning = next((message[key] for key in THINKING_KEYS if message.get(key)), None)
    if reasoning is not None and "<think>" not in content:
        content = f"<think>{_content_text(reasoning)}</think>{content}"
    return content


def completion_text(completion: Any) -> str:
    """The completion as one string; never raises (None and odd shapes become their best text, or "")."""
    try:
        if isinstance(completion, list):
            return "".join(_message_text(m) for m in completion if not isinstance(m, dict) or m.get("role", "assistant") == "assistant")
        return _message_text(completion)
    except Exception:  # noqa: BLE001 - a reward must never raise on a completion
        return ""


def extract_last_answer(text: str, tag: str = "answer") -> str | None:
    """reasoning_gym's `extract_answer` (the last `<answer>...</answer>`, stripped) in linear time.

    reasoning_gym's regex `<answer>\\s?(.*?)\\s?</answer>` rescans to the end for every unclosed opening tag, which
    is quadratic on adversarial completions; this scan yields the same matches (leftmost opening, first closing
    after it, non-overlapping) and the same result after `strip()`.
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    last, position = None, 0
    while True:
        start = text.find(opening, position)
        if start < 0:
            return last
        end = text.find(closing, start + len(opening))
        if end < 0:
            return last
        last = text[start + len(opening) : end].strip()
        position = end + len(closing)
