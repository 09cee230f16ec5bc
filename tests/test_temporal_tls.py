"""Connecting to Temporal over TLS, with an API key or with client certificates (mTLS).

The dev server has no TLS of its own, so a TLS-terminating proxy (`tests/tls_proxy.py`) stands in
front of it with certificates made here. What is tried: a worker process and the gateway reaching
Temporal only through that proxy and typing into a pane; a client without a certificate, a wrong
CA, TLS spoken to a plain-text server, and `up` asked to embed a dev server behind TLS.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

from agentcomms.config import TemporalConfig
from agentcomms.errors import ConfigError, TemporalUnavailable
from agentcomms.temporal import connect
from tests.conftest import Tmux, write_config
from tests.stack import running_stack, typed
from tests.test_mailbox import recorder
from tests.test_up import env_for, free_port
from tests.tls_proxy import SERVER_NAME, Pki, TlsProxy, make_pki, tls_proxy

AGENTCOMMS = str(Path(sys.executable).parent / "agentcomms")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
async def mtls(temporal_env, pki: Pki) -> AsyncIterator[TlsProxy]:
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
async def test_a_worker_process_and_the_gateway_reach_temporal_only_through_mtls(
    mtls: TlsProxy, pki: Pki, tmux: Tmux, tmp_path: Path
):
    cfg = TemporalConfig.model_validate({"address": mtls.address, **mtls_keys(pki)})
    client = await connect(cfg)
    async with running_stack(client, tmp_path, with_worker=False) as stack:
        assert stack.cfg.temporal.address == mtls.address  # the gateway's client is the TLS one
        home = tmp_path / "worker-home"
        write_config(
            home,
            {
                "temporal": {
                    "address": mtls.address,
                    "task_queue": stack.cfg.temporal.task_queue,
                    **mtls_keys(pki),
                },
                "database": {"url": stack.cfg.database.resolved_url()},
            },
        )
        host = f"tls-{stack.agent_id('h')}"
        handshakes_before = mtls.connections
        worker = await asyncio.create_subprocess_exec(
            AGENTCOMMS, "worker", "--host-id", host, env=env_for(home),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            agent = stack.agent_id()
            target, out = recorder(tmux, tmp_path, "rec")
            await stack.call(
                "register", agent_id=agent, target=target, socket=tmux.socket,
                submit_delay_ms=0, host=host,
            )  # fmt: skip
            result = await stack.call("send", agent_id=agent, message="over mTLS", wait=True)
            assert result["delivered"] is True, result
            await typed(out, b"over mTLS\r")
        finally:
            worker.terminate()
            printed, _ = await worker.communicate()
        assert f"worker for host {host} running against {mtls.address}" in printed.decode()
        # The worker process had no other way to Temporal than through the proxy's handshake.
        assert mtls.connections > handshakes_before
        description = await client.get_workflow_handle(f"agent-{agent}").describe()
        assert description.task_queue == f"agentcomms-host-{host}"


async def test_a_client_without_a_certificate_is_refused_with_what_to_set(
    mtls: TlsProxy, pki: Pki, tmp_path: Path
):
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
):
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


async def test_an_api_key_alone_means_tls_and_a_server_name_can_be_set(temporal_env, pki: Pki):
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


async def test_tls_spoken_to_a_plain_text_server_says_so(temporal_env, pki: Pki):
    address = temporal_env.client.service_client.config.target_host
    cfg = TemporalConfig(address=address, tls_server_ca=pki.ca)
    with pytest.raises(
        TemporalUnavailable, match=re.escape("does not speak TLS, but temporal.tls is on")
    ):
        await connect(cfg, patience_s=5)


async def test_a_certificate_file_that_cannot_be_read_is_named(pki: Pki, tmp_path: Path):
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


def test_tls_keys_that_contradict_each_other_are_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="tls_client_cert is set but tls_client_key is not"):
        TemporalConfig(tls_client_cert=Path("c.pem"))
    with pytest.raises(ValidationError, match="tls is false but tls_server_ca is set"):
        TemporalConfig(tls=False, tls_server_ca=Path("ca.pem"))
    assert not TemporalConfig().uses_tls()
    assert not TemporalConfig(api_key="k", tls=False).uses_tls()  # e.g. a local proxy adds TLS


def test_up_does_not_embed_a_dev_server_behind_tls(tmp_path: Path):
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
