"""An agent's messages to one chat, in order: one workflow per (agent, chat)
(``outbox-<agent_id>-<channel_id>``).

- :mod:`.models`: what it is started with, carries through continue-as-new and answers.
- :mod:`.activities`: the activities it runs, declared by signature so it calls them by reference.
- :mod:`.workflow`: the workflow, its handlers and its send loop.
- :mod:`.client`: how the gateway and the mailbox's receipts queue a send and wait for it.

Nothing is imported here: the workflow's modules stay free of the client's I/O.
"""
