"""Activities more than one workflow runs, declared once by their signatures; each workflow
package's ``activities`` module names them among its own, so a reader finds there everything its
workflow runs.

``record_projection`` is run by the mailbox (its settled messages, its agent row) and by the
outbox (a sent or failed message's row); the worker registers
:class:`activities.projection.ProjectionActivities` under the same name.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ActivityError, ApplicationError

from agentcomms.models import ProjectionUpdate


def failure_cause(exc: ActivityError | ApplicationError) -> BaseException | None:
    """Why a local activity failed: its failure arrives bare (the activity's own error) or
    wrapped in an ActivityError (a timeout, a cancel)."""
    return exc.cause if isinstance(exc, ActivityError) else exc


def failure_reason(exc: ActivityError | ApplicationError) -> str:
    """Why a local activity failed, as a sentence: the activity's own message (its kind is
    elsewhere, in the error's type), else the timeout's or cancel's."""
    cause = failure_cause(exc)
    return cause.message if isinstance(cause, ApplicationError) else str(cause or exc)


def declared() -> NotImplementedError:
    """What a declaration raises if it ever runs: the worker registers the implementation."""
    return NotImplementedError("a declaration: the worker registers its implementation")


@activity.defn(name="record_projection")
async def record_projection(update: ProjectionUpdate) -> None:
    """Write settled events, the agent row, or waiting texts to the projection."""
    raise declared()
