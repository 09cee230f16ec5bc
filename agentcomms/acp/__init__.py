"""The process agent: an ACP agent agentcomms starts headless and drives over its stdio.

:mod:`.rpc` is the JSON-RPC wire, :mod:`.client` one agent process (start, session, prompt,
permission requests, cancel), :mod:`.runner` what a host's worker keeps of each process agent
(its session id, its state, starting it again after a crash).
"""
