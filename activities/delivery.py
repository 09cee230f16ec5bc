"""Typing into an agent's pane and interrupting it, as Temporal activities.

The agent workflow runs these as local activities on the pane's host: they take milliseconds plus
the submit delay, so they do not heartbeat. Errors become ``ApplicationError`` types the workflow
branches on (names in :mod:`agentcomms.errors`): a missing pane and a tmux hiccup are retryable
(the pane may come back; the workflow decides how long to wait), a target or key that can never
work is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcomms import errors
from agentcomms.bridge import InvalidTarget, PaneNotFound, TmuxError, adapter_for
from agentcomms.models import DeliverRequest, DeliveryOutcome, InterruptRequest

# Every agent is a tmux pane today; the request models will name the kind when a second one exists.
_ENDPOINT_KIND = "tmux"


@activity.defn
async def deliver_to_pane(req: DeliverRequest) -> DeliveryOutcome:
    """Type one event's text into its pane and submit it, at most once per event id."""
    with _as_application_errors():
        outcome = await adapter_for(_ENDPOINT_KIND).deliver(req)
    activity.logger.info(
        "delivered %s to %s: typed=%s chars=%d truncated=%s",
        req.event_id,
        req.pane.target,
        outcome.typed,
        outcome.chars,
        outcome.truncated,
    )
    return outcome


async def deliver_batch_to_pane(reqs: list[DeliverRequest]) -> list[DeliveryOutcome]:
    """Type several events' texts into one pane, in order; the outcomes of the first of them
    (at least one: a failure there is raised)."""
    with _as_application_errors():
        outcomes = await adapter_for(_ENDPOINT_KIND).deliver_batch(reqs)
    activity.logger.info(
        "delivered %d of %d to %s: typed %d, found typed %d",
        len(outcomes),
        len(reqs),
        reqs[0].pane.target,
        sum(o.typed for o in outcomes),
        sum(not o.typed for o in outcomes),
    )
    return outcomes


@activity.defn
async def interrupt_pane(req: InterruptRequest) -> bool:
    """Press the agent's interrupt key; False when this event's key was already pressed."""
    with _as_application_errors():
        return await adapter_for(_ENDPOINT_KIND).interrupt(req)


@contextmanager
def _as_application_errors() -> Iterator[None]:
    """Translate bridge errors into the ApplicationError types the workflow branches on."""
    try:
        yield
    except PaneNotFound as exc:
        raise ApplicationError(str(exc), type=errors.PANE_NOT_FOUND) from exc
    except InvalidTarget as exc:
        raise ApplicationError(str(exc), type=errors.INVALID_TARGET, non_retryable=True) from exc
    except TmuxError as exc:
        raise ApplicationError(str(exc), type=errors.TMUX_FAILED) from exc
