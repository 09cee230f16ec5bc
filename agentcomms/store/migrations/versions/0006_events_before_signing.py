"""Messages that were waiting when the deployment began to sign: typed after the upgrade.

An agentcomms that did not sign left its waiting messages without a tag, and the pane's host
refuses untagged messages. The projection is the one witness a forger cannot write to, but the
mailbox itself writes what it holds there (waiting texts before continuing-as-new, refusals as it
settles them), forged ones included. So the witness is taken here, once, at the upgrade: the
untagged messages still waiting that the projection held before its first tagged one. After
this revision nothing is ever added to the list.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events_before_signing",
        sa.Column("id", sa.String(64), primary_key=True),
    )
    # Before the first tagged row: a deployment that already signed for a while may hold
    # untagged rows the mailbox wrote since (a forged message it handed over), never older.
    op.execute(
        """
        INSERT INTO events_before_signing (id)
        SELECT id FROM events
        WHERE signature IS NULL
          AND status = 'new'
          AND seq < COALESCE(
              (SELECT MIN(seq) FROM events WHERE signature IS NOT NULL),
              (SELECT MAX(seq) FROM events) + 1
          )
        """
    )


def downgrade() -> None:
    op.drop_table("events_before_signing")
