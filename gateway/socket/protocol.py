"""The socket protocol: one JSON object per line, JSON-RPC-like ids, methods and error codes."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, StrictInt, StrictStr, ValidationError

from agentcomms.errors import RpcError
from agentcomms.ids import check_agent_id

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
NOT_FOUND = -32604
MAILBOX_FULL = -32605  # nothing was queued: the agent's limits say so
NOT_YOURS = -32606  # the request acts for an agent, and what it asks for is not that agent's
BUDGET_SPENT = -32607  # the agent spent its budget for the hour (calls, texts, ladders)
CONFIG_INVALID = -32608  # the config file does not read: the running one is kept

# A request line longer than this is answered with an error and skipped, not buffered.
MAX_LINE_BYTES = 1024 * 1024


class Request(BaseModel):
    # Strict: `true` is no id (it would come back as 1, and match no request of the client's).
    id: StrictInt | StrictStr | None = None
    method: str
    params: dict[str, Any] = {}
    # The agent this request acts for (the MCP server names the agent a bearer token belongs
    # to): the gateway then serves only what is that agent's own (gateway.socket.confine).
    caller: Annotated[str, AfterValidator(check_agent_id)] | None = None


def load_request(line: bytes) -> dict[str, Any]:
    """The JSON object a line holds, or the error reply's reason."""
    try:
        data = json.loads(line)
    # ValueError: not JSON, not UTF-8, or a number of thousands of digits; RecursionError:
    # arrays nested thousands deep, which a line within the limit can hold.
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise RpcError(PARSE_ERROR, f"not valid JSON: {reason}") from None
    if not isinstance(data, dict):
        raise RpcError(INVALID_REQUEST, "a request is a JSON object {id, method, params}")
    return data


def request_id(data: dict[str, Any]) -> int | str | None:
    """The request's id when it is a usable one, so that an error about the rest of the request
    still reaches the request that asked (a client waits for the reply carrying its id)."""
    value = data.get("id")
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def parse_request(data: dict[str, Any]) -> Request:
    if data.get("params") is None:
        data.pop("params", None)
    try:
        return Request.model_validate(data)
    except ValidationError as exc:
        raise RpcError(INVALID_REQUEST, describe_validation(exc)) from None


def describe_validation(exc: ValidationError) -> str:
    """One line per problem, naming the field: `limit: Input should be less than or equal to 1000`."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "params"
        # A validator's own sentence needs no "Value error, " before it.
        parts.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def result_line(request_id: Any, result: Any) -> bytes:
    return json.dumps({"id": request_id, "result": result}, default=str).encode() + b"\n"


def error_line(request_id: Any, code: int, message: str) -> bytes:
    body = {"id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(body).encode() + b"\n"
