"""The activities an outbox runs, declared by their signatures so the workflow calls them by
reference without importing the code that talks to chat providers or writes the database.

``send_chat`` runs as a retried activity on the shared task queue; ``record_projection`` (the
mailbox's too, declared once in :mod:`workflows.activities`) as a local activity beside it. The
worker registers :class:`activities.chat.ChatActivities` and
:class:`activities.projection.ProjectionActivities` under the same names;
``tests/test_activity_declarations.py`` checks that each declaration has an implementation with
the same name, input and result.
"""

from __future__ import annotations

from temporalio import activity

from agentcomms.outbox_models import ChatSent, SendItem
from workflows.activities import declared

# Re-exported: the outbox runs it as activities.record_projection like its own.
from workflows.activities import record_projection as record_projection


@activity.defn(name="send_chat")
async def send_chat(req: SendItem) -> ChatSent:
    """Send a signed item of the outbox: a text, or a receipt for the human's message."""
    raise declared()
