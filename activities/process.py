"""The mailbox's doors to a process agent: a prompt instead of typing, a cancel instead of a key.

:class:`activities.delivery.PaneActivities` checks every tag first (the registration's, each
event's), exactly as for a pane, then hands a process agent's registration here. What is sent
is derived from what was checked: the same header and body a pane would show, each message
capped as a pane caps it, several that waited as one prompt, oldest first. Nothing is typed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agentcomms import errors
from agentcomms.acp.host import ProcessAgents
from agentcomms.acp.pictures import Picture
from agentcomms.acp.runner import NotReady, ProcessAgent, Spec, Unavailable
from agentcomms.agents.state import NEEDLE_CHARS
from agentcomms.bridge import sanitize
from agentcomms.framing import framed, pane_text
from agentcomms.models import DeliveryOutcome, Event, Registration


class ProcessDoor:
    """This host's process agents, as the mailbox's activities reach them."""

    def __init__(self, agents: ProcessAgents, host: str) -> None:
        self.agents = agents
        self._host = host
        self._starting: set[asyncio.Task[None]] = set()

    async def deliver(
        self, agent_id: str, registration: Registration, events: list[Event]
    ) -> list[DeliveryOutcome]:
        """Prompt the checked messages as one prompt; those prompted before are not again."""
        agent = await self._agent(agent_id, registration)
        fresh = [e for e in events if not agent.prompted(e.id)]
        outcomes = {e.id: DeliveryOutcome(event_id=e.id, typed=False) for e in events}
        texts: list[str] = []
        pictures: list[Picture] = []
        for event in fresh:
            text, framing = framed(event)
            clean = sanitize(text, max_chars=registration.max_chars + framing)
            outcomes[event.id] = DeliveryOutcome(
                event_id=event.id,
                typed=bool(clean.text),
                truncated=clean.truncated,
                chars=len(clean.text),
                removed=clean.removed,
            )
            if clean.text:
                texts.append(clean.text)
                pictures += _pictures(event)
        if texts:
            # What the mailbox looks for in the report of the prompt, as it looks for a pane's.
            needles = "\n".join(" ".join(pane_text(e).split())[:NEEDLE_CHARS] for e in fresh)
            try:
                await agent.submit(
                    [e.id for e in fresh], "\n".join(texts), needles, pictures=pictures
                )
            except NotReady as exc:
                raise ApplicationError(
                    str(exc),
                    exc.state,
                    type=errors.PANE_NOT_READY,
                    non_retryable=True,
                    category=ApplicationErrorCategory.BENIGN,
                ) from exc
            except Unavailable as exc:
                activity.logger.info("%s: its messages wait until it runs", exc)
                raise ApplicationError(
                    f"process agent {agent_id} is not running: {exc}",
                    type=errors.PANE_NOT_FOUND,
                    category=ApplicationErrorCategory.BENIGN,
                ) from exc
            activity.logger.info("prompted %s with %d messages", agent_id, len(texts))
        return [outcomes[e.id] for e in events]

    async def interrupt(
        self, agent_id: str, registration: Registration, *, new_session: bool = False
    ) -> bool:
        """Cancel the agent's turn (ACP's `session/cancel`); False when no turn runs. With
        `new_session` (a chat's /clear), the agent then goes on in a new session."""
        agent = await self._agent(agent_id, registration)
        if not new_session:
            return await agent.cancel()
        try:
            await agent.new_session()
        except Unavailable as exc:
            raise ApplicationError(
                f"process agent {agent_id}: {exc}",
                type=errors.PANE_NOT_FOUND,
                category=ApplicationErrorCategory.BENIGN,
            ) from exc
        activity.logger.info("%s goes on in a new session %s", agent_id, agent.session_id)
        return True

    def registered(self, agent_id: str, registration: Registration) -> None:
        """A process agent registered on this host starts now, not at its first message: its
        state is then known (ready) before anyone writes to it."""
        if registration.host != self._host:
            return
        task = asyncio.create_task(self._start(agent_id, registration))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def unregistered(self, agent_id: str) -> None:
        """The agent was stopped or unregistered: its process ends, its session is kept."""
        if await self.agents.stop(agent_id):
            activity.logger.info("stopped process agent %s", agent_id)

    async def _start(self, agent_id: str, registration: Registration) -> None:
        try:
            agent = await self._agent(agent_id, registration)
            await agent.ensure_started()
        except (Unavailable, ApplicationError) as exc:
            # Said in its state (offline, with the reason); the first message tries again.
            activity.logger.warning("could not start process agent %s: %s", agent_id, exc)

    async def _agent(self, agent_id: str, registration: Registration) -> ProcessAgent:
        return await self.agents.agent(agent_id, spec_of(registration))


def _pictures(event: Event) -> list[Picture]:
    """The image a (checked) message carries, saved in the agent's folder by the gateway."""
    attachment = event.payload.get("attachment")
    if not isinstance(attachment, dict):
        return []
    path, mime_type = attachment.get("path"), attachment.get("content_type")
    if not isinstance(path, str) or not isinstance(mime_type, str):
        return []
    return [Picture(Path(path), mime_type)] if mime_type.startswith("image/") else []


def spec_of(registration: Registration) -> Spec:
    """How to run the agent a (checked) registration names; a registration that names no
    command or no folder can never work."""
    if not registration.command or not registration.cwd:
        raise ApplicationError(
            "the process agent's registration names no command or no folder: start it again "
            "with `agentcomms agents start ID --dir DIR --acp -- COMMAND`",
            type=errors.INVALID_TARGET,
            non_retryable=True,
        )
    return Spec(
        command=tuple(registration.command),
        cwd=Path(registration.cwd),
        new_session_if_lost=registration.new_session_if_lost,
    )
