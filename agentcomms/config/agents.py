"""The agents' part of the configuration: each agent (`agents.ID`: a pane, or a process agent
started over ACP), the approvals and their never-list, the limits that bound an agent's mailbox.

Re-exported by :mod:`agentcomms.config.models`, where the whole schema is read from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr, field_validator, model_validator

from agentcomms.agents.never import rule_problem
from agentcomms.bridge.checks import no_server_at
from agentcomms.bridge.fields import InterruptKey, TmuxServer, TmuxTarget
from agentcomms.config.budget import Budget
from agentcomms.config.chat import ChatConfig
from agentcomms.config.section import Section
from agentcomms.config.voice import is_phone_approver
from agentcomms.escalation_models import QuietHours, Rung, check_ladder
from agentcomms.models import MAX_MESSAGE_CHARS

MaxPending = Annotated[int, Field(ge=1, le=10_000)]
MaxPendingBytes = Annotated[int, Field(ge=MAX_MESSAGE_CHARS * 4, le=1_000_000_000)]
MaxChars = Annotated[int, Field(ge=100, le=MAX_MESSAGE_CHARS)]


def _never_rule(rule: str) -> str:
    problem = rule_problem(rule)
    if problem is not None:
        raise ValueError(problem)
    return rule.strip()


NeverRule = Annotated[str, AfterValidator(_never_rule)]


class ApprovalsConfig(Section):
    """An agent's permission requests, answered from the terminal (`agentcomms approve`)."""

    timeout_s: float = Field(
        default=600,
        ge=5,
        le=86_400,
        description="how long a permission request waits for an answer through agentcomms",
    )
    on_timeout: Literal["terminal", "deny"] = Field(
        default="terminal",
        description="terminal: leave the agent's own dialog to whoever is at its pane; deny: "
        "deny with a message, so an unattended agent moves on",
    )
    never: list[NeverRule] = Field(
        default_factory=list,
        description="tool calls refused at once without asking anyone, in the agents' rule "
        "syntax, e.g. 'Bash(rm -rf *)' (for Gemini CLI Bash is its run_shell_command, and its "
        "own tool names work too); `agentcomms install` writes them into the agent's hooks",
    )


class AgentApprovals(Section):
    on_timeout: Literal["terminal", "deny"] | None = Field(
        default=None, description="overrides approvals.on_timeout for this agent"
    )
    never: list[NeverRule] = Field(
        default_factory=list, description="refused for this agent too, beside approvals.never"
    )
    remote: bool = Field(
        default=False,
        description="Gemini CLI only: its permission requests are asked through agentcomms "
        "(a policy rule skips its own dialog, its BeforeTool hook waits for your answer); "
        "`agentcomms install gemini --agent ID` writes both",
    )


# Checked as a whole: a ladder whose rungs are out of order is refused with the rung named.
Ladder = Annotated[list[Rung], AfterValidator(check_ladder)]


class AgentAcp(Section):
    """A process agent: an ACP agent agentcomms starts headless and drives over its stdio."""

    dir: Path = Field(description="the folder the agent works in (absolute)")
    command: list[str] | None = Field(
        default=None,
        min_length=1,
        description='the ACP agent\'s command and arguments, e.g. ["gemini", "--acp"]',
    )
    kind: Literal["claude-code", "codex", "gemini"] | None = Field(
        default=None,
        description="a known agent instead of a command (its pinned ACP adapter, installed with "
        "npm when missing)",
    )
    new_session_if_lost: bool = Field(
        default=True,
        description="start a new session when the kept one cannot be loaded after a restart; "
        "false: stay offline and say so",
    )

    @model_validator(mode="after")
    def _one_way_to_run(self) -> AgentAcp:
        if (self.command is None) == (self.kind is None):
            raise ValueError("give either command (any ACP agent) or kind (a known one)")
        if not self.dir.is_absolute():
            raise ValueError(f"dir: {self.dir} is not an absolute path")
        return self


class AgentConfig(Section):
    """An agent registered when agentcomms starts: a tmux pane (`target`) or a process agent
    agentcomms starts itself (`acp`)."""

    type: Literal["tmux", "process"] = Field(
        default="tmux",
        description="tmux: a pane a human set up; process: an ACP agent agentcomms starts "
        "(set by `acp` alone)",
    )
    # Checked with the bridge's own rules, so `config validate` catches what typing would refuse.
    target: TmuxTarget | None = Field(
        default=None, description="tmux target session:window.pane (a pane agent)"
    )
    acp: AgentAcp | None = Field(
        default=None, description="how to start a process agent over ACP (type process)"
    )
    socket: TmuxServer | None = Field(
        default=None,
        description="the pane's tmux server: a name as `tmux -L NAME` gives it, or its socket "
        "path as `tmux -S PATH`; null: the default server",
    )
    host: str | None = Field(default=None, description="host whose worker types into the pane")
    interrupt_key: InterruptKey = Field(
        default="C-c", description="C-a … C-z, M-a … M-z, Escape, Enter, Tab, F1 … F12"
    )
    submit_delay_ms: int = Field(default=150, ge=0, le=10_000)
    deliver: Literal["when-ready", "now"] = Field(
        default="when-ready",
        description="when-ready: type once the agent is at its prompt (its hooks and its pane "
        "say so); now: whenever its pane shows no dialog",
    )
    max_chars: MaxChars = Field(
        default=MAX_MESSAGE_CHARS,
        description="longest text typed into the pane; longer text is cut, visibly",
    )
    max_pending: MaxPending | None = Field(
        default=None, description="overrides mailbox.max_pending"
    )
    max_pending_bytes: MaxPendingBytes | None = Field(
        default=None, description="overrides mailbox.max_pending_bytes"
    )
    token: SecretStr | None = Field(default=None, description="bearer token for MCP over HTTP")
    approvals: AgentApprovals = AgentApprovals()
    approvers: list[str] | None = Field(
        default=None,
        description="who may answer this agent's approvals from a chat, as PROVIDER:SENDER "
        '(e.g. "telegram:456", "sms:+15551234567"; each must also be an allowed sender), and '
        'which phones hear and answer them: "phone:+15551234567" (a caller in '
        "voice.inbound.allowed_callers, or voice.phone.to_number for the ladder's call), "
        '"phone:local" (agentcomms phone). null: every allowed sender in a chat mapped to the '
        "agent, and every phone; []: the terminal alone",
    )

    mirror: Literal["replies", "all", "off"] = Field(
        default="replies",
        description="the last words of the agent's turns sent back to chat: replies: to the chat "
        "whose message started the turn; all: every turn, the others to the agent's chats; off",
    )

    @model_validator(mode="after")
    def _pane_or_process(self) -> AgentConfig:
        if self.acp is None and self.target is None:
            raise ValueError(
                "give `target` (the agent's tmux pane) or `acp` (how to start a process agent)"
            )
        if self.acp is not None and self.type == "tmux" and self.target is None:
            self.type = "process"  # `acp` alone says what the agent is
        if self.type == "process" and (self.acp is None or self.target is not None):
            raise ValueError("a process agent has `acp` (how to start it) and no `target`")
        if self.type == "tmux" and (self.target is None or self.acp is not None):
            raise ValueError("a pane agent has `target` (its tmux pane) and no `acp`")
        return self

    @field_validator("approvers")
    @classmethod
    def _approvers_are_senders(cls, value: list[str] | None) -> list[str] | None:
        known = ChatConfig.chat_provider_names()
        for approver in value or []:
            provider, sep, sender = approver.partition(":")
            if provider == "phone" and not is_phone_approver(approver):
                raise ValueError(
                    f"{approver!r} is not a phone: expected phone:NUMBER with the number as "
                    'E.164, e.g. "phone:+15551234567", or "phone:local" for agentcomms phone'
                )
            if provider != "phone" and (not sep or not sender.strip() or provider not in known):
                raise ValueError(
                    f"{approver!r} is not an approver: expected PROVIDER:SENDER with PROVIDER one "
                    f"of {', '.join(known)} and SENDER as in chat.allowed_senders, e.g. "
                    '"telegram:456" or "sms:+15551234567", or a phone, "phone:+15551234567"'
                )
        return value

    escalation: Ladder | None = Field(default=None, description="overrides escalation")
    quiet_hours: QuietHours | None = Field(default=None, description="overrides quiet_hours")
    never_sleep: bool = Field(
        default=False, description="quiet hours hold none of this agent's escalations"
    )
    budget: Budget | None = Field(default=None, description="replaces budget for this agent")


def servers_missing(agents: dict[str, AgentConfig], host: str) -> list[str]:
    """For each pane agent of this host whose named tmux server is not running, what to do: the
    agent is still registered, and its messages wait until the server and its pane exist."""
    return [
        f"agents.{agent_id}.socket: no tmux server is running at {agent.socket}, so pane "
        f"{agent.target} cannot be reached; its messages wait until it exists. Start the "
        "server (`tmux -L NAME new-session` or `tmux -S PATH new-session`), or fix the name"
        for agent_id, agent in agents.items()
        if agent.socket is not None
        and agent.host in (None, host)
        and agent.type == "tmux"
        and no_server_at(agent.socket)
    ]
