"""How much untrusted text one rendering may show, tried largest first.

Each platform keeps its own ladder of budgets: a renderer renders with the first
budget and steps down until the result fits the platform's limits.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bot.askhuman.schema import AskHumanToolArgs, MultiSelectField, SelectField
from renderers.markdown import plain


@dataclass(frozen=True)
class Budget:
    """Character and item allowances for one rendering attempt."""

    question: int
    body: int
    label: int
    options: int
    option_text: int
    default: int


TRUNCATION_SLACK = 9
"""``truncate(text, n)`` is never shorter than ``n - 9`` (it may back off an ``&…;``
entity of up to 8 characters, then adds one ellipsis character)."""


def options_text_floor(
    args: AskHumanToolArgs, budget: Budget, per_option: int = 0, stop: int | None = None
) -> int:
    """A lower bound on the size of the options a rendering with ``budget`` shows.

    Options dominate a big card (8 fields × 100 options), so a renderer can skip a
    ladder step whose options alone exceed the platform's limit, without building it:
    the step would have failed the size check anyway, so the output is unchanged.
    ``per_option`` is the fixed size each option adds besides its label (JSON keys
    for Feishu's byte count); counting stops once the total passes ``stop``.
    """
    cap = budget.option_text - TRUNCATION_SLACK
    total = 0
    for field in args.fields:
        if isinstance(field, SelectField | MultiSelectField):
            for option in field.options[: budget.options]:
                total += min(len(plain(option.label)), cap) + per_option
            if stop is not None and total > stop:
                break
    return total


def ladder(
    steps: Sequence[Budget], args: AskHumanToolArgs, limit: int, per_option: int = 0
) -> Iterator[Budget]:
    """The steps worth trying: those whose options alone exceed ``limit`` (counted in
    characters, a lower bound of both Slack's text count and Feishu's UTF-8 bytes) are
    skipped, except the last, which is always tried as the fallback."""
    for budget in steps[:-1]:
        if options_text_floor(args, budget, per_option, stop=limit) <= limit:
            yield budget
    yield steps[-1]
