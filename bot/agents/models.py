"""Turn a configured model id into a pydantic-ai model, with errors people can act on."""

from __future__ import annotations

from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model

from bot.agents.base import AgentRuntimeError, UnknownModelError
from bot.agents.scripted import known_scripts, scripted_model

SCRIPTED_PREFIX = "scripted:"


def resolve_model(model_id: str, tool_name: str = "ask_human") -> Model:
    """``scripted:<name>`` gives an offline model; anything else goes to pydantic-ai.

    pydantic-ai ids look like ``openai:gpt-4o`` or ``anthropic:claude-sonnet-4-5``
    and read their API keys from the environment.
    """
    if model_id.startswith(SCRIPTED_PREFIX):
        name = model_id[len(SCRIPTED_PREFIX) :]
        if name not in known_scripts():
            known = ", ".join(SCRIPTED_PREFIX + n for n in known_scripts())
            raise UnknownModelError(f"unknown scripted model {model_id!r}; known: {known}")
        return scripted_model(name, tool_name)
    try:
        return infer_model(model_id)
    except UserError as exc:
        text = str(exc)
        if "api key" in text.lower() or "api_key" in text.lower():
            raise AgentRuntimeError(f"model {model_id!r} needs credentials: {text}") from exc
        raise UnknownModelError(
            f"unknown model id {model_id!r}: {text}. Use a pydantic-ai id such as "
            f"'openai:gpt-4o', or one of the offline models "
            f"({', '.join(SCRIPTED_PREFIX + n for n in known_scripts())})."
        ) from exc
    except ImportError as exc:
        raise AgentRuntimeError(f"model {model_id!r} needs an optional package: {exc}") from exc
    except ValueError as exc:
        raise UnknownModelError(f"cannot use model {model_id!r}: {exc}") from exc
