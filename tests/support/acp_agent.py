"""A small scripted ACP agent: JSON-RPC over its stdio, told what to do by the prompt it gets.

Run as ``python -m tests.support.acp_agent`` (or this file). Each line of a prompt with ``acp:``
in it is a step of the turn (what follows it), in order; a prompt with none is answered ``heard: <its
last line>``. The steps:

- ``acp:say TEXT``: the reply, streamed in chunks of a few words;
- ``acp:tool TITLE``: a tool call that runs and completes;
- ``acp:ask N [TITLE]``: ``session/request_permission`` with N options (allow once, allow always,
  reject once, reject always, then more), then ``chose OPTION_ID`` (or ``cancelled``) as reply;
- ``acp:hang``: the turn runs until ``session/cancel`` ends it (stop reason ``cancelled``);
- ``acp:die``: the process exits mid-turn, with code 3;
- ``acp:spawn COMMAND``: ``sh -c COMMAND`` started and left running beside the turn, as a tool
  leaves a command in the background; once it ends, its exit code and output are recorded.

With ``--images`` it says in ``initialize`` that it takes image blocks, and records each one a
prompt carries (its mimeType and base64 data).

It keeps its sessions in ``$ACP_AGENT_STATE`` (a folder; ``.acp-agent-sessions`` in the folder it
runs in), so a process started again can ``session/load`` one, and appends what it got (each
prompt's text, each cancel, each answer to a permission request) as JSON lines to
``$ACP_AGENT_LOG`` (``.acp-agent.jsonl``) for the test to read (:func:`log_of`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

OPTION_KINDS = ["allow_once", "allow_always", "reject_once", "reject_always"]


class ScriptedAgent:
    def __init__(self, state: Path | None, log: Path | None, *, images: bool = False) -> None:
        self._images = images
        self._state = state
        self._log = log
        self._out = sys.stdout.buffer
        self._next_id = 0
        self._answers: dict[int, asyncio.Future[Any]] = {}
        self._cancelled: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def record(self, **entry: Any) -> None:
        if self._log is not None:
            with self._log.open("a") as f:
                f.write(json.dumps({"pid": os.getpid(), **entry}) + "\n")

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self._out.flush()

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        self.send(
            {"method": "session/update", "params": {"sessionId": session_id, "update": update}}
        )

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._answers[self._next_id] = answer
        self.send({"id": self._next_id, "method": method, "params": params})
        return await answer

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        self.record(started=True)
        while line := await reader.readline():
            message = json.loads(line)
            if "method" not in message:
                answer = self._answers.pop(message["id"], None)
                if answer is not None and not answer.done():
                    answer.set_result(message.get("result"))
                continue
            task = asyncio.create_task(self.handle(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self.record(stdin_closed=True)

    async def handle(self, message: dict[str, Any]) -> None:
        method, params = message["method"], message.get("params") or {}
        if method == "session/cancel":
            self.record(cancel=params.get("sessionId"))
            if (event := self._cancelled.get(str(params.get("sessionId")))) is not None:
                event.set()
            return
        try:
            result = await self.answer(method, params)
        except LookupError as exc:
            self.send({"id": message["id"], "error": {"code": -32002, "message": str(exc)}})
            return
        self.send({"id": message["id"], "result": result})

    async def answer(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            return {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": True,
                    "promptCapabilities": {"image": self._images},
                },
                "agentInfo": {"name": "scripted-acp-agent", "version": "1"},
                "authMethods": [],
            }
        if method == "session/new":
            session_id = f"sess-{uuid.uuid4().hex[:12]}"
            self._save(session_id, [])
            self.record(new_session=session_id, cwd=params.get("cwd"))
            return {"sessionId": session_id}
        if method == "session/load":
            session_id = params["sessionId"]
            history = self._load(session_id)
            for text in history:  # an agent replays the session it loads
                self.update(
                    session_id,
                    {
                        "sessionUpdate": "user_message_chunk",
                        "content": {"type": "text", "text": text},
                    },
                )
            self.record(load_session=session_id)
            return None
        if method == "session/prompt":
            return await self.turn(params["sessionId"], params.get("prompt") or [])
        raise LookupError(f"method not found: {method}")

    async def turn(self, session_id: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        images = [
            {"mimeType": b.get("mimeType"), "data": b.get("data")}
            for b in blocks
            if b.get("type") == "image"
        ]
        self.record(prompt=text, session=session_id, **({"images": images} if images else {}))
        self._save(session_id, [*self._load(session_id), text])
        cancelled = self._cancelled[session_id] = asyncio.Event()
        # A step may follow the header agentcomms puts before a message, or its gutter.
        steps = [line[line.index("acp:") + 4 :] for line in text.splitlines() if "acp:" in line]
        if not steps:
            self.say(session_id, f"heard: {text.splitlines()[-1] if text else ''}")
        for step in steps:
            verb, _, arg = step.partition(" ")
            if verb == "say":
                self.say(session_id, arg)
            elif verb == "tool":
                self.tool(session_id, arg or "a tool")
            elif verb == "ask":
                count, _, title = arg.partition(" ")
                chosen = await self.ask_permission(session_id, int(count), title or "touch x")
                if chosen is None:
                    return {"stopReason": "cancelled"}
                self.say(session_id, f"chose {chosen}")
            elif verb == "hang":
                await cancelled.wait()
                return {"stopReason": "cancelled"}
            elif verb == "spawn":
                spawned = asyncio.create_task(self.spawn(arg))
                self._tasks.add(spawned)
                spawned.add_done_callback(self._tasks.discard)
            elif verb == "die":
                self.record(dying=True)
                os._exit(3)
        return {"stopReason": "end_turn"}

    async def spawn(self, command: str) -> None:
        ran = await asyncio.create_subprocess_shell(
            command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await ran.communicate()
        self.record(ran=command, code=ran.returncode, out=out.decode(), err=err.decode())

    def say(self, session_id: str, text: str) -> None:
        words = text.split(" ")
        for i in range(0, len(words), 3):
            chunk = " ".join(words[i : i + 3]) + (" " if i + 3 < len(words) else "")
            self.update(
                session_id,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": chunk},
                },
            )

    def tool(self, session_id: str, title: str) -> str:
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        self.update(
            session_id,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": title,
                "kind": "execute",
                "status": "pending",
                "rawInput": {"command": title},
            },
        )
        self.update(
            session_id,
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed"},
        )
        return call_id

    async def ask_permission(self, session_id: str, count: int, title: str) -> str | None:
        options = [
            {
                "optionId": f"opt-{i}",
                "name": f"option {i}",
                "kind": OPTION_KINDS[i] if i < len(OPTION_KINDS) else "reject_once",
            }
            for i in range(count)
        ]
        tool_call = {
            "toolCallId": f"call-{uuid.uuid4().hex[:8]}",
            "title": title,
            "kind": "execute",
            "status": "pending",
            "rawInput": {"command": title},
        }
        self.update(session_id, {"sessionUpdate": "tool_call", **tool_call})
        # The system-wide monotonic clock: a bench times the request to its buttons in a chat.
        self.record(asking=title, at_ns=time.monotonic_ns())
        result = await self.ask(
            "session/request_permission",
            {"sessionId": session_id, "toolCall": tool_call, "options": options},
        )
        outcome = (result or {}).get("outcome") or {}
        chosen = outcome.get("optionId") if outcome.get("outcome") == "selected" else None
        self.record(permission=title, chosen=chosen)
        return chosen

    def _save(self, session_id: str, history: list[str]) -> None:
        if self._state is not None:
            self._state.mkdir(parents=True, exist_ok=True)
            (self._state / f"{session_id}.json").write_text(json.dumps(history))

    def _load(self, session_id: str) -> list[str]:
        path = self._state / f"{session_id}.json" if self._state is not None else None
        if path is None or not path.exists():
            raise LookupError(f"no session {session_id}")
        history: list[str] = json.loads(path.read_text())
        return history


def log_of(folder: Path) -> list[dict[str, Any]]:
    """What the agent started in `folder` got, in order."""
    path = folder / ".acp-agent.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def main() -> None:
    # By default beside the agent's work, in the folder it was started in.
    state = Path(os.environ.get("ACP_AGENT_STATE") or ".acp-agent-sessions")
    log = Path(os.environ.get("ACP_AGENT_LOG") or ".acp-agent.jsonl")
    agent = ScriptedAgent(state.absolute(), log.absolute(), images="--images" in sys.argv[1:])
    asyncio.run(agent.run())


if __name__ == "__main__":
    main()
