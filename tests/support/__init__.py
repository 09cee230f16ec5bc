"""What the tests share, one module per area; a test module imports from here, never from
another test module. ``tests/conftest.py`` registers the modules that define fixtures.

- ``temporal``: the session's Temporal dev servers and the time-skipping test server.
- ``databases``: real, empty databases (SQLite, and PostgreSQL when the run has one).
- ``home``: a private agentcomms home and config files in it.
- ``tmux``: a private tmux server per test and recorder panes, whose typed bytes land in a file.
- ``waiting``: ``eventually`` and ``typed``, for what a process or pane does a moment later.
- ``stack``: a whole stack in the test process (worker, gateway socket, store), and
  registering an agent on a pane.
- ``chat``: the chat providers' fakes as fixtures, wired into a stack's configuration.
- ``voice``: voice notes, grammars for the local recognizer, Deepgram's fake.
- ``phone``: the human's side of a call on the local phone.
- ``mcp``: the MCP tools, called in memory or over stdio.
- ``cli``: the `agentcomms` command as a person runs it, and `up` as a process.
- ``hosts``: a worker process for another host of the deployment.
- ``mailbox``: replaying a mailbox's histories.
- ``events``: made-up events recorded straight into a projection.
- ``attacker``: a worker and workflow of an attacker's own, scheduling our activities by name.
- ``agents``: the real agent CLIs (Claude Code, Codex) in tmux panes, talking to scripted models.
- ``tls_proxy``: a TLS endpoint, with its certificates, in front of the dev server.
- ``raw_http``: HTTP written by hand, for bodies that lie about their length or never end.

The fakes of the providers' own APIs are in ``tests/fakes``.
"""
