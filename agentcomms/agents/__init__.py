"""The agent's side: what state an agent is in, learnt from its own hooks.

:mod:`.state` is the state machine (plain Python, carried by the mailbox); :mod:`.hook` is the
command an agent's hooks run (standard library only: it runs around every tool call). This
package's ``__init__`` imports nothing, so the hook starts fast.
"""
