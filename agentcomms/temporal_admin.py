"""What an operator runs by hand on a Temporal server that agentcomms may not change itself.

Temporal Cloud (and a cluster whose API key or certificate is not an admin's) refuses to add
search attributes; a mailbox that sets one the namespace lacks fails every workflow task, so the
commands to add them are spelt out whole, for `tcld` on Temporal Cloud and for the `temporal`
CLI elsewhere, with the connection flags this configuration uses (never the API key itself).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from agentcomms.address import split_address
from agentcomms.config import TemporalConfig

__all__ = ["is_temporal_cloud", "search_attribute_commands", "search_attributes_missing"]


def is_temporal_cloud(cfg: TemporalConfig) -> bool:
    host, _ = split_address(cfg.address)
    return host.endswith(".tmprl.cloud")


def search_attribute_commands(cfg: TemporalConfig, names: Sequence[str]) -> list[str]:
    """The command lines that add the Keyword search attributes `names` to the namespace."""
    if is_temporal_cloud(cfg):
        flags = " ".join(f"--search-attribute {name}=Keyword" for name in names)
        return [f"tcld namespace search-attributes add --namespace {cfg.namespace} {flags}"]
    connection = _temporal_cli_flags(cfg)
    return [
        f"temporal operator search-attribute create {connection} --name {name} --type Keyword"
        for name in names
    ]


def _temporal_cli_flags(cfg: TemporalConfig) -> str:
    flags = ["--address", cfg.address, "--namespace", cfg.namespace]
    paths = {
        "--tls-ca-path": cfg.tls_server_ca,
        "--tls-cert-path": cfg.tls_client_cert,
        "--tls-key-path": cfg.tls_client_key,
    }
    for flag, path in paths.items():
        if path is not None:
            flags += [flag, str(path.expanduser())]
    if cfg.tls_server_name:
        flags += ["--tls-server-name", cfg.tls_server_name]
    quoted = " ".join(shlex.quote(f) for f in flags)
    if cfg.api_key is not None:
        # The key stays where it is: the command names a variable for the reader to set.
        quoted += ' --api-key "$TEMPORAL_API_KEY"'
    elif cfg.uses_tls() and not any(p is not None for p in paths.values()):
        quoted += " --tls"
    return quoted


def search_attributes_missing(
    cfg: TemporalConfig, names: Sequence[str], *, why: str, known: bool = True
) -> str:
    """A paragraph for `up`, `worker` and `doctor`: which attributes, why, and the commands."""
    what = ", ".join(names)
    if known:
        head = f"Namespace {cfg.namespace} at {cfg.address} lacks the search attributes {what}"
    else:
        head = (
            f"Could not check whether namespace {cfg.namespace} at {cfg.address} has the search "
            f"attributes {what}"
        )
    lines = [
        f"{head}, and refused to add them ({why}). Mailboxes set them, so without them every "
        "mailbox fails. Add them once, as a namespace admin:",
        *(f"  {command}" for command in search_attribute_commands(cfg, names)),
    ]
    if is_temporal_cloud(cfg):
        lines.append(
            f"  (or in the Temporal Cloud UI: Namespaces → {cfg.namespace} → Custom Search "
            "Attributes, type Keyword)"
        )
    return "\n".join(lines)
