"""`agentcomms setup`: the real CLI, answers on stdin, against the Telegram and Discord stand-ins
(their real APIs, driven by the real SDKs). What it wrote is read back from the config; what the
provider got is read from the stand-in."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from agentcomms.config import load_config
from agentcomms.config.editing import edit_config, referenced_variable
from agentcomms.errors import ConfigError
from tests.fakes.discord import FakeDiscord
from tests.fakes.serve import free_port
from tests.fakes.telegram import FakeTelegram
from tests.support.chat import CHAT, DISCORD_ALICE
from tests.support.cli import AGENTCOMMS, env_for
from tests.support.home import mode, write_config
from tests.support.waiting import eventually

STRANGER = 999


class Run:
    """`agentcomms setup …` running, its answers given on stdin at once."""

    def __init__(self, home: Path, *args: str, answers: str = "", **env: str) -> None:
        self.home = home
        self.args = args
        self.answers = answers
        self.env = {k: v for k, v in env_for(home).items() if not k.endswith("_BOT_TOKEN")} | env
        self._task: asyncio.Task[tuple[bytes, bytes]] | None = None
        self.code: int | None = None

    async def start(self) -> Run:
        proc = await asyncio.create_subprocess_exec(
            AGENTCOMMS,
            "setup",
            *self.args,
            env=self.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        self._proc = proc
        self._task = asyncio.create_task(proc.communicate(self.answers.encode()))
        return self

    async def finished(self) -> str:
        """Everything it printed, stdout then stderr."""
        assert self._task is not None
        out, err = await asyncio.wait_for(self._task, 60)
        self.code = self._proc.returncode
        return out.decode() + err.decode()

    @property
    def config_path(self) -> Path:
        return self.home / "config.json"

    def written(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.config_path.read_text())
        return data


async def test_telegram_guided_from_nothing_admits_only_whom_the_human_confirms(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    # Written before setup runs: Telegram keeps a bot's messages until they are read.
    telegram.human_says(STRANGER, "let me in", first_name="Mallory")
    telegram.human_says(CHAT, "hello bot", first_name="Alice")
    answers = f"telegram\n{telegram.token}\nbackend\nn\ny\n"
    run = await Run(tmp_path / "home", "--base-url", telegram.base_url, answers=answers).start()

    await eventually(lambda: telegram.texts_to(CHAT))  # the test message, after Alice is admitted
    telegram.human_says(STRANGER, "me too?", first_name="Mallory")
    telegram.human_says(CHAT, "reply from my phone", first_name="Alice")
    printed = await run.finished()

    assert run.code == 0, printed
    assert telegram.token not in printed
    assert "Mallory (sender 999) wrote" in printed and "Not admitted" in printed
    assert "Reply seen from Alice: 'reply from my phone'" in printed
    cfg = load_config(run.config_path)
    assert mode(run.config_path) == 0o600
    assert cfg.chat.telegram.enabled and cfg.chat.telegram.base_url == telegram.base_url
    assert cfg.chat.telegram.token and cfg.chat.telegram.token.get_secret_value() == telegram.token
    assert cfg.chat.allowed_senders == {"telegram": [str(CHAT)]}
    assert cfg.chat.channels == {f"telegram:{CHAT}": "backend"}
    assert telegram.texts_to(STRANGER) == []
    [test_message] = telegram.texts_to(CHAT)
    assert "reaches agent backend" in test_message
    # What setup read is confirmed: a gateway started next does not type it into the pane.
    assert telegram.updates == []


async def test_discord_from_flags_keeps_the_token_in_the_environment_and_the_file_as_it_was(
    tmp_path: Path, discord: FakeDiscord
) -> None:
    home = tmp_path / "home"
    write_config(
        home,
        {
            "//": "my notes",
            "agents": {"backend": {"target": "dev:0.1"}},
            "chat": {"discord": {"guild_id": str(discord.guild_id)}},
        },
    )
    run = await Run(
        home,
        "discord",
        "--token-env",
        "MY_DISCORD",
        "--agent",
        "backend",
        "--yes",
        "--base-url",
        discord.base_url,
        MY_DISCORD=discord.token,
    ).start()

    await eventually(discord.connected)
    discord.human_says(discord.general, "hello bot")
    await eventually(lambda: discord.texts_to(discord.general))
    discord.human_says(discord.general, "reply from my phone")
    printed = await run.finished()

    assert run.code == 0, printed
    assert discord.token not in printed
    written = run.written()
    assert written["//"] == "my notes" and written["agents"] == {"backend": {"target": "dev:0.1"}}
    assert written["chat"]["discord"]["token"] == "${MY_DISCORD}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MY_DISCORD", discord.token)
        cfg = load_config(run.config_path)
    assert cfg.chat.discord.enabled and cfg.chat.discord.guild_id == str(discord.guild_id)
    assert cfg.chat.allowed_senders == {"discord": [str(DISCORD_ALICE)]}
    assert cfg.chat.channels == {f"discord:{discord.general}": "backend"}
    [test_message] = discord.texts_to(discord.general)
    assert "reaches agent backend" in test_message
    assert "Reply seen from Alice: 'reply from my phone'" in printed


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("bad token", "Telegram refused the token (Unauthorized)"),
        ("nothing at base_url", "check your network, or chat.telegram.base_url (--base-url)"),
        ("webhook set", "remove the webhook with the Bot API's deleteWebhook"),
        ("nobody writes", "No message reached the bot within 1 s"),
    ],
)
async def test_a_telegram_step_that_fails_says_what_the_provider_answered_and_what_to_do(
    tmp_path: Path, telegram: FakeTelegram, case: str, expected: str
) -> None:
    home = tmp_path / "home"
    token = "123456:WRONG-token" if case == "bad token" else telegram.token
    url = f"http://127.0.0.1:{free_port()}" if case == "nothing at base_url" else telegram.base_url
    args = ["telegram", "--agent", "backend", "--wait", "1", "--base-url", url]
    if case == "webhook set":  # Telegram refuses getUpdates while a webhook is set
        telegram.webhook = {"url": "https://agents.example.test/webhooks/telegram"}
    if case == "nobody writes":  # no flag: the variable the config already names for the token
        write_config(home, {"chat": {"telegram": {"token": "${TG:-}"}}})
    else:
        args += ["--token-env", "TG"]
    run = await Run(home, *args, TG=token).start()
    printed = await run.finished()

    assert run.code == 1 and expected in printed, printed
    assert token not in printed
    if case in ("bad token", "nothing at base_url"):
        assert not run.config_path.exists()  # nothing written for a token that was not checked
    else:  # the checked token is kept, so running setup again starts from it
        assert run.written()["chat"]["telegram"]["token"] == "${TG}"
        assert "run `agentcomms setup telegram` again" in printed or "setup again" in printed
    if case == "nobody writes":
        assert "Using the Telegram token in $TG." in printed


async def test_discord_without_the_message_content_intent_says_where_to_switch_it_on(
    tmp_path: Path, discord: FakeDiscord
) -> None:
    discord.privileged_intents_enabled = False
    args = ("discord", "--token-env", "DC", "--agent", "backend", "--yes")
    run = Run(tmp_path / "home", *args, "--base-url", discord.base_url, DC=discord.token)
    printed = await (await run.start()).finished()

    assert run.code == 1 and "Message Content Intent" in printed, printed


@pytest.mark.parametrize(
    ("value", "variable"),
    [
        ("${TELEGRAM_BOT_TOKEN}", "TELEGRAM_BOT_TOKEN"),
        ("${TELEGRAM_BOT_TOKEN:-}", "TELEGRAM_BOT_TOKEN"),
        ("${TG:-fallback}", "TG"),
        ("123:abc", None),
        ("prefix-${TG}", None),  # a value built around a variable is not the variable
        (None, None),
    ],
)
def test_the_variable_a_token_is_read_from(value: Any, variable: str | None) -> None:
    assert referenced_variable(value) == variable


def test_a_change_that_would_not_load_leaves_the_file_as_it_was(home: Path) -> None:
    path = write_config(home, {"//": "mine", "chat": {"channels": {}}})
    before = path.read_text()

    def change(data: dict[str, Any]) -> None:
        data["chat"]["channels"]["telegram:456"] = "not an agent id!"

    with pytest.raises(ConfigError, match=r"(?s)chat\.channels.*left as it was"):
        edit_config(path, change)
    assert path.read_text() == before


async def test_setup_refuses_to_run_beside_a_gateway_that_would_take_the_humans_message(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    home = tmp_path / "home"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    home.mkdir(mode=0o700)
    listening.bind(str(home / "daemon.sock"))  # where the gateway of this home listens
    listening.listen()
    try:
        args = ("telegram", "--token-env", "TG", "--agent", "backend", "--yes")
        run = Run(home, *args, "--base-url", telegram.base_url, TG=telegram.token)
        printed = await (await run.start()).finished()
    finally:
        listening.close()

    assert run.code == 1 and "stop `agentcomms up`" in printed, printed
    assert telegram.calls == [] and not run.config_path.exists()
