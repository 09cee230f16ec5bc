"""Connecting to Temporal over TLS, with an API key or with client certificates (mTLS).

The dev server has no TLS of its own, so a TLS-terminating proxy (`tests/support/tls_proxy.py`) stands in
front of it with certificates made here. What is tried: a worker process and the gateway reaching
Temporal only through that proxy and typing into a pane; a client without a certificate, a wrong
CA, TLS spoken to a plain-text server, and `up` asked to embed a dev server behind TLS.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import TemporalConfig
from agentcomms.errors import ConfigError, TemporalUnavailable
from agentcomms.temporal import connect
from agentcomms.temporal_tls import tls_problem
from tests.fakes.serve import free_port
from tests.support.cli import AGENTCOMMS, cli, env_for
from tests.support.home import write_config
from tests.support.tls_proxy import SERVER_NAME, Pki, TlsProxy, make_pki, tls_proxy
from tests.support.tmux import Tmux, as_sent, recorder
from tests.support.waiting import eventually, typed


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
async def mtls(temporal_env: WorkflowEnvironment, pki: Pki) -> AsyncIterator[TlsProxy]:
    upstream = temporal_env.client.service_client.config.target_host
    async with tls_proxy(upstream, pki, require_client_cert=True) as proxy:
        yield proxy


def mtls_keys(pki: Pki) -> dict[str, str]:
    return {
        "tls_server_ca": str(pki.ca),
        "tls_client_cert": str(pki.client_cert),
        "tls_client_key": str(pki.client_key),
    }


@pytest.mark.timeout(120)
async def test_a_gateway_and_a_worker_process_reach_temporal_only_through_mtls(
    mtls: TlsProxy, pki: Pki, tmux: Tmux, tmp_path: Path
) -> None:
    """`agentcomms gateway` and `agentcomms worker --host-id …`, processes configured with the
    certificates, type a message sent with `agentcomms send`; so does `doctor` find Temporal."""
    home = tmp_path / "home"
    socket = tmp_path / "daemon.sock"
    write_config(
        home,
        {
            "server": {"socket_path": str(socket)},
            "temporal": {
                "address": mtls.address,
                "task_queue": f"tq-{uuid.uuid4()}",
                **mtls_keys(pki),
            },
            "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}"},
        },
    )
    host = f"tls-{uuid.uuid4().hex[:8]}"
    # An agent of its own: the dev server is shared by the whole run, and another module's
    # mailbox of the same name, left on a task queue nobody polls, would take the messages.
    agent = f"backend-{uuid.uuid4().hex[:8]}"
    processes = []
    for argv in (["gateway"], ["worker", "--host-id", host]):
        processes.append(
            await asyncio.create_subprocess_exec(
                AGENTCOMMS,
                *argv,
                env=env_for(home, COLUMNS="300"),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        )
    try:
        await eventually(lambda: socket.exists(), timeout=30)
        target, out = recorder(tmux, tmp_path, "rec")
        registered = await cli(
            home, "agents", "register", agent, "--tmux", target, "--socket", tmux.socket,
            "--host", host, "--submit-delay-ms", "0",
        )  # fmt: skip
        assert registered.returncode == 0, registered.stderr
        sent = await cli(home, "send", agent, "over mTLS", "--wait", "--timeout", "30")
        assert sent.returncode == 0, sent.stdout + sent.stderr
        await typed(out, as_sent("over mTLS"))

        doctor = json.loads((await cli(home, "doctor", "--json")).stdout)
        checks = {c["name"]: c for c in doctor["checks"]}
        assert checks["temporal"]["ok"], checks["temporal"]
        assert checks[f"worker {host}"]["ok"], checks
    finally:
        printed = []
        for process in processes:
            process.terminate()
            printed.append((await process.communicate())[0].decode())
    assert f"gateway listening on {socket}" in printed[0], printed[0]
    assert f"worker for host {host} running against {mtls.address}" in printed[1], printed[1]
    # Each process made its own connections, and the proxy is their only way to Temporal.
    assert mtls.connections >= 3


async def test_a_client_without_a_certificate_is_refused_with_what_to_set(
    mtls: TlsProxy, pki: Pki, tmp_path: Path
) -> None:
    cfg = TemporalConfig(address=mtls.address, tls_server_ca=pki.ca)
    with pytest.raises(TemporalUnavailable) as refused:
        await connect(cfg, patience_s=5)
    message = str(refused.value)
    assert f"Temporal at {mtls.address} closed the TLS connection" in message
    assert "refused no client certificate" in message
    assert "temporal.tls_client_cert and temporal.tls_client_key" in message

    # A worker started that way stops at once with the same sentence, not a traceback.
    home = tmp_path / "home"
    write_config(home, {"temporal": {"address": mtls.address, "tls_server_ca": str(pki.ca)}})
    worker = await asyncio.create_subprocess_exec(
        AGENTCOMMS, "worker", env=env_for(home),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(worker.communicate(), timeout=30)
    assert worker.returncode == 1
    assert "refused no client certificate" in err.decode()
    assert "Traceback" not in err.decode()


async def test_a_certificate_from_another_ca_is_refused_with_what_to_set(
    mtls: TlsProxy, pki: Pki, tmp_path: Path
) -> None:
    other = make_pki(tmp_path / "other", ca_name="someone else's CA")
    cfg = TemporalConfig.model_validate(
        {"address": mtls.address, **mtls_keys(pki), "tls_server_ca": str(other.ca)}
    )
    with pytest.raises(TemporalUnavailable) as refused:
        await connect(cfg, patience_s=5)
    assert str(refused.value) == (
        f"Temporal at {mtls.address} presented a TLS certificate not signed by the CA in "
        f"temporal.tls_server_ca ({other.ca}). Set temporal.tls_server_ca to the PEM file of "
        "the CA that signed the server's certificate."
    )


async def test_an_api_key_alone_means_tls_and_a_server_name_can_be_set(
    temporal_env: WorkflowEnvironment, pki: Pki
) -> None:
    upstream = temporal_env.client.service_client.config.target_host
    async with tls_proxy(upstream, pki) as proxy:
        # No `tls` key: an API key is only ever sent over TLS (as Temporal Cloud requires);
        # spoken in plain text to this proxy, the connection would fail.
        cfg = TemporalConfig.model_validate(
            {
                "address": proxy.address,
                "api_key": "test-api-key",
                "tls_server_ca": str(pki.ca),
                "tls_server_name": SERVER_NAME,
            }
        )
        assert cfg.tls is None and cfg.uses_tls()
        client = await connect(cfg)
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace="default")
        )
        assert described.namespace_info.name == "default"
        assert proxy.connections >= 1

        wrong_name = cfg.model_copy(update={"tls_server_name": "elsewhere.test"})
        with pytest.raises(TemporalUnavailable, match=re.escape("not valid for 'elsewhere.test'")):
            await connect(wrong_name)

        plain = cfg.model_copy(
            update={"tls": False, "tls_server_ca": None, "tls_server_name": None}
        )
        with pytest.raises(TemporalUnavailable, match=re.escape("set temporal.tls to true")):
            await connect(plain)


async def test_tls_spoken_to_a_plain_text_server_says_so(
    temporal_env: WorkflowEnvironment, pki: Pki
) -> None:
    address = temporal_env.client.service_client.config.target_host
    cfg = TemporalConfig(address=address, tls_server_ca=pki.ca)
    with pytest.raises(
        TemporalUnavailable, match=re.escape("does not speak TLS, but temporal.tls is on")
    ):
        await connect(cfg, patience_s=5)


async def test_a_certificate_file_that_cannot_be_read_is_named(pki: Pki, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "client.pem"
    cfg = TemporalConfig(
        address="127.0.0.1:1", tls_client_cert=missing, tls_client_key=pki.client_key
    )
    with pytest.raises(ConfigError) as err:
        await connect(cfg)
    assert str(err.value) == (
        f"temporal.tls_client_cert: cannot read {missing} (No such file or directory); it must "
        "be the PEM file of this process's client certificate, readable by this process."
    )
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("hello")
    with pytest.raises(ConfigError, match=r"temporal.tls_server_ca: .*ca.txt is not a PEM file"):
        await connect(TemporalConfig(address="127.0.0.1:1", tls_server_ca=not_pem))


# How a server hung up on a plain-text connection reads, by where in the client's stack it was
# seen (each seen on this machine).
HANG_UPS = [
    "Connection reset by peer (os error 104)",
    "Kind(ConnectionReset)",
    "error writing a body to connection: Broken pipe",
    'Status { code: Cancelled, message: "operation was canceled", source: Some(tonic::transport'
    '::Error(Transport, hyper::Error(Canceled, "connection closed"))) }',
]


@pytest.mark.parametrize("error", HANG_UPS)
def test_a_hang_up_on_plain_text_says_to_turn_tls_on_once_no_retry_is_left(error: str) -> None:
    plain = TemporalConfig(address="temporal.example:7233")
    assert tls_problem(plain, error, final=False) is None  # a server still starting may cut one
    said = tls_problem(plain, error, final=True)
    assert said is not None and "set temporal.tls to true" in said
    assert tls_problem(plain, "Connection refused (os error 111)", final=True) is None


def test_tls_keys_that_contradict_each_other_are_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="tls_client_cert is set but tls_client_key is not"):
        TemporalConfig(tls_client_cert=Path("c.pem"))
    with pytest.raises(ValidationError, match="tls is false but tls_server_ca is set"):
        TemporalConfig(tls=False, tls_server_ca=Path("ca.pem"))
    assert not TemporalConfig().uses_tls()
    assert not TemporalConfig(api_key="k", tls=False).uses_tls()  # e.g. a local proxy adds TLS


def test_up_does_not_embed_a_dev_server_behind_tls(tmp_path: Path) -> None:
    home = tmp_path / "home"
    address = f"127.0.0.1:{free_port()}"
    env = env_for(
        home, AGENTCOMMS_TEMPORAL__ADDRESS=address, AGENTCOMMS_TEMPORAL__API_KEY="secret-key-x"
    )
    done = subprocess.run(
        [AGENTCOMMS, "up", "--headless"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert f"No Temporal server at {address}" in done.stderr
    assert "does not start its embedded dev server, which has no TLS" in done.stderr
    assert "secret-key-x" not in done.stdout + done.stderr
    assert not (home / "temporal.db").exists()


def test_config_show_hides_the_api_key_and_shows_the_certificate_paths(
    pki: Pki, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    write_config(
        home,
        {"temporal": {"api_key": "${TEMPORAL_API_KEY}", **mtls_keys(pki)}},
    )
    env = env_for(home, TEMPORAL_API_KEY="tk-very-secret-123")
    shown = subprocess.run(
        [AGENTCOMMS, "config", "show", "--json"], env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert "tk-very-secret-123" not in shown.stdout + shown.stderr
    temporal = json.loads(shown.stdout)["temporal"]
    assert temporal["api_key"] == "***"
    assert temporal["tls_client_cert"] == str(pki.client_cert)
    assert temporal["tls"] is None
