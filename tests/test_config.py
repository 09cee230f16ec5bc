"""Loading the configuration: files, permissions, ${VAR} expansion, overrides, errors, redaction."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentcomms.config import (
    Config,
    ensure_home,
    env_override_hints,
    load_config,
    redacted,
    resolve_config,
    write_private_file,
)
from agentcomms.errors import ConfigError
from tests.support.home import mode, write_config

SECRET = "s3cr3t-Value-4242"


def problems(excinfo: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return str(excinfo.value).splitlines()


# --- Files and permissions ------------------------------------------------------------------------


def test_no_file_at_the_default_path_means_defaults_and_creates_nothing(home: Path) -> None:
    assert load_config() == Config()
    assert not home.exists()  # reading never creates the home


def test_a_missing_explicit_path_is_an_error(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match="does not exist") as excinfo:
        load_config(missing)
    assert str(missing) in str(excinfo.value)


def test_explicit_path_is_read(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.json"
    path.write_text(json.dumps({"temporal": {"namespace": "team"}}))
    path.chmod(0o600)
    assert load_config(path).temporal.namespace == "team"


def test_ensure_home_creates_0700_and_tightens_a_loose_home(home: Path) -> None:
    old_umask = os.umask(0)  # the widest umask: the mode must not depend on it
    try:
        assert ensure_home() == home
    finally:
        os.umask(old_umask)
    assert mode(home) == 0o700
    home.chmod(0o755)
    ensure_home()
    assert mode(home) == 0o700


def test_write_private_file_is_0600_whatever_the_umask_and_refuses_to_clobber(home: Path) -> None:
    path = home / "config.json"
    old_umask = os.umask(0)
    try:
        write_private_file(path, "{}")
    finally:
        os.umask(old_umask)
    assert (mode(home), mode(path)) == (0o700, 0o600)
    with pytest.raises(ConfigError, match="already exists; pass --force"):
        write_private_file(path, '{"x": 1}')
    assert path.read_text() == "{}"
    path.chmod(0o644)
    write_private_file(path, '{"x": 1}', overwrite=True)
    assert (path.read_text(), mode(path)) == ('{"x": 1}', 0o600)
    assert [p.name for p in home.iterdir()] == ["config.json"]  # no temporary file left behind


@pytest.mark.parametrize("loose", [0o644, 0o640, 0o604, 0o620])
def test_a_file_other_users_can_reach_is_refused_with_the_fix(home: Path, loose: int) -> None:
    path = write_config(home, {})
    path.chmod(loose)
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    message = str(excinfo.value)
    assert f"mode {loose:04o}" in message
    assert f"chmod 600 {path}" in message


def test_a_home_others_can_write_is_refused_with_the_fix(home: Path) -> None:
    write_config(home, {})
    home.chmod(0o777)
    with pytest.raises(ConfigError, match=f"chmod 700 {home}"):
        load_config()


def test_home_env_moves_the_whole_directory(home: Path) -> None:
    write_config(home, {"temporal": {"namespace": "moved"}})
    assert resolve_config().path == home / "config.json"
    assert load_config().temporal.namespace == "moved"


# --- ${VAR} expansion ---------------------------------------------------------------------------


def test_references_expand_after_parsing_so_quotes_and_backslashes_survive(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tricky = 'he said "hi", then \\ and \\n and } and ${NOT_A_REF}'
    monkeypatch.setenv("TRICKY", tricky)
    monkeypatch.setenv("TG", SECRET)
    write_config(
        home,
        {"voice": {"sms_fallback_message": "${TRICKY}!"}, "chat": {"telegram": {"token": "${TG}"}}},
    )
    config = load_config()
    # The value is inserted as is: not re-parsed, not expanded again.
    assert config.voice.sms_fallback_message == tricky + "!"
    assert config.chat.telegram.token is not None
    assert config.chat.telegram.token.get_secret_value() == SECRET


def test_default_applies_when_unset_or_empty(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(
        home,
        {
            "temporal": {"address": "${T_HOST:-127.0.0.1}:${T_PORT:-7233}", "ui_port": "${UI:-9}"},
            "server": {"http_host": "${EMPTY:-0.0.0.0}"},
            "database": {"url": "${SET:-sqlite+aiosqlite:///x.db}"},
        },
    )
    monkeypatch.setenv("T_PORT", "7999")
    monkeypatch.setenv("EMPTY", "")
    monkeypatch.setenv("SET", "postgresql+asyncpg://db/x")
    config = load_config()
    assert config.temporal.address == "127.0.0.1:7999"
    assert config.temporal.ui_port == 9  # the expanded text is validated as an integer
    assert config.server.http_host == "0.0.0.0"
    assert config.database.url == "postgresql+asyncpg://db/x"


def test_empty_secret_means_not_configured(home: Path) -> None:
    write_config(
        home,
        {
            "chat": {"telegram": {"token": "${TELEGRAM_BOT_TOKEN:-}"}},
            "server": {"socket_path": ""},
        },
    )
    config = load_config()
    assert config.chat.telegram.token is None
    assert config.server.socket_path is None  # not Path("") == "."


def test_double_dollar_brace_is_a_literal_and_a_lone_dollar_is_kept(home: Path) -> None:
    write_config(home, {"voice": {"sms_fallback_message": "$${HOME} costs $5, pa$$word"}})
    assert load_config().voice.sms_fallback_message == "${HOME} costs $5, pa$$word"


def test_keys_are_not_expanded(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAN", "1")
    write_config(home, {"chat": {"channels": {"telegram:${CHAN}": "backend"}}})
    assert load_config().chat.channels == {"telegram:${CHAN}": "backend"}


def test_unset_variable_names_the_key_and_the_fix(home: Path) -> None:
    path = write_config(home, {"chat": {"telegram": {"token": "${TELEGRAM_TOKEN}"}}})
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert problems(excinfo) == [
        f"{path}: chat.telegram.token: environment variable TELEGRAM_TOKEN is not set "
        "(use ${TELEGRAM_TOKEN:-default} for a default)"
    ]


def test_malformed_reference_is_an_error(home: Path) -> None:
    write_config(home, {"temporal": {"address": "host:${PORT"}})
    with pytest.raises(
        ConfigError, match=r"temporal\.address: malformed \$\{\.\.\.\} at character 6"
    ):
        load_config()


def test_wrong_type_after_expansion_says_which_variable(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PORT", "eighty")
    write_config(home, {"server": {"http_port": "${PORT}"}})
    with pytest.raises(
        ConfigError, match=r'expected an integer, got "eighty" \(after expanding \$\{PORT\}\)'
    ):
        load_config()


# --- Environment overrides ----------------------------------------------------------------------


def test_env_overrides_nest_with_double_underscores_and_parse_json(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(home, {"temporal": {"address": "file:1", "namespace": "file"}})
    monkeypatch.setenv("AGENTCOMMS_TEMPORAL__ADDRESS", "host:7233")
    monkeypatch.setenv("AGENTCOMMS_TEMPORAL__UI_PORT", "9000")
    monkeypatch.setenv("AGENTCOMMS_TEMPORAL__EMBEDDED", "false")
    monkeypatch.setenv("AGENTCOMMS_AGENTS__BACKEND__TARGET", "dev:0.1")
    monkeypatch.setenv("AGENTCOMMS_CHAT__ALLOWED_SENDERS__TELEGRAM", '["42", "43"]')
    monkeypatch.setenv("AGENTCOMMS_VOICE__TRANSCRIPT_TIMEOUT_S", "12.5")
    config = load_config()
    assert config.temporal.address == "host:7233"  # env beats the file
    assert config.temporal.namespace == "file"  # the rest of the file still counts
    assert config.temporal.ui_port == 9000
    assert config.temporal.embedded is False
    assert config.agents["backend"].target == "dev:0.1"
    assert config.chat.allowed_senders == {"telegram": ["42", "43"]}
    assert config.voice.transcript_timeout_s == 12.5


def test_string_keys_take_the_text_as_is(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCOMMS_TEMPORAL__NAMESPACE", "007")
    monkeypatch.setenv("AGENTCOMMS_CHAT__TELEGRAM__TOKEN", "12345")
    monkeypatch.setenv("AGENTCOMMS_DATABASE__URL", "")  # empty: back to "not set"
    config = load_config()
    assert config.temporal.namespace == "007"
    assert config.chat.telegram.token is not None
    assert config.chat.telegram.token.get_secret_value() == "12345"
    assert config.database.url is None


def test_env_override_matches_an_agent_id_whatever_its_case(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(home, {"agents": {"Backend": {"target": "a:0.0"}}})
    monkeypatch.setenv("AGENTCOMMS_AGENTS__BACKEND__TARGET", "b:0.0")
    agents = load_config().agents
    assert list(agents) == ["Backend"]
    assert agents["Backend"].target == "b:0.0"


def test_shallow_and_deep_overrides_combine(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCOMMS_CHAT__TELEGRAM", '{"enabled": true}')
    monkeypatch.setenv("AGENTCOMMS_CHAT__TELEGRAM__BASE_URL", "http://127.0.0.1:9/")
    telegram = load_config().chat.telegram
    assert (telegram.enabled, telegram.base_url) == (True, "http://127.0.0.1:9/")


def test_agentcall_names_are_accepted_with_lower_precedence(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCALL_TEMPORAL__NAMESPACE", "legacy")
    monkeypatch.setenv("AGENTCALL_TEMPORAL__ADDRESS", "legacy:1")
    monkeypatch.setenv("AGENTCOMMS_TEMPORAL__ADDRESS", "new:2")
    config = load_config()
    assert config.temporal.namespace == "legacy"
    assert config.temporal.address == "new:2"


def test_names_that_are_not_sections_are_ignored(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AGENTCOMMS_AGENT_ID", "AGENTCOMMS_TEST_DATABASE_URL", "AGENTCOMMS_WHATEVER"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("AGENTCOMMS_DATABASE_URL", "postgresql://x")  # one underscore: not a key
    assert load_config() == Config()  # AGENTCOMMS_HOME (set by the fixture) is no key either
    assert env_override_hints() == [
        "AGENTCOMMS_DATABASE_URL is ignored: keys are separated by a double underscore, "
        "as in AGENTCOMMS_DATABASE__URL"
    ]


def test_a_bad_override_names_the_variable(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCOMMS_TEMPORAL__UI_PORT", "abc")
    monkeypatch.setenv("AGENTCOMMS_TEMPORAL__ADRESS", "h:1")
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert problems(excinfo) == [
        'AGENTCOMMS_TEMPORAL__UI_PORT: temporal.ui_port: expected an integer, got "abc"',
        "AGENTCOMMS_TEMPORAL__ADRESS: temporal.adress: unknown key (did you mean 'address'?)",
    ]


# --- Errors -------------------------------------------------------------------------------------


def test_broken_json_gives_file_line_and_column(home: Path) -> None:
    path = write_config(
        home, '{\n  "temporal": {\n    "address": "x"\n    "namespace": "y"\n  }\n}\n'
    )
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert problems(excinfo) == [
        f"{path}: invalid JSON at line 4, column 5: Expecting ',' delimiter"
    ]


def test_broken_json_hints_at_comments_and_trailing_commas(home: Path) -> None:
    write_config(home, '{\n  // a comment\n  "temporal": {}\n}')
    with pytest.raises(ConfigError, match=r'line 2, column 3: .*use a "//" key instead'):
        load_config()
    write_config(home, '{"temporal": {"address": "x",}}')
    with pytest.raises(ConfigError, match=r"line 1, column 30: .*trailing comma"):
        load_config()


def test_broken_json_never_echoes_the_line(home: Path) -> None:
    write_config(home, '{"chat": {"telegram": {"token": "' + SECRET + '" oops}}}')
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert "invalid JSON at line 1" in str(excinfo.value)
    assert SECRET not in str(excinfo.value)


@pytest.mark.parametrize("text", ["", "  \n", "[]", '"x"'])
def test_a_file_that_is_not_an_object_is_an_error(home: Path, text: str) -> None:
    write_config(home, text)
    with pytest.raises(ConfigError, match=r"the file is empty|expected a JSON object"):
        load_config()


def test_json_nested_beyond_the_parser_is_an_error_not_a_traceback(home: Path) -> None:
    write_config(home, "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config()


@pytest.mark.parametrize("kind", ["directory", "fifo", "huge"])
def test_a_path_that_is_not_a_config_file_is_named_for_what_it_is(home: Path, kind: str) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = home / "config.json"
    if kind == "directory":
        path.mkdir(mode=0o700)
        expected = "is a directory"
    elif kind == "fifo":
        os.mkfifo(path, 0o600)  # reading it would wait for a writer forever
        expected = "not a regular file"
    else:
        write_config(home, "{}" + " " * 2_000_000)
        expected = "2,000,002 bytes"
    with pytest.raises(ConfigError, match=expected):
        load_config()


def test_wrong_type_names_the_key_and_the_expected_type(home: Path) -> None:
    path = write_config(home, {"temporal": {"ui_port": "abc"}})
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert problems(excinfo) == [f'{path}: temporal.ui_port: expected an integer, got "abc"']


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"temporal": {"embedded": "maybe"}},
            'temporal.embedded: expected true or false, got "maybe"',
        ),
        ({"temporal": 5}, "temporal: expected an object {...}, got 5"),
        (
            {"chat": {"allowed_senders": {"telegram": "42"}}},
            "chat.allowed_senders.telegram: expected a list [...]",
        ),
        (
            {"chat": {"allowed_senders": {"telgram": ["42"]}}},
            "chat.allowed_senders: 'telgram' is not a provider (did you mean 'telegram'? "
            "known: discord, telegram, whatsapp, sms, email, local)",
        ),
        (
            {"chat": {"whatsapp": {"api": "meta"}}},
            "chat.whatsapp.api: expected 'twilio' or 'cloud', got \"meta\"",
        ),
        (
            {"server": {"http_port": 70000}},
            "server.http_port: expected a number <= 65535, got 70000",
        ),
        (
            {"logging": {"level": "loud"}},
            "logging.level: expected 'DEBUG', 'INFO', 'WARNING' or 'ERROR', got \"loud\"",
        ),
        ({"agents": {"backend": {}}}, "agents.backend.target: required key is missing"),
    ],
)
def test_each_kind_of_mistake_says_what_was_expected(
    home: Path, data: dict[str, Any], expected: str
) -> None:
    write_config(home, data)
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert expected in str(excinfo.value)


def test_unknown_keys_are_named_with_their_path(home: Path) -> None:
    path = write_config(
        home,
        {
            "chat": {"telegram": {"tokn": "x"}},
            "agents": {"a": {"target": "s:0.0", "hots": 1}},
            "voyce": {},
        },
    )
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert sorted(problems(excinfo)) == sorted(
        [
            f"{path}: chat.telegram.tokn: unknown key (did you mean 'token'?)",
            f"{path}: agents.a.hots: unknown key (did you mean 'host'?)",
            f"{path}: voyce: unknown key (did you mean 'voice'?)",
        ]
    )


def test_every_problem_is_listed_not_only_the_first(home: Path) -> None:
    write_config(
        home,
        {
            "temporal": {"ui_port": "abc", "namespace": "${NO_SUCH_VAR}"},
            "server": {"http_port": "${ALSO_MISSING}"},
            "logging": {"lvl": "INFO"},
            "chat": {"local": {"enabled": True, "enabled ": True}},
        },
    )
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    lines = problems(excinfo)
    assert len(lines) == 5, lines
    for fragment in ("temporal.ui_port", "NO_SUCH_VAR", "ALSO_MISSING", "logging.lvl", "enabled "):
        assert sum(fragment in line for line in lines) == 1, (fragment, lines)
    # A variable that could not be expanded is reported once, not again as a wrong type.
    assert not any("server.http_port: expected" in line for line in lines)


def test_duplicate_keys_are_reported(home: Path) -> None:
    write_config(home, '{"temporal": {"address": "a:1", "address": "b:2"}}')
    with pytest.raises(ConfigError, match=r"temporal\.address: duplicate key"):
        load_config()


def test_comment_keys_are_ignored_at_any_depth(home: Path) -> None:
    write_config(
        home,
        '{"//": "top", "temporal": {"//": "a", "//": "b", "// port": "${UNSET}", "ui_port": 1}}',
    )
    assert load_config().temporal.ui_port == 1


def test_logging_level_in_any_case(home: Path) -> None:
    write_config(home, {"logging": {"level": "debug"}})
    assert load_config().logging.level == "DEBUG"


# --- Secrets ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {"chat": {"telegram": {"token": 424242424242}}},
        {"chat": {"telegram": {"token": ["s3cr3t-Value-4242"]}}},
        {"temporal": {"api_key": {"k": "s3cr3t-Value-4242"}}},
        {"voice": {"tts": {"api_key": 424242424242}}},
        # The secret written where its object belongs: a key alone in the list of keys, the
        # bot's token as the whole section. What goes there holds a secret, so this may be it.
        {"temporal": {"encryption_keys": ["s3cr3t-Value-4242"]}},
        {"temporal": {"encryption_keys": "s3cr3t-Value-4242"}},
        {"chat": {"telegram": "4242:s3cr3t-Value"}},
    ],
)
def test_errors_never_echo_a_secret(home: Path, data: dict[str, Any]) -> None:
    write_config(home, data)
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    message = str(excinfo.value)
    assert "value hidden" in message
    assert "4242" not in message


def test_an_override_of_the_wrong_type_on_a_secret_is_not_echoed(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCOMMS_AGENTS__A", json.dumps({"target": "x:0.0", "token": [SECRET]}))
    with pytest.raises(ConfigError) as excinfo:
        load_config()
    assert (
        "AGENTCOMMS_AGENTS__A: agents.a.token: expected a string, got a list (value hidden)"
        in str(excinfo.value)
    )
    assert SECRET not in str(excinfo.value)


def test_redacted_hides_every_secret_and_keeps_null(home: Path) -> None:
    config = Config.model_validate(
        {
            "chat": {"telegram": {"token": SECRET}, "channels": {"telegram:1": "a"}},
            "voice": {"phone": {"auth_token": SECRET, "account_sid": "AC1"}},
            "database": {"url": f"postgresql+asyncpg://bob:{SECRET}@db:5432/agentcomms"},
            "agents": {"a": {"target": "s:0.0", "token": SECRET}},
        }
    )
    data = redacted(config)
    assert SECRET not in json.dumps(data)
    assert data["chat"]["telegram"]["token"] == "***"
    assert data["voice"]["phone"]["auth_token"] == "***"
    assert data["agents"]["a"]["token"] == "***"
    assert data["database"]["url"] == "postgresql+asyncpg://bob:***@db:5432/agentcomms"
    assert data["chat"]["discord"]["token"] is None  # unset stays visibly unset
    assert data["voice"]["phone"]["account_sid"] == "AC1"
    assert data["chat"]["channels"] == {"telegram:1": "a"}


def test_whatsapp_cloud_secrets_are_redacted_and_its_keys_are_what_it_needs() -> None:
    cloud = {
        "enabled": True,
        "api": "cloud",
        "access_token": SECRET,
        "phone_number_id": "106540352242922",
        "app_secret": SECRET + "a",
        "verify_token": SECRET + "v",
    }
    config = Config.model_validate({"chat": {"whatsapp": cloud}})
    data = redacted(config)
    assert SECRET not in json.dumps(data)
    assert data["chat"]["whatsapp"]["phone_number_id"] == "106540352242922"
    assert config.chat.whatsapp.missing_credentials() == []  # no Twilio keys asked for
    assert config.chat.whatsapp.webhook_problems("https://agents.example") == []
    bare = Config.model_validate({"chat": {"whatsapp": {"enabled": True, "api": "cloud"}}})
    assert bare.chat.whatsapp.missing_credentials() == ["access_token", "phone_number_id"]
    twilio = Config.model_validate({"chat": {"whatsapp": {"enabled": True}}})
    assert twilio.chat.whatsapp.missing_credentials() == ["account_sid", "auth_token"]


def test_redacted_goes_by_key_name_too_not_only_by_type() -> None:
    class Plugin(BaseModel):
        password: str = SECRET
        client_secret: str = SECRET
        api_key: int = 42424242
        interrupt_key: str = "C-c"
        webhook: str = f"https://user:{SECRET}@hooks.example/x"

    data = redacted(Plugin())
    assert data == {
        "password": "***",
        "client_secret": "***",
        "api_key": "***",
        "interrupt_key": "C-c",
        "webhook": "https://user:***@hooks.example/x",
    }


def test_an_interrupt_key_tmux_could_misread_is_refused(home: Path) -> None:
    home.mkdir(mode=0o700)
    path = home / "config.json"
    path.write_text(
        '{"agents": {"backend": {"target": "dev:0.1", "interrupt_key": "C-c ; kill-server"}}}'
    )
    path.chmod(0o600)
    with pytest.raises(ConfigError, match=r"agents\.backend\.interrupt_key"):
        load_config()


def test_agent_ids_and_targets_follow_the_same_rules_as_registration(home: Path) -> None:
    write_config(
        home,
        {"agents": {"bad id": {"target": "a:0.0"}, "ok": {"target": "x;", "socket": "a\x07"}}},
    )
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert problems(caught) == [
        f"{home / 'config.json'}: agents.bad id: agent id 'bad id' is not valid: use letters, "
        "digits, '.', '_' or '-' (at most 64, starting with a letter or digit)",
        f"{home / 'config.json'}: agents.ok.target: a tmux target cannot end with ';': 'x;'",
        f"{home / 'config.json'}: agents.ok.socket: not a usable tmux socket path: 'a\\x07'",
    ]
