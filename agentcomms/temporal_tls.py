"""TLS to Temporal: the SDK's `TLSConfig` built from the `temporal.tls*` keys, and a sentence
for each way a TLS connection fails (an untrusted certificate, a refused client certificate,
TLS spoken to a plain-text server, and the reverse).

Temporal Cloud takes an API key over TLS with the system's CAs; a self-hosted cluster usually
has its own CA (`tls_server_ca`) and may ask every client for a certificate (mTLS).
"""

from __future__ import annotations

from pathlib import Path

from temporalio.service import TLSConfig

from agentcomms.config import TemporalConfig
from agentcomms.errors import ConfigError

__all__ = ["tls_config", "tls_problem"]

_WHAT = {
    "tls_server_ca": "the CA certificate that signed the server's certificate",
    "tls_client_cert": "this process's client certificate",
    "tls_client_key": "the client certificate's private key",
}


def tls_config(cfg: TemporalConfig) -> TLSConfig | bool:
    """What `Client.connect(tls=…)` takes: False for plain text, True for TLS with the system's
    CAs, or a `TLSConfig` carrying the configured CA, client certificate and server name."""
    if not cfg.uses_tls():
        return False
    if not (cfg.tls_server_ca or cfg.tls_client_cert or cfg.tls_server_name):
        return True
    return TLSConfig(
        server_root_ca_cert=_read_pem(cfg.tls_server_ca, "tls_server_ca"),
        client_cert=_read_pem(cfg.tls_client_cert, "tls_client_cert"),
        client_private_key=_read_pem(cfg.tls_client_key, "tls_client_key"),
        domain=cfg.tls_server_name,
    )


def _read_pem(path: Path | None, key: str) -> bytes | None:
    if path is None:
        return None
    path = path.expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"temporal.{key}: cannot read {path} ({exc.strerror or exc}); it must be the PEM "
            f"file of {_WHAT[key]}, readable by this process."
        ) from None
    if b"-----BEGIN " not in data:
        raise ConfigError(
            f"temporal.{key}: {path} is not a PEM file (no '-----BEGIN' line); it must be "
            f"{_WHAT[key]}, in PEM form."
        )
    return data


HUNG_UP = ("brokenpipe", "connectionreset", "connectionclosed")


def tls_problem(cfg: TemporalConfig, error: str, *, final: bool = True) -> str | None:
    """A sentence saying what to fix when the SDK's connection `error` is a TLS failure; None
    when it is something else (nothing listening, a server still starting).

    Read from rustls's and hyper's error names, which the SDK passes through as text. A
    plain-text connection cut short is only blamed on TLS when `final` (no more retries): a
    server that is starting may cut one too.
    """
    at = f"Temporal at {cfg.address}"
    if "InvalidCertificate(UnknownIssuer)" in error or "InvalidCertificate(BadSignature)" in error:
        trusted = (
            f"the CA in temporal.tls_server_ca ({cfg.tls_server_ca})"
            if cfg.tls_server_ca
            else "this system's trusted CAs"
        )
        return (
            f"{at} presented a TLS certificate not signed by {trusted}. Set "
            "temporal.tls_server_ca to the PEM file of the CA that signed the server's "
            "certificate."
        )
    if "InvalidCertificate(NotValidForName" in error:
        return (
            f"{at} presented a TLS certificate that is not valid for "
            f"{cfg.tls_server_name or cfg.address.rpartition(':')[0]!r}. Set "
            "temporal.tls_server_name to a name the certificate carries."
        )
    if "InvalidCertificate(Expired" in error:
        return f"{at} presented an expired TLS certificate; renew the server's certificate."
    if "InvalidCertificate" in error:
        return f"{at} presented a TLS certificate that was refused ({_cause(error)})."
    if "InvalidContentType" in error:
        return (
            f"{at} does not speak TLS, but temporal.tls is on. Set temporal.tls to false for "
            "a server without TLS (such as the dev server), or check temporal.address."
        )
    # A hang-up reads "Connection reset by peer", "Kind(ConnectionReset)", "broken pipe" or
    # hyper's "connection closed", depending on where in the client's stack it was seen.
    spaceless = error.lower().replace(" ", "")
    hung_up = any(cut in spaceless for cut in HUNG_UP)
    if cfg.uses_tls() and ("close_notify" in error or (final and hung_up)):
        # With TLS 1.3 a server that refuses the client's certificate (or its absence) hangs
        # up right after the handshake, so the first call sees only a closed connection (or,
        # racing it, a reset).
        held = (
            f"the client certificate {cfg.tls_client_cert}"
            if cfg.tls_client_cert
            else "no client certificate"
        )
        return (
            f"{at} closed the TLS connection after the handshake: it refused {held}. A server "
            "that requires mTLS needs temporal.tls_client_cert and temporal.tls_client_key, "
            "a certificate signed by a CA that the server trusts."
        )
    if final and not cfg.uses_tls() and hung_up:
        return (
            f"{at} hung up on a plain-text connection; if it expects TLS (Temporal Cloud, "
            "most clusters), set temporal.tls to true (and temporal.api_key or the "
            "temporal.tls_client_cert / tls_client_key pair)."
        )
    return None


def _cause(error: str) -> str:
    start = error.find("InvalidCertificate")
    return error[start : error.find(")", start) + 1] if start >= 0 else error
