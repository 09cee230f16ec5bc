"""The Slack app agentcomms needs, as a manifest to paste into Slack (api.slack.com/apps,
Create New App, From a manifest): the bot's scopes, the message events, interactivity for the
buttons, and either Socket Mode or the Events API's URLs under ``server.public_url``.

No SDK here: ``config init --slack-manifest`` prints it without loading slack_sdk.
"""

from __future__ import annotations

from typing import Any

# The bot scopes agentcomms uses, each with what it is for; `doctor` names any missing.
BOT_SCOPES: dict[str, str] = {
    "chat:write": "post replies and approvals, and update an approval once decided",
    "reactions:write": "receipts, as reactions on the human's message",
    "channels:history": "read messages in public channels the app is in",
    "groups:history": "read messages in private channels the app is in",
    "im:history": "read direct messages to the app",
    "mpim:history": "read group direct messages the app is in",
    "files:read": "hear voice clips and save files sent to an agent",
    "files:write": "share the files an agent sends",
}
# The events a person's messages arrive in: one per kind of conversation.
BOT_EVENTS = ("message.channels", "message.groups", "message.im", "message.mpim")
EVENTS_PATH = "/webhooks/slack/events"
INTERACTIVITY_PATH = "/webhooks/slack/interactivity"


def manifest(public_url: str | None = None, *, name: str = "agentcomms") -> dict[str, Any]:
    """The app's manifest: Socket Mode, or, given the gateway's `public_url`, the Events API
    and interactivity posting there."""
    events: dict[str, Any] = {"bot_events": list(BOT_EVENTS)}
    interactivity: dict[str, Any] = {"is_enabled": True}
    if public_url:
        base = public_url.rstrip("/")
        events["request_url"] = base + EVENTS_PATH
        interactivity["request_url"] = base + INTERACTIVITY_PATH
    return {
        "display_information": {
            "name": name,
            "description": "Your coding agents' messages, approvals and questions",
        },
        "features": {
            # Direct messages to the app reach an agent: its Messages tab must take them.
            "app_home": {"messages_tab_enabled": True, "messages_tab_read_only_enabled": False},
            "bot_user": {"display_name": name, "always_online": True},
        },
        "oauth_config": {"scopes": {"bot": list(BOT_SCOPES)}},
        "settings": {
            "event_subscriptions": events,
            "interactivity": interactivity,
            "org_deploy_enabled": False,
            "socket_mode_enabled": not public_url,
            "token_rotation_enabled": False,
        },
    }


def missing_scopes(granted: str | None) -> list[str]:
    """The scopes agentcomms uses that Slack's ``x-oauth-scopes`` answer does not name."""
    have = {s.strip() for s in (granted or "").split(",") if s.strip()}
    return [scope for scope in BOT_SCOPES if scope not in have]


def scope_problem(granted: str | None) -> str | None:
    """What a bot token lacking scopes cannot do, and how to give them; None when it lacks none."""
    missing = missing_scopes(granted)
    if not missing:
        return None
    uses = "; ".join(f"{scope}: {BOT_SCOPES[scope]}" for scope in missing)
    return (
        f"the bot token lacks {', '.join(missing)} ({uses}): add them under OAuth & "
        "Permissions (or create the app from `agentcomms config init --slack-manifest`), "
        "reinstall the app and put its new token in chat.slack.bot_token"
    )
