"""The request bodies of ``/api/v1``: one pydantic model each, for validation AND the
document.

``parse`` validates a body with these models, and ``bot.api.openapi`` publishes
their ``model_json_schema()`` as the request schemas, so a length, pattern or
required key changed here changes both at once. ``args`` of an ask is checked
separately (the ask_human guardrails, per client); its schema comes from
``bot.api.args_schema``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bot.api.problems import Problem

AGENT_NAME = r"^[A-Za-z0-9_.\-]{1,64}$"
MAX_CONTEXT_CHARS = 16_000
MAX_KEY_CHARS = 200

_ROUTE = "One of this client's routes."
_AGENT_NAME = "Shown on the card after the client's name."
_CONTEXT = (f"Yours: stored and echoed back (at most {MAX_CONTEXT_CHARS} characters as "
            "JSON).")
_KEY = ("Same key from the same client → the same request, never a second card (or send "
        "the Idempotency-Key header).")
_CALLBACK = ("Receives the signed webhook when the request resolves; its host must be on "
             "the server's api.callback_hosts.")


class _Body(BaseModel):
    """Strict: a body the document's JSON Schema refuses is refused here too."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _Create(_Body):
    """What an ask and an approval share."""

    route: str = Field(min_length=1, max_length=200, description=_ROUTE)
    agent_name: str | None = Field(default=None, pattern=AGENT_NAME, description=_AGENT_NAME)
    context: dict[str, Any] | None = Field(default=None, description=_CONTEXT)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=MAX_KEY_CHARS,
                                        description=_KEY)
    callback_url: str | None = Field(default=None, min_length=1, max_length=2000,
                                     description=_CALLBACK,
                                     json_schema_extra={"format": "uri"})


class AskBody(_Create):
    """Ask a human: Dify ask_human v1 args on one of your routes."""

    args: dict[str, Any] = Field(description="Dify ask_human v1 args, under this client's "
                                             "guardrails.")


class ApprovalBody(_Create):
    """Ask for approval of a tool call: an Approve / Reject card listing its arguments."""

    tool_name: str = Field(min_length=1, max_length=200)
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")
    reason: str | None = Field(default=None, max_length=2000,
                               description="Why the agent wants to run it.")
    editable: list[str] = Field(default_factory=list, max_length=20, description=(
        "Arguments approvers may change (\"Edit and approve\"), each one of args (or "
        "of input_schema's properties); the decision then "
        "carries the edited input in updated_input."))
    input_schema: dict[str, Any] | None = Field(default=None, description=(
        "JSON Schema of args (its properties type the edit inputs and validate edits); "
        "default: types inferred from the values."))

    @model_validator(mode="after")
    def _editable_known(self) -> ApprovalBody:
        known = set(self.args) | set((self.input_schema or {}).get("properties") or {})
        unknown = [name for name in self.editable if name not in known]
        if unknown:
            raise ValueError(f"editable: {', '.join(unknown)} is not one of the args; name "
                             "arguments of the call")
        return self


class CancelBody(_Body):
    """Resolve your request as cancelled (the body is optional)."""

    reason: str = Field(default="", max_length=500)


class AnswerBody(_Body):
    """Your own user answered (an MCP client's local form); approvals never."""

    action: str = Field(min_length=1, max_length=200, description="One of the request's "
                                                                  "action ids.")
    values: dict[str, Any] = Field(default_factory=dict, description="Field name → value.")


class RunBody(_Body):
    """Start an embedded agent run from an event (a CI job, an alert)."""

    agent: str = Field(min_length=1, max_length=200, description="One of this client's "
                                                                 "agents.")
    prompt: str = Field(min_length=1, max_length=20_000)
    route: str | None = Field(default=None, min_length=1, max_length=200,
                              description="Where the final answer goes (default: the "
                                          "agent's route).")


BODIES: dict[str, type[_Body]] = {
    "CreateRequest": AskBody, "CreateApproval": ApprovalBody, "CancelRequest": CancelBody,
    "AnswerRequest": AnswerBody, "CreateRun": RunBody,
}
"""Schema name in the document → the model that validates it."""


def parse(model: type[_Body], data: dict[str, Any]) -> Any:
    """Validate a request body; 422 naming each bad key."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [{"key": ".".join(str(p) for p in e["loc"]) or "(body)", "message": e["msg"]}
                    for e in exc.errors()]
        detail = "; ".join(f"{p['key']}: {p['message']}" for p in problems)
        raise Problem(422, "invalid-body", detail, errors=problems) from None
