"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs here).

The compose file is interpolated as compose does (`${VAR}`, `${VAR:-default}`, `${VAR:?error}`,
`${VAR:+replacement}`, nested),
then every agentcomms command it runs is parsed by the CLI's own parser, and every configuration
variable it passes is loaded through the configuration's own loader. A renamed option or key
breaks these tests before it breaks a deployment.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer.main
import yaml

from agentcomms.cli import app
from agentcomms.config import env_override_hints, env_overrides, load_config
from agentcomms.config.keys import annotation_at

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
# Variables the compose file reads itself (ports, versions): not configuration keys.
COMPOSE_ONLY = {"AGENTCOMMS_PUBLISH_IP"}
AGENTCOMMS_SERVICES = {"gateway", "worker"}
SECRETS = {
    "POSTGRES_PASSWORD": "pw-from-env",
    "TELEGRAM_BOT_TOKEN": "123:token-from-env",
    "DEPLOYMENT_KEY": "k" * 43,
}
# Set only by a deployment that encrypts payloads (the codec server's profile).
ENCRYPTED = {
    "ENCRYPTION_KEYS": '[{"id": "k1", "key": "' + "A" * 43 + '="}]',
    "CODEC_SERVER_TOKEN": "codec-token-from-env",
}

# Innermost first: an argument holds no `$`, `{` or `}` once the variables inside it are done.
_VARIABLE = re.compile(
    r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|:\?|:\+)(?P<arg>[^${}]*))?\}"
)


def interpolate(value: Any, environ: dict[str, str]) -> Any:
    """Compose's variable substitution, applied to every string in the file."""
    if isinstance(value, dict):
        return {k: interpolate(v, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(m: re.Match[str]) -> str:
        name, op, arg = m["name"], m["op"], m["arg"]
        if op == ":+":
            return arg if environ.get(name) else ""
        if environ.get(name):
            return environ[name]
        if op == ":?":
            raise KeyError(f"{name}: {arg}")
        return arg if op == ":-" else ""

    text, done = value.replace("$$", "\0"), None
    while text != done:
        done, text = text, _VARIABLE.sub(substitute, text)
    return text.replace("\0", "$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    file: dict[str, Any] = interpolate(yaml.safe_load(COMPOSE.read_text()), SECRETS)
    return file


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "environment is written as a mapping"
    return {k: str(v) for k, v in env.items()}


def agentcomms_argv(service: dict[str, Any]) -> list[list[str]]:
    """The agentcomms command lines a service runs: its command, and its health check's."""
    argvs = [list(service["command"])]
    test = service.get("healthcheck", {}).get("test", [])
    if test[:2] == ["CMD", "agentcomms"]:
        argvs.append(test[2:])
    return argvs


def parse_cli(argv: list[str]) -> Any:
    """Parse `agentcomms ARGV` with the real CLI's parser (typer's), without running anything:
    an unknown command, an unknown option or a bad value raises a usage error."""
    group = typer.main.get_command(app)
    commands: dict[str, Any] = group.commands  # type: ignore[attr-defined]
    assert argv[0] in commands, f"agentcomms has no command {argv[0]!r}"
    return commands[argv[0]].make_context(argv[0], list(argv[1:]))


def test_the_stack_has_its_services_each_with_a_health_check(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {
        "postgresql",
        "temporal",
        "temporal-ui",
        "codec-server",
        *AGENTCOMMS_SERVICES,
    }
    for name, service in services.items():
        assert service.get("healthcheck", {}).get("test"), f"{name} has no health check"
    # Nothing starts before what it needs is healthy, not merely started.
    assert services["temporal"]["depends_on"] == {"postgresql": {"condition": "service_healthy"}}
    assert services["temporal-ui"]["depends_on"] == {"temporal": {"condition": "service_healthy"}}
    for name in AGENTCOMMS_SERVICES:
        assert services[name]["depends_on"] == {
            "postgresql": {"condition": "service_healthy"},
            "temporal": {"condition": "service_healthy"},
        }
        assert services[name]["build"] == "."


def test_what_must_persist_is_on_volumes(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(compose["volumes"]) == {"pgdata", "agentcomms-home"}
    assert "pgdata:/var/lib/postgresql/data" in services["postgresql"]["volumes"]
    for name in AGENTCOMMS_SERVICES:
        home = env_of(services[name])["AGENTCOMMS_HOME"]
        assert f"agentcomms-home:{home}" in services[name]["volumes"]


@pytest.mark.parametrize("service", sorted(AGENTCOMMS_SERVICES))
def test_every_agentcomms_command_and_option_exists(compose: dict[str, Any], service: str) -> None:
    argvs = agentcomms_argv(compose["services"][service])
    assert argvs[0][0] in {"gateway", "worker"}
    for argv in argvs:
        ctx = parse_cli(argv)  # raises on an unknown command or option, or a bad value
        assert ctx.info_name == argv[0]
    if service == "worker":
        assert parse_cli(argvs[0]).params["host_id"] == "shared"


def test_the_cli_parser_would_catch_a_renamed_option() -> None:
    with pytest.raises(Exception, match="No such option: --host"):
        parse_cli(["worker", "--host", "shared"])
    with pytest.raises(AssertionError, match="no command 'gatewy'"):
        parse_cli(["gatewy"])


@pytest.mark.parametrize("service", sorted(AGENTCOMMS_SERVICES))
def test_every_variable_is_a_configuration_key_and_the_configuration_loads(
    compose: dict[str, Any], service: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = env_of(compose["services"][service])
    passed = {
        k: v for k, v in env.items() if k.startswith("AGENTCOMMS_") and k != "AGENTCOMMS_HOME"
    }
    understood = {name for name, _, _ in env_overrides(passed)}
    # An AGENTCOMMS_ variable that names no key is ignored by the loader: here it is an error.
    assert understood == set(passed), set(passed) - understood
    assert env_override_hints(passed) == []
    for name, value in passed.items():
        monkeypatch.setenv(name, value)
    cfg = load_config()  # no file: defaults and these variables, validated as every process does

    assert cfg.temporal.address == "temporal:7233"
    # Every process of the deployment, in the stack or not, signs and checks with this one key.
    assert cfg.security.deployment_key is not None
    assert cfg.security.deployment_key.get_secret_value() == SECRETS["DEPLOYMENT_KEY"]
    assert cfg.temporal.encryption_keys == []
    assert cfg.chat.telegram.token is not None
    assert cfg.chat.telegram.token.get_secret_value() == SECRETS["TELEGRAM_BOT_TOKEN"]
    postgres = compose["services"]["postgresql"]["environment"]
    url = urlsplit(cfg.database.resolved_url())
    assert url.scheme == "postgresql+asyncpg"
    assert (url.hostname, url.port) == ("postgresql", 5432)
    assert url.username == postgres["POSTGRES_USER"]
    assert url.password == postgres["POSTGRES_PASSWORD"] == SECRETS["POSTGRES_PASSWORD"]
    assert url.path == f"/{postgres['POSTGRES_DB']}"
    if service == "worker":
        assert cfg.metrics.address == "0.0.0.0:9464"
        health = " ".join(compose["services"]["worker"]["healthcheck"]["test"])
        assert "http://127.0.0.1:9464/metrics" in health
    else:
        assert cfg.server.http_host == "0.0.0.0"


def test_every_agentcomms_variable_named_anywhere_in_the_file_is_a_key() -> None:
    """The header's instructions for host workers included."""
    names = set(re.findall(r"\bAGENTCOMMS_[A-Z0-9_]+", COMPOSE.read_text()))
    names -= COMPOSE_ONLY | {"AGENTCOMMS_HOME"}
    assert "AGENTCOMMS_DATABASE__URL" in names
    keys = {name: loc for name, loc, _ in env_overrides(dict.fromkeys(names, "x"))}
    assert set(keys) == names, names - set(keys)
    for name, loc in keys.items():
        assert annotation_at(loc) is not None, f"{name} names no key ({'.'.join(loc)})"


def test_secrets_come_from_the_environment_only() -> None:
    raw = yaml.safe_load(COMPOSE.read_text())
    for required in ("POSTGRES_PASSWORD", "DEPLOYMENT_KEY"):
        with pytest.raises(KeyError, match=required):  # compose refuses to start without it
            interpolate(raw, {k: v for k, v in SECRETS.items() if k != required})
    text = COMPOSE.read_text()
    for secret_key in ("PASSWORD", "PWD", "TOKEN", "_KEY"):
        for line in text.splitlines():
            key, sep, value = line.strip().partition(":")
            if sep and secret_key in key and not line.strip().startswith("#"):
                assert value.strip().startswith("${"), line


# ---- the codec server: the UI shows encrypted histories ----------------------------------------------


def test_the_codec_server_runs_with_encryption_only_and_its_command_exists(
    compose: dict[str, Any],
) -> None:
    service = compose["services"]["codec-server"]
    # Without keys it refuses to start: only `docker compose --profile encryption` runs it.
    assert service["profiles"] == ["encryption"]
    assert service["build"] == "." and service["image"] == "agentcomms:local"
    assert service["command"] == ["codec-server"]
    parse_cli(service["command"])  # raises on an unknown command or option


async def test_the_codec_server_loads_its_keys_and_token_and_answers_its_health_check(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import subprocess
    import sys

    from agentcomms.codec import codec_token
    from agentcomms.codec_server import CodecServer

    compose = interpolate(yaml.safe_load(COMPOSE.read_text()), SECRETS | ENCRYPTED)
    service = compose["services"]["codec-server"]
    env = env_of(service)
    passed = {
        k: v for k, v in env.items() if k.startswith("AGENTCOMMS_") and k != "AGENTCOMMS_HOME"
    }
    assert {name for name, _, _ in env_overrides(passed)} == set(passed)
    assert env_override_hints(passed) == []
    # It decodes; it needs neither the deployment key nor the database's password.
    assert not {"AGENTCOMMS_SECURITY__DEPLOYMENT_KEY", "AGENTCOMMS_DATABASE__URL"} & set(env)
    assert SECRETS["POSTGRES_PASSWORD"] not in str(service)
    for name, value in passed.items():
        monkeypatch.setenv(name, value)
    cfg = load_config()
    assert [k.id for k in cfg.temporal.encryption_keys] == ["k1"]
    assert codec_token(cfg.temporal) == ENCRYPTED["CODEC_SERVER_TOKEN"]
    server = cfg.temporal.codec_server
    assert (server.host, server.port) == ("0.0.0.0", 8234)
    assert f"{server.port}:{server.port}" in service["ports"][0]
    # The browser calls it from the UI's page: that origin is allowed.
    ui = compose["services"]["temporal-ui"]
    assert env_of(ui)["TEMPORAL_CORS_ORIGINS"] in server.origins
    assert f":{urlsplit(env_of(ui)['TEMPORAL_CORS_ORIGINS']).port}:" in ui["ports"][0]

    # Its health check, run against it (on a free port): passes with the token it was given.
    cfg.temporal.codec_server.host, cfg.temporal.codec_server.port = "127.0.0.1", 0
    running = CodecServer(cfg.temporal)
    await running.start()
    try:
        check = service["healthcheck"]["test"]
        assert check[:3] == ["CMD", "python", "-c"]
        script = check[3].replace(":8234/", f":{running.port}/")

        def health(token: str) -> int:
            run_env = {"AGENTCOMMS_TEMPORAL__CODEC_SERVER__TOKEN": token, "PATH": "/usr/bin"}
            done = subprocess.run([sys.executable, "-c", script], env=run_env, capture_output=True)
            return done.returncode

        assert await asyncio.to_thread(health, ENCRYPTED["CODEC_SERVER_TOKEN"]) == 0
        assert await asyncio.to_thread(health, "wrong") != 0
    finally:
        await running.close()


def test_the_ui_is_pointed_at_the_codec_server_with_its_token(compose: dict[str, Any]) -> None:
    raw = yaml.safe_load(COMPOSE.read_text())
    encrypted = interpolate(raw, SECRETS | ENCRYPTED)
    endpoint = env_of(encrypted["services"]["temporal-ui"])["TEMPORAL_CODEC_ENDPOINT"]
    published = encrypted["services"]["codec-server"]["ports"][0].rsplit(":", 2)
    # Where the browser reaches the published port, the token as the first path segment.
    assert endpoint == f"http://localhost:{published[1]}/{ENCRYPTED['CODEC_SERVER_TOKEN']}"
    # Without a token (no encryption), no codec: the UI shows histories as stored.
    assert env_of(compose["services"]["temporal-ui"])["TEMPORAL_CODEC_ENDPOINT"] == ""


def test_the_dockerfile_installs_every_package_on_python_3_11_slim() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.MULTILINE)
    assert re.search(r"^RUN pip install \.", text, re.MULTILINE)
    # No tmux, nothing else: the gateway and the shared worker type into no pane.
    assert "apt-get" not in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = set(re.findall(r"^COPY (\S+) ", text, re.MULTILINE))
    for pattern in packages:
        package = pattern.rstrip("*")
        assert (ROOT / package).is_dir()
        assert package in copied, f"the Dockerfile does not copy {package}/"
    assert {"pyproject.toml", "README.md"} <= set(
        re.findall(r"^COPY ([^\n]+) \./$", text, re.MULTILINE)[0].split()
    )
    assert re.search(r"^ENTRYPOINT \[\"agentcomms\"\]$", text, re.MULTILINE)
