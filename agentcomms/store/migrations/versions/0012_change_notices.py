"""Change notices on PostgreSQL: each event inserted, each event's status changed and each agent
row written is announced (``NOTIFY agentcomms_changes``) as its transaction commits, in commit
order, so a live view hears it instead of reading the tables again and again, and never misses
a row committed after one with a higher seq. SQLite has no notices between processes: nothing
changes there.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels = None
depends_on = None

# The payloads: "e<seq>" an event inserted, "s<seq>" an event's status changed, "a<id>" an agent
# row written. Spelled again in agentcomms/store/changes.py, which reads them.
_STATEMENTS = (
    """
CREATE OR REPLACE FUNCTION agentcomms_event_notice() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('agentcomms_changes', 'e' || NEW.seq);
    ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
        PERFORM pg_notify('agentcomms_changes', 's' || NEW.seq);
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql
""",
    """
CREATE OR REPLACE FUNCTION agentcomms_agent_notice() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('agentcomms_changes', 'a' || NEW.id);
    RETURN NULL;
END $$ LANGUAGE plpgsql
""",
    """
CREATE TRIGGER events_notice AFTER INSERT OR UPDATE OF status ON events
    FOR EACH ROW EXECUTE FUNCTION agentcomms_event_notice()
""",
    """
CREATE TRIGGER agents_notice AFTER INSERT OR UPDATE ON agents
    FOR EACH ROW EXECUTE FUNCTION agentcomms_agent_notice()
""",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _STATEMENTS:  # one at a time: asyncpg prepares each as one statement
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS agents_notice ON agents")
    op.execute("DROP TRIGGER IF EXISTS events_notice ON events")
    op.execute("DROP FUNCTION IF EXISTS agentcomms_agent_notice()")
    op.execute("DROP FUNCTION IF EXISTS agentcomms_event_notice()")
