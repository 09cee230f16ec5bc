"""One permission request of an agent, waiting for its human: one workflow per request
(``approval-<id>``).

- :mod:`.models`: what it is started with, asked and answers.
- :mod:`.workflow`: the workflow: the first answer wins, then the timeout.
- :mod:`.client`: how the gateway opens one, answers it, waits for it and lists the open ones.

It runs no activities: it only keeps the request and its answer. Whoever acts on the answer (the
gateway, for the agent's hook) checks the deployment's tags on both first.
"""
