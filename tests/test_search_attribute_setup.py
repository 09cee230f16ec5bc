"""Search attributes on a server agentcomms did not start: added where allowed; where refused,
`worker` (and `up`, which starts the same way) stops and `doctor` fails, each with the exact
commands that add them. A namespace of a real dev server refuses them once it holds its limit
of ten Keyword attributes, as Temporal Cloud refuses a key that is not an admin's.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agentcomms.config import TemporalConfig
from agentcomms.errors import SearchAttributesMissing
from agentcomms.temporal import ensure_search_attributes, temporal_binary
from agentcomms.temporal_admin import search_attribute_commands
from tests.support.cli import env_for
from tests.support.home import write_config

AGENTCOMMS = str(Path(temporal_binary()).parent / "agentcomms")
OURS = ["AgentId", "AgentStatus", "AgentState"]


async def new_namespace(client: Client, *, fillers: int = 0) -> str:
    """A namespace of its own, holding `fillers` Keyword attributes of someone else's."""
    name = f"ns-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    for i in range(fillers):
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=name,
                search_attributes={f"Other{i}": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
            )
        )
    return name


def in_namespace(client: Client, namespace: str) -> Client:
    return Client(client.service_client, namespace=namespace)


async def custom_attributes(client: Client, namespace: str) -> set[str]:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return set(listed.custom_attributes)


async def run(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, argv, env=env_for(home), capture_output=True, text=True, timeout=60
    )


def cli_home(tmp_path: Path, address: str, namespace: str) -> Path:
    home = tmp_path / "home"
    write_config(
        home,
        {
            "temporal": {"address": address, "namespace": namespace},
            "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'agentcomms.db'}"},
        },
    )
    return home


async def test_a_namespace_that_allows_it_gets_them_added(
    temporal_env: WorkflowEnvironment,
) -> None:
    client = temporal_env.client
    namespace = await new_namespace(client)
    assert not set(OURS) & await custom_attributes(client, namespace)
    await ensure_search_attributes(in_namespace(client, namespace))
    assert set(OURS) <= await custom_attributes(client, namespace)


@pytest.mark.timeout(90)
async def test_a_refusing_namespace_stops_the_worker_with_the_commands_that_work(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client = temporal_env.client
    address = client.service_client.config.target_host
    namespace = await new_namespace(client, fillers=10)
    home = cli_home(tmp_path, address, namespace)

    worker = await run(home, AGENTCOMMS, "worker")
    assert worker.returncode == 1, worker.stdout
    said = worker.stderr
    assert (
        f"Namespace {namespace} at {address} lacks the search attributes AgentId, AgentStatus, AgentState"
    ) in said
    assert "refused to add them (Unable to create search attributes: cannot have more than 10" in (
        said
    )
    assert "every mailbox fails" in said
    for name in OURS:
        assert (
            f"temporal operator search-attribute create --address {address} --namespace "
            f"{namespace} --name {name} --type Keyword"
        ) in said

    doctor = await run(home, AGENTCOMMS, "doctor", "--json")
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "search attributes")
    assert not check["ok"]
    assert (
        check["detail"]
        == f"namespace {namespace} lacks the search attributes AgentId, AgentStatus, AgentState"
    )
    assert "--name AgentStatus --type Keyword" in check["fix"]


async def test_the_commands_doctor_prints_add_them(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client = temporal_env.client
    address = client.service_client.config.target_host
    namespace = await new_namespace(client)
    home = cli_home(tmp_path, address, namespace)

    async def doctor_check() -> dict[str, Any]:
        done = await run(home, AGENTCOMMS, "doctor", "--json")
        checks = json.loads(done.stdout)["checks"]
        return next(c for c in checks if c["name"] == "search attributes")

    check = await doctor_check()
    assert not check["ok"]
    commands = [part for part in check["fix"].split("`")[1::2] if part.startswith("temporal ")]
    assert len(commands) == len(OURS), check["fix"]
    for command in commands:  # run exactly what a user would paste
        argv = shlex.split(command)
        assert argv[0] == "temporal"
        done = await run(home, str(temporal_binary()), *argv[1:])
        assert done.returncode == 0, done.stderr
    assert set(OURS) <= await custom_attributes(client, namespace)
    assert await doctor_check() == {
        "name": "search attributes",
        "ok": True,
        "detail": "search attributes AgentId, AgentStatus, AgentState exist",
        "fix": None,
        "warn": False,
    }


def test_temporal_cloud_is_told_tcld_and_no_key_is_printed() -> None:
    cloud = TemporalConfig(
        address="my-ns.a1b2c.tmprl.cloud:7233", namespace="my-ns.a1b2c", api_key="s3cret-key"
    )
    assert search_attribute_commands(cloud, OURS) == [
        "tcld namespace search-attributes add --namespace my-ns.a1b2c "
        "--search-attribute AgentId=Keyword --search-attribute AgentStatus=Keyword "
        "--search-attribute AgentState=Keyword"
    ]
    with_key = TemporalConfig(address="temporal.internal:7233", api_key="s3cret-key")
    [first, _, _] = search_attribute_commands(with_key, OURS)
    assert first == (
        "temporal operator search-attribute create --address temporal.internal:7233 "
        '--namespace default --api-key "$TEMPORAL_API_KEY" --name AgentId --type Keyword'
    )
    mtls = TemporalConfig(
        address="temporal.internal:7233",
        tls_server_ca=Path("/etc/ac/ca.pem"),
        tls_client_cert=Path("/etc/ac/my cert.pem"),
        tls_client_key=Path("/etc/ac/key.pem"),
        tls_server_name="temporal.internal",
    )
    [first, _, _] = search_attribute_commands(mtls, OURS)
    assert first == (
        "temporal operator search-attribute create --address temporal.internal:7233 "
        "--namespace default --tls-ca-path /etc/ac/ca.pem --tls-cert-path '/etc/ac/my cert.pem' "
        "--tls-key-path /etc/ac/key.pem --tls-server-name temporal.internal "
        "--name AgentId --type Keyword"
    )


async def test_the_error_type_is_raised_in_process(temporal_env: WorkflowEnvironment) -> None:
    client = temporal_env.client
    namespace = await new_namespace(client, fillers=10)
    with pytest.raises(SearchAttributesMissing, match="--name AgentId --type Keyword"):
        await ensure_search_attributes(in_namespace(client, namespace))
