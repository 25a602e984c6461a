"""How much untrusted text one rendering may show, tried largest first.

Each platform keeps its own ladder of budgets: a renderer renders with the first
budget and steps down until the result fits the platform's limits.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """Character and item allowances for one rendering attempt."""

    question: int
    body: int
    label: int
    options: int
    option_text: int
    default: int
