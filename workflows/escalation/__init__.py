"""Escalation ladders: a request nobody answers finds its human, rung by rung on durable timers
(the agent's chats, an SMS, a call), inside the workflow that waits for the answer.

- :mod:`.ladder`: climbing one ladder; an answer anywhere stops it at once.
- :mod:`.activities`: the rung's activity, declared by signature.
"""
