"""Where agentcomms keeps its files, and how a private file is written there.

``AGENTCOMMS_HOME`` moves the whole directory, which is how tests get a private one.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path

from agentcomms.errors import ConfigError

HOME_ENV = "AGENTCOMMS_HOME"
DEFAULT_HOME = Path("~/.agentcomms")
CONFIG_FILENAME = "config.json"


def agentcomms_home() -> Path:
    """The agentcomms directory: ``$AGENTCOMMS_HOME`` or ``~/.agentcomms``."""
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()


def default_config_path() -> Path:
    return agentcomms_home() / CONFIG_FILENAME


def default_socket() -> Path:
    """The gateway's socket when ``server.socket_path`` is not set."""
    return agentcomms_home() / "daemon.sock"


def ensure_home() -> Path:
    """Create the home directory (mode 0700) if needed and return it.

    An existing home that we own but others can reach is tightened to 0700: it holds the
    database, sockets and secrets. Call this before writing anything into the home.
    """
    home = agentcomms_home()
    if home.exists() and not home.is_dir():
        raise ConfigError(f"{home} is not a directory; remove it or point {HOME_ENV} elsewhere")
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = home.stat()
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            home.chmod(0o700)
    except OSError as exc:
        raise ConfigError(f"cannot create {home}: {exc.strerror or exc}") from None
    return home


def write_private_file(path: Path, text: str, *, overwrite: bool = False) -> None:
    """Write ``text`` to ``path`` atomically with mode 0600 (whatever the umask or the old mode).

    The directory is created 0700 when missing (the home through :func:`ensure_home`). Without
    ``overwrite`` an existing file is left alone and :class:`ConfigError` is raised.
    """
    import tempfile  # here: a client that only reads the config never writes a file

    path = path.expanduser()
    if path.exists() and not overwrite:
        raise ConfigError(f"{path} already exists; pass --force to overwrite it")
    parent = path.parent
    try:
        if parent.resolve() == agentcomms_home().resolve():
            ensure_home()
        else:
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # mkstemp creates the file 0600, so the secret is never readable by others, not even
        # for a moment; os.replace makes a reader see the old file or the new, never half of one.
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None


def private_secret(path: Path, what: str) -> str:
    """A random secret kept in ``path`` (0600), made at first use; ``what`` names it in errors.

    Several processes may start at once: the first to link its file into place wins and all
    read that one.
    """
    if not path.exists():
        _create_secret(path, what)
    try:
        info = path.stat()
        secret = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc}") from None
    if os.name == "posix" and stat.S_IMODE(info.st_mode) & 0o077:
        raise ConfigError(
            f"{path} ({what}) is readable by other users; make it private with: chmod 600 {path}"
        )
    if not secret:
        raise ConfigError(
            f"{path} ({what}) is empty; delete it and a new one is made at next start"
        )
    return secret


def _create_secret(path: Path, what: str) -> None:
    import secrets
    import tempfile

    if path.parent.resolve() == agentcomms_home().resolve():
        ensure_home()
    try:
        # Written aside (mkstemp makes it 0600), then linked into place: link never replaces an
        # existing file, so two processes starting at once end up reading the same secret.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def host_name() -> str:
    """This machine's name, as used in host task queues (``agentcomms-host-<host>``)."""
    return socket.gethostname()
