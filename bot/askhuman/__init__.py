"""The ask-human contract (Dify Agent ``dify.ask_human``, schema version 1)."""

from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import (
    AskHumanAction,
    AskHumanField,
    AskHumanSelectedAction,
    AskHumanToolArgs,
    AskHumanToolResult,
    DeferredToolCallPayload,
)

__all__ = [
    "AskHumanAction",
    "AskHumanConfig",
    "AskHumanField",
    "AskHumanSelectedAction",
    "AskHumanToolArgs",
    "AskHumanToolResult",
    "DeferredToolCallPayload",
]
