"""A changed config applied to a running gateway, without dropping anything in flight.

What every part reads when it acts, not when it started, changes live: which chat goes to which
agent (``chat.channels``), who may write (``chat.allowed_senders``) and the configured agents
(``agents``, registered again where they changed). The gateway, and in ``up`` the worker beside
it, share one ``Config``, so those keys are replaced in it and the next message reads them.

Everything else (a provider's token, the socket, Temporal, the database, the console…) was read
once to open a connection or a listener: a change there is named, with the restart it needs,
and not applied, so the running parts never disagree with each other.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentcomms.config import Config
from agentcomms.errors import ConfigError, RpcError
from gateway.socket.declare import Human, declare
from gateway.socket.params import NoParams
from gateway.socket.protocol import CONFIG_INVALID

log = logging.getLogger(__name__)

# The keys a reload applies, as `config show` names them.
LIVE = ("chat.channels", "chat.allowed_senders", "agents")


@dataclass
class Reloaded:
    """What a reload did: the keys it applied, and those that wait for a restart."""

    applied: list[str] = field(default_factory=list)
    needs_restart: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"applied": self.applied, "needs_restart": self.needs_restart}


def changed_keys(old: Config, new: Config) -> list[str]:
    """The keys whose values differ, by section (``chat.<name>`` within chat). Secrets are
    compared by value, never shown: only the key is named."""
    before, after = old.model_dump(), new.model_dump()
    changed = []
    for section in sorted(before.keys() | after.keys()):
        was, now = before.get(section), after.get(section)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict) and section == "chat":
            changed += [
                f"chat.{key}"
                for key in sorted(was.keys() | now.keys())
                if was.get(key) != now.get(key)
            ]
        else:
            changed.append(section)
    return changed


class ConfigReload:
    """Reads the config again and applies what can change live to the running one."""

    def __init__(
        self,
        cfg: Config,
        load: Callable[[], Config],
        register: Callable[[list[str]], Awaitable[None]],
        record_channels: Callable[[], Awaitable[None]],
    ) -> None:
        self._cfg = cfg
        self._load = load
        self._register = register
        self._record_channels = record_channels

    # Refused to a process in an agent's pane: a reload can let a new sender in.
    @declare(Human(decides=True))
    async def config_reload(self, _: NoParams) -> dict[str, Any]:
        """Read the config file again and apply what can change live (channels, senders,
        agents); name what needs a restart."""
        try:
            return (await self.reload()).as_json()
        except ConfigError as exc:
            raise RpcError(
                CONFIG_INVALID, f"the config was not reloaded, nothing changed: {exc}"
            ) from None

    async def reload(self) -> Reloaded:
        """Apply the config file as it is now. Raises ``ConfigError`` (one line per problem)
        when it does not read: the running config is then left as it was."""
        new = self._load()
        done = Reloaded()
        changed_agents = [
            agent_id
            for agent_id, agent in new.agents.items()
            if self._cfg.agents.get(agent_id) != agent
        ]
        for key in changed_keys(self._cfg, new):
            if key in LIVE:
                done.applied.append(key)
            else:
                done.needs_restart.append(key)
        if "chat.channels" in done.applied:
            self._cfg.chat.channels = new.chat.channels
            await self._record_channels()
        if "chat.allowed_senders" in done.applied:
            self._cfg.chat.allowed_senders = new.chat.allowed_senders
        if "agents" in done.applied:
            self._cfg.agents = new.agents
            await self._register(changed_agents)
        if done.applied or done.needs_restart:
            log.info(
                "config reloaded: applied %s; needs a restart: %s",
                ", ".join(done.applied) or "nothing",
                ", ".join(done.needs_restart) or "nothing",
            )
        return done
