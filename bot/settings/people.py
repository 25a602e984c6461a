"""People (``people:``, one person's identities on several platforms) and admins
(``admins:``, who may use admin chat actions)."""

from __future__ import annotations

from pydantic import Field, model_validator

from bot.settings.base import KeyPathError, _Strict


class AdminSettings(_Strict):
    """Who may use admin chat actions (withdraw any pending request), by platform user
    id (Slack ``U…``, Feishu ``ou_…``, console names)."""

    slack: list[str] = Field(default_factory=list)
    feishu: list[str] = Field(default_factory=list)
    console: list[str] = Field(default_factory=list)

    def includes(self, platform: str, user_id: str) -> bool:
        return user_id in (getattr(self, platform, None) or [])


PLATFORMS = ("slack", "feishu", "console")
"""The platforms a person may have an identity on."""


class PersonSettings(_Strict):
    """One person's identities: ``{slack: U…, feishu: alice@… or ou_…, console: name}``."""

    slack: str | None = None
    feishu: str | None = None
    console: str | None = None

    @model_validator(mode="after")
    def _somewhere(self) -> PersonSettings:
        if not (self.slack or self.feishu or self.console):
            raise ValueError("list at least one identity, e.g. {slack: U0123456789, "
                             "feishu: alice@example.com}")
        return self

    def on(self, platform: str) -> str | None:
        return getattr(self, platform, None) if platform in PLATFORMS else None

    def identities(self) -> list[tuple[str, str]]:
        """(platform, id) of every identity listed, in a stable order."""
        return [(platform, ident) for platform in PLATFORMS
                if (ident := self.on(platform)) is not None]


def check_people(people: dict[str, PersonSettings]) -> None:
    """One identity belongs to one person."""
    seen: dict[tuple[str, str], str] = {}
    for name, person in people.items():
        for platform in ("slack", "feishu", "console"):
            ident = person.on(platform)
            if ident is None:
                continue
            other = seen.setdefault((platform, ident.lower()), name)
            if other != name:
                raise KeyPathError(f"people.{name}.{platform}", f"{ident} is already "
                                   f"people.{other}.{platform}; one identity is one person")
