"""Real mail servers for the email provider's tests: Dovecot (IMAP, with IDLE) and Exim (SMTP),
from Debian's packages (`.ci/run` installs them), started in a temporary folder on private
loopback ports.

Exim takes mail over SMTP on three ports (plain, STARTTLS, implicit TLS), with AUTH PLAIN for
the accounts below, and hands every message to Dovecot's LMTP socket; Dovecot keeps each
account's Maildir and serves it over IMAP (plain with STARTTLS, and implicit TLS). Both present
a certificate from a private CA (:func:`tests.support.tls_proxy.make_pki`), so a client that
names the CA as its ``cafile`` verifies them and one that does not is refused.

Plus-addressing works as on any real server: ``agents+backend@example.test`` is delivered to
``agents@example.test``, its ``To`` header unchanged. As root, the mail store belongs to
``nobody`` (Dovecot gives no mailbox to uid 0); otherwise to the user running the tests.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.serve import free_port
from tests.support.tls_proxy import Pki, make_pki

DOMAIN = "example.test"
PASSWORD = "mail-secret-9"
AUTHSERV_ID = f"mail.{DOMAIN}"
ACCOUNTS = ("agents", "human", "stranger")
STARTUP_S = 15.0


def _binary(name: str) -> str | None:
    # /usr/sbin is not on every user's PATH.
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")


def binaries_missing() -> str | None:
    """Why the servers cannot start here (for a skip that says what to install), or None."""
    for name, package in (
        ("dovecot", "dovecot-imapd dovecot-lmtpd"),
        ("exim4", "exim4-daemon-light"),
    ):
        if _binary(name) is None:
            return f"{name} is not installed: apt-get install {package}"
    return None


@dataclass
class MailServers:
    directory: Path
    pki: Pki
    imap_port: int  # plain, STARTTLS offered; on 127.0.0.2 the same without IDLE
    imaps_port: int  # implicit TLS
    smtp_port: int  # plain, STARTTLS offered
    smtps_port: int  # implicit TLS
    _processes: list[subprocess.Popen[bytes]]

    @staticmethod
    def address(account: str, detail: str | None = None) -> str:
        return f"{account}+{detail}@{DOMAIN}" if detail else f"{account}@{DOMAIN}"

    def log(self) -> str:
        """Both servers' logs, for a failing test's message."""
        parts = []
        for name in (
            "dovecot.log",
            "exim/mainlog",
            "exim/paniclog",
            "exim/rejectlog",
            "servers.err",
        ):
            path = self.directory / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        for process in self._processes:
            if process.stdin is not None:  # the watchdog: done
                process.stdin.close()
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _mail_owner() -> tuple[int, int, str]:
    if os.getuid() != 0:
        user = pwd.getpwuid(os.getuid())
        return user.pw_uid, user.pw_gid, user.pw_name
    nobody = pwd.getpwnam("nobody")
    return nobody.pw_uid, nobody.pw_gid, "nobody"


def _dovecot_conf(d: Path, pki: Pki, imap: int, imaps: int) -> str:
    uid, gid, user = _mail_owner()
    # Not root: Dovecot runs its login and internal processes as the same user (no setuid).
    unprivileged = (
        ""
        if os.getuid() == 0
        else f"default_internal_user = {user}\ndefault_login_user = {user}\n"
        f"default_internal_group = {pwd.getpwnam(user).pw_gid}\n"
    )
    return f"""\
instance_name = agentcomms-test-{imap}
base_dir = {d}/run
state_dir = {d}/state
log_path = {d}/dovecot.log
info_log_path = {d}/dovecot.log
{unprivileged}protocols = imap lmtp
listen = 127.0.0.1 127.0.0.2
ssl = yes
ssl_cert = <{pki.server_cert}
ssl_key = <{pki.server_key}
disable_plaintext_auth = no
auth_mechanisms = plain login
recipient_delimiter = +
lmtp_save_to_detail_mailbox = no
first_valid_uid = {uid}
mail_location = maildir:{d}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {d}/users
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={d}/mail/%u allow_all_users=yes
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps}
    ssl = yes
  }}
  inet_listener imap_no_idle {{
    address = 127.0.0.2
    port = {imap}
  }}
}}
# The same server on 127.0.0.2 offers no IDLE, as some servers do not: a client must poll.
local 127.0.0.2 {{
  protocol imap {{
    imap_capability = IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE LITERAL+
  }}
}}
service lmtp {{
  unix_listener lmtp {{
    mode = 0666
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
service pop3-login {{
  chroot =
}}
"""


def _exim_conf(d: Path, pki: Pki, smtp: int, smtps: int) -> str:
    checks = " ".join(
        f"{{eq{{$auth2}}{{{a}@{DOMAIN}}}}}" for a in ACCOUNTS
    )  # any of the accounts, with the one password
    return f"""\
primary_hostname = mail.{DOMAIN}
keep_environment =
qualify_domain = {DOMAIN}
spool_directory = {d}/exim/spool
log_file_path = {d}/exim/%slog
pid_file_path = {d}/exim/exim.pid
local_interfaces = <; 127.0.0.1
daemon_smtp_ports = {smtp} : {smtps}
tls_on_connect_ports = {smtps}
tls_advertise_hosts = *
tls_certificate = {pki.server_cert}
tls_privatekey = {pki.server_key}
auth_advertise_hosts = *
domainlist local_domains = {DOMAIN}
acl_smtp_rcpt = acl_rcpt
acl_smtp_data = acl_data
queue_only = false
split_spool_directory = false

begin acl
acl_rcpt:
  accept domains = +local_domains
  accept authenticated = *
  deny message = relay not permitted

# The receiving server's verdict, as a real one writes it: what came with the message is
# dropped, and its own header says whether the sender proved the address (here by SMTP AUTH,
# standing in for SPF, which needs DNS).
acl_data:
  warn remove_header = Authentication-Results
  warn authenticated = *
       add_header = :at_start:Authentication-Results: {AUTHSERV_ID}; \\
         spf=pass smtp.mailfrom=$authenticated_id
  warn !authenticated = *
       add_header = :at_start:Authentication-Results: {AUTHSERV_ID}; \\
         spf=fail smtp.mailfrom=$sender_address
  accept

begin routers
local:
  driver = accept
  domains = +local_domains
  transport = to_dovecot

begin transports
to_dovecot:
  driver = lmtp
  socket = {d}/run/lmtp

begin authenticators
plain:
  driver = plaintext
  public_name = PLAIN
  server_prompts = :
  server_condition = ${{if and {{{{or {{{checks}}}}}{{eq{{$auth3}}{{{PASSWORD}}}}}}}}}
  server_set_id = $auth2
"""


def _wait_for_port(port: int, deadline: float, servers: MailServers) -> None:
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"mail server did not listen on {port}:\n{servers.log()}")
        time.sleep(0.05)


@contextlib.contextmanager
def mail_servers() -> Iterator[MailServers]:
    """Dovecot and Exim, listening on loopback until the block ends.

    Their folder is a new one of their own under the system's temporary folder, not pytest's:
    Dovecot's and Exim's own users must reach it, and pytest's folders are the test user's alone.
    """
    directory = Path(tempfile.mkdtemp(prefix="agentcomms-mail-"))
    directory.chmod(0o755)
    pki = make_pki(directory / "pki")
    # Dovecot's and Exim's own users read the key; the folder is the test's own.
    pki.server_key.chmod(0o644)
    uid, gid, _ = _mail_owner()
    for sub in ("run", "state", "mail", "exim"):
        (directory / sub).mkdir(exist_ok=True)
    os.chown(directory / "mail", uid, gid)
    # Exim writes its logs and spool as its own user (Debian-exim), even when started by root.
    (directory / "exim").chmod(0o777)
    (directory / "users").write_text(
        "".join(f"{a}@{DOMAIN}:{{PLAIN}}{PASSWORD}\n" for a in ACCOUNTS)
    )
    imap, imaps, smtp, smtps = (free_port() for _ in range(4))
    (directory / "dovecot.conf").write_text(_dovecot_conf(directory, pki, imap, imaps))
    (directory / "exim.conf").write_text(_exim_conf(directory, pki, smtp, smtps))
    servers = MailServers(directory, pki, imap, imaps, smtp, smtps, [])
    # Both servers write what they say at start-up (before their logs open) to one file.
    err = (directory / "servers.err").open("wb")
    servers._processes.append(
        subprocess.Popen(
            [_binary("dovecot") or "dovecot", "-F", "-c", str(directory / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    )
    servers._processes.append(
        subprocess.Popen(
            [_binary("exim4") or "exim4", "-C", str(directory / "exim.conf"), "-bdf", "-q1m"],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    )
    # A watchdog ends both servers when this process ends, however it ends (a killed run must
    # leave no mail server behind): its stdin closes with this process, and `read` returns.
    pids = " ".join(str(p.pid) for p in servers._processes)
    servers._processes.append(
        subprocess.Popen(
            ["sh", "-c", f"read _; kill {pids} 2>/dev/null; exit 0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
    )
    try:
        deadline = time.monotonic() + STARTUP_S
        for port in (imap, imaps, smtp, smtps):
            _wait_for_port(port, deadline, servers)
        while not (directory / "run" / "lmtp").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Dovecot's LMTP socket did not appear:\n{servers.log()}")
            time.sleep(0.05)
        yield servers
    finally:
        servers.stop()
        err.close()
        shutil.rmtree(directory, ignore_errors=True)
