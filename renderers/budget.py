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
    args: AskHumanToolArgs, budget: Budget, per_option: int = 0, stop: int | None = None,
    sizes: _LabelSizes | None = None,
) -> int:
    """A lower bound on the size of the options a rendering with ``budget`` shows.

    Options dominate a big card (8 fields × 100 options), so a renderer can skip a
    ladder step whose options alone exceed the platform's limit, without building it:
    the step would have failed the size check anyway, so the output is unchanged.
    ``per_option`` is the fixed size each option adds besides its label (JSON keys
    for Feishu's byte count); counting stops once the total passes ``stop``.
    ``sizes`` holds the labels' lengths across the steps of one ladder.
    """
    sizes = sizes or _LabelSizes(args)
    total = per_option * sum(min(len(o), budget.options) for o in sizes.options)
    if stop is not None and total > stop:
        return total  # the options' fixed bytes alone are over: no label need be read
    cap = budget.option_text - TRUNCATION_SLACK
    step = _LABELS_AT_ONCE if stop is not None else max(budget.options, 1)
    for index, options in enumerate(sizes.options):
        count = min(len(options), budget.options)
        for start in range(0, count, step):
            end = min(start + step, count)
            total += sum(min(n, cap) for n in sizes.upto(index, end)[start:end])
            if stop is not None and total > stop:
                return total
    return total


_LABELS_AT_ONCE = 16
"""Labels read between checks against ``stop``: a step over the limit is known after
the first few, and each label read costs a ``plain`` on a first render."""


class _LabelSizes:
    """``len(plain(label))`` of the first options of each select field, read once for
    all the steps of a ladder (each step looks at fewer options of the same fields)."""

    def __init__(self, args: AskHumanToolArgs) -> None:
        self.options = [f.options for f in args.fields
                        if isinstance(f, SelectField | MultiSelectField)]
        self._sizes: list[list[int]] = [[] for _ in self.options]

    def upto(self, index: int, count: int) -> list[int]:
        """The sizes of the ``index``-th select field's options read so far, at least its
        first ``count`` (the list itself: slice it, never change it)."""
        known = self._sizes[index]
        if len(known) < count:
            known += [len(plain(o.label)) for o in self.options[index][len(known):count]]
        return known


def ladder(
    steps: Sequence[Budget], args: AskHumanToolArgs, limit: int, per_option: int = 0,
    *, options_shown: bool = True,
) -> Iterator[Budget]:
    """The steps worth trying: those whose options alone exceed ``limit`` (counted in
    characters, a lower bound of both Slack's text count and Feishu's UTF-8 bytes) are
    skipped, except the last, which is always tried as the fallback. A card that shows
    no options (decided, timed out, …) tries every step: its body may show more."""
    if not options_shown:
        yield from steps
        return
    sizes = _LabelSizes(args)
    for budget in steps[:-1]:
        if options_text_floor(args, budget, per_option, stop=limit, sizes=sizes) <= limit:
            yield budget
    yield steps[-1]
