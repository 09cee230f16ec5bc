"""An agent's mailbox: one long-running workflow per agent (``agent-<agent_id>``).

- :mod:`.models`: what it is started with, carries through continue-as-new and answers.
- :mod:`.queue`: the waiting messages in plain Python (order, interrupts first, de-duplication,
  what goes in one batch, limits), with unit tests that need no Temporal.
- :mod:`.projection`: what the mailbox still owes the projection, and the rule for an outage;
  :mod:`.writer` writes it beside the typing.
- :mod:`.activities`: the activities it runs, declared by signature so it calls them by reference.
- :mod:`.workflow`: the workflow, its handlers and its delivery loop.
- :mod:`.client`: how everyone else starts, signals and asks it.

Nothing is imported here: the workflow's modules stay free of the client's I/O.
"""
