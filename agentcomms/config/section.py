"""What every configuration section shares: unknown keys refused, an empty string read as unset."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from agentcomms.ids import check_agent_id

# An agent's id as a key or a value of the file (agents.<id>, chat.channels).
AgentIdKey = Annotated[str, AfterValidator(check_agent_id)]


class Section(BaseModel):
    # A misspelt key is a mistake the user wants to hear about, not a silently ignored one.
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _empty_string_means_unset(cls, data: Any) -> Any:
        # `"token": "${TELEGRAM_BOT_TOKEN:-}"` with the variable unset must read as "no token",
        # not as a configured empty token (and an empty path must not become ".").
        if not isinstance(data, dict):
            return data
        unset = [
            name
            for name, info in cls.model_fields.items()
            if data.get(name) == "" and not info.is_required() and info.default is None
        ]
        return {**data, **dict.fromkeys(unset)} if unset else data
