"""`python -m toy_rlvr`: run the four demos with their default knobs and print them."""

from .demos import demo_gradient_bias, demo_group_size, demo_pass_at_k, demo_training
from .report import format_all
from .task import make_task


def main(seed: int = 0) -> str:
    task = make_task(seed=seed)
    text = format_all(
        demo_pass_at_k(task),
        demo_gradient_bias(task, seed=seed),
        demo_training(task, seed=seed),
        demo_group_size(task, seed=seed),
    )
    print(text)
    return text


if __name__ == "__main__":
    main()
