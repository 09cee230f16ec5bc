"""The voice tools: phone your human, talk, listen, hang up. Thin calls to the gateway, whose
call workflows do the rest; with no phone service configured the call rings `agentcomms phone`.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from fastmcp import FastMCP
from pydantic import Field
from typing_extensions import TypedDict

from gateway.socket.results import Turn
from mcp_server.identity import calling_agent
from mcp_server.link import GatewayLink
from mcp_server.params import MessageText

CallId = Annotated[
    str,
    Field(
        pattern=r"^c_[0-9A-Z]{26}$",
        description="The call, as initiate_call or list_active_calls returned it (c_…).",
    ),
]
Wait = Annotated[
    bool,
    Field(
        description="true: wait for the human's answer and return it. false: return the "
        "call_id at once; the answer arrives later as a message (check_messages, and typed "
        "into your pane), so a long call never times out this tool."
    ),
]
RequestId = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=200,
        description="Optional: the same request id sent again (a retry) places no second call.",
    ),
]
Goodbye = Annotated[
    str | None,
    Field(max_length=10_000, description="Optional last words, played before hanging up."),
]


class InitiateResult(TypedDict):
    call_id: str
    response: str
    status: str  # answered | timed-out | no-answer | declined | busy | voicemail | ringing
    timed_out: bool
    note: NotRequired[str | None]


class ContinueResult(TypedDict):
    response: str
    status: str
    timed_out: bool
    note: NotRequired[str | None]


class SpeakResult(TypedDict):
    success: bool


class EndResult(TypedDict):
    duration_seconds: float
    status: str


class ActiveCall(TypedDict):
    call_id: str
    agent_id: str
    status: str
    phone_number: str | None
    started_at: str


class ActiveCallsResult(TypedDict):
    calls: list[ActiveCall]


def add_voice_tools(mcp: FastMCP, gateway: GatewayLink, *, default_agent: str) -> None:
    @mcp.tool
    async def initiate_call(
        message: MessageText, wait: Wait = True, request_id: RequestId = None
    ) -> InitiateResult:
        """Phone your human and say `message`; return what they answer.

        status says how it went: answered, timed-out (they said nothing in time; response holds
        what was heard so far), or no-answer / declined / busy / voicemail (the message was left
        another way, note says where). busy is also the answer, at once, when your human's
        phone is on another call: nothing was placed; call again later or send a message. Keep
        the call_id for continue_call, speak_to_user and end_call; end the call with end_call
        when done.
        """
        me = calling_agent(None, default_agent)
        params: dict[str, Any] = {"agent_id": me, "message": message, "wait": wait}
        if request_id:
            params["request_id"] = request_id
        result = await gateway.call("call", **params)
        if not wait and result["status"] != "busy":  # busy: nothing was placed, note says why
            return {
                "call_id": result["call_id"],
                "response": "",
                "status": "ringing",
                "timed_out": False,
                "note": "the answer will arrive as a message (check_messages)",
            }
        return {
            "call_id": result["call_id"],
            "response": result["response"],
            "status": result["status"],
            "timed_out": result["timed_out"],
            "note": result.get("note"),
        }

    @mcp.tool
    async def continue_call(call_id: CallId, message: MessageText) -> ContinueResult:
        """Say `message` on a call in progress and return the human's answer."""
        result = await _turn(gateway, default_agent, call_id, message, listen=True)
        return {
            "response": result["response"],
            "status": result["status"],
            "timed_out": result["timed_out"],
            "note": result.get("note"),
        }

    @mcp.tool
    async def speak_to_user(call_id: CallId, message: MessageText) -> SpeakResult:
        """Say `message` on a call in progress without waiting for an answer."""
        result = await _turn(gateway, default_agent, call_id, message, listen=False)
        return {"success": bool(result["success"])}

    @mcp.tool
    async def end_call(call_id: CallId, message: Goodbye = None) -> EndResult:
        """Hang up (after saying `message`, when given); return how long the call lasted."""
        me = calling_agent(None, default_agent)
        params: dict[str, Any] = {"call_id": call_id, "agent_id": me}
        if message:
            params["message"] = message
        result = await gateway.call("call_end", **params)
        return {"duration_seconds": result["duration_seconds"], "status": result["status"]}

    @mcp.tool
    async def list_active_calls() -> ActiveCallsResult:
        """Your calls that are ringing or in progress."""
        me = calling_agent(None, default_agent)
        result = await gateway.call("calls", agent_id=me, active=True)
        return {
            "calls": [
                {
                    "call_id": c["id"],
                    "agent_id": c["agent_id"],
                    "status": c["status"],
                    "phone_number": c["phone_number"],
                    "started_at": c["started_at"],
                }
                for c in result["calls"]
            ]
        }


async def _turn(
    gateway: GatewayLink, default_agent: str, call_id: str, message: str, *, listen: bool
) -> Turn:
    me = calling_agent(None, default_agent)
    return await gateway.call(
        "call_say", call_id=call_id, message=message, listen=listen, agent_id=me
    )
