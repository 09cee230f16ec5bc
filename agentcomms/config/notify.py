"""The ``notify`` section: one-way push notifications to the human's ntfy topic (a turn ended,
an agent went offline, an approval waits), through the server and token of ``chat.ntfy``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentcomms.config.chat import NTFY_TOPIC, NtfyConfig
from agentcomms.config.section import Section

NotifyOn = Literal["turn_ended", "agent_offline", "approval_waiting"]
EVERYTHING: tuple[NotifyOn, ...] = ("turn_ended", "agent_offline", "approval_waiting")


class NotifyConfig(Section):
    enabled: bool = Field(
        default=False,
        description="send one-way notifications to ntfy (needs chat.ntfy enabled: its server "
        "and token are used)",
    )
    topic: str | None = Field(
        default=None,
        pattern=NTFY_TOPIC,
        description="the topic to notify; null: chat.ntfy.topic",
    )
    on: list[NotifyOn] = Field(
        default_factory=lambda: list(EVERYTHING),
        description="what is notified: turn_ended (an agent finished its turn, with the start "
        "of its reply), agent_offline (its session ended), approval_waiting (an agent asks, "
        "where the topic is not one of its chats, which show the request with its buttons)",
    )
    agents_may_send: bool = Field(
        default=True,
        description="every agent may send_message to ntfy:<topic> (a notification to the human "
        "that carries nothing back); false: only the agents the topic is mapped to",
    )

    def topic_of(self, ntfy: NtfyConfig) -> str | None:
        """The topic notified through `ntfy` (``chat.ntfy``); None when nothing is."""
        if not (self.enabled and ntfy.enabled):
            return None
        return self.topic or ntfy.topic

    def may_send(self, ntfy: NtfyConfig, channels: dict[str, str], agent: str, to: str) -> bool:
        """Whether `agent` may send_message to the channel `to` as a notification of its own."""
        topic = self.topic_of(ntfy)
        if topic is None or to != f"ntfy:{topic}":
            return False
        return self.agents_may_send or channels.get(to) == agent
