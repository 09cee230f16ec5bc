"""The process agent: an ACP agent agentcomms starts headless and drives over its stdio.

:mod:`.rpc` is the JSON-RPC wire, :mod:`.client` one agent process (start, session, prompt,
permission requests, cancel), :mod:`.runner` what a host's worker keeps of each process agent
(its session id, its state, starting it again after a crash), :mod:`.host` all of a host's,
:mod:`.asking` what the gateway hears of them (permission requests as approvals, turns for the
mirror), :mod:`.kinds` the known agents and their pinned ACP adapters.
"""
