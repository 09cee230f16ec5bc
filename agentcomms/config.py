"""The one configuration file: ``~/.agentcomms/config.json``.

Every process (up, worker, gateway, mcp, the CLI) reads the same file through :func:`load_config`.
``AGENTCOMMS_HOME`` moves the whole directory, which is how tests get a private one.

How a file becomes a :class:`Config`, in order:

1. The file must not be accessible to other users (it holds secrets): mode 0600, and the home
   directory must not be writable by others. Anything looser is refused with the ``chmod`` to run.
2. It is parsed as JSON. Keys starting with ``//`` are comments and are dropped, at any depth.
3. ``${VAR}`` and ``${VAR:-default}`` are expanded inside string values (never keys), after parsing,
   so a value holding quotes or backslashes cannot break the JSON. ``:-`` takes the default when
   the variable is unset *or empty*, as in the shell. ``$${`` is a literal ``${``; a ``$`` not
   followed by ``{`` is just a dollar sign. An unset variable without a default is an error.
4. ``AGENTCOMMS_<SECTION>__<KEY>[__<KEY>…]`` environment variables override keys (see
   :func:`env_overrides`); the seed's ``AGENTCALL_*`` names work too, with lower precedence.
5. The result is validated; an empty string in a key whose default is ``null`` means "not set".

Every problem found is reported at once, one line each, naming the file (or the environment
variable), the key path and what was expected — and never echoing a secret.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import socket
import stat
import tempfile
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from agentcomms.errors import ConfigError

HOME_ENV = "AGENTCOMMS_HOME"
DEFAULT_HOME = Path("~/.agentcomms")
CONFIG_FILENAME = "config.json"
ENV_PREFIX = "AGENTCOMMS_"
LEGACY_ENV_PREFIX = "AGENTCALL_"  # the seed's names; read, but AGENTCOMMS_* wins
COMMENT_PREFIX = "//"
REDACTED = "***"


def agentcomms_home() -> Path:
    """The agentcomms directory: ``$AGENTCOMMS_HOME`` or ``~/.agentcomms``."""
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()


def default_config_path() -> Path:
    return agentcomms_home() / CONFIG_FILENAME


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


class Section(BaseModel):
    # A misspelt key is a mistake the user wants to hear about, not a silently ignored one.
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _empty_string_means_unset(cls, data: Any) -> Any:
        # `"token": "${TELEGRAM_BOT_TOKEN:-}"` with the variable unset must read as "no token",
        # not as a configured empty token (and an empty path must not become ".").
        if not isinstance(data, dict):
            return data
        unset = [
            name
            for name, info in cls.model_fields.items()
            if data.get(name) == "" and not info.is_required() and info.default is None
        ]
        return {**data, **dict.fromkeys(unset)} if unset else data


class ServerConfig(Section):
    """The gateway: its Unix socket and (later) its HTTP listener for provider webhooks."""

    socket_path: Path | None = Field(
        default=None, description="Unix socket of the gateway; <home>/daemon.sock when unset"
    )
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8765, ge=0, le=65535)

    def socket(self) -> Path:
        return (self.socket_path or agentcomms_home() / "daemon.sock").expanduser()


class TemporalConfig(Section):
    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "agentcomms"
    embedded: bool = Field(
        default=True,
        description="Start `temporal server start-dev` when nothing answers at a local address",
    )
    ui_port: int = Field(default=8233, ge=1, le=65535)
    db_filename: Path | None = Field(
        default=None, description="Dev server database file; <home>/temporal.db when unset"
    )
    api_key: SecretStr | None = None
    tls: bool = False

    def dev_db_path(self) -> Path:
        return (self.db_filename or agentcomms_home() / "temporal.db").expanduser()


class DatabaseConfig(Section):
    url: str | None = Field(
        default=None, description="SQLAlchemy async URL; a SQLite file in the home when unset"
    )

    def resolved_url(self) -> str:
        return self.url or f"sqlite+aiosqlite:///{agentcomms_home() / 'agentcomms.db'}"


class AgentConfig(Section):
    """An agent registered when agentcomms starts."""

    type: Literal["tmux"] = "tmux"
    target: str = Field(description="tmux target session:window.pane")
    socket: str | None = Field(default=None, description="tmux socket path (-S); default server")
    host: str | None = Field(default=None, description="host whose worker types into the pane")
    interrupt_key: str = "C-c"
    submit_delay_ms: int = Field(default=150, ge=0, le=10_000)
    token: SecretStr | None = Field(default=None, description="bearer token for MCP over HTTP")


class DiscordConfig(Section):
    enabled: bool = False
    token: SecretStr | None = None
    base_url: str | None = None


class TelegramConfig(Section):
    enabled: bool = False
    token: SecretStr | None = None
    base_url: str | None = None


class TwilioMessagingConfig(Section):
    enabled: bool = False
    account_sid: str | None = None
    auth_token: SecretStr | None = None
    from_number: str | None = None
    base_url: str | None = None


class LocalChatConfig(Section):
    enabled: bool = True


class ChatConfig(Section):
    discord: DiscordConfig = DiscordConfig()
    telegram: TelegramConfig = TelegramConfig()
    whatsapp: TwilioMessagingConfig = TwilioMessagingConfig()
    sms: TwilioMessagingConfig = TwilioMessagingConfig()
    local: LocalChatConfig = LocalChatConfig()
    channels: dict[str, str] = Field(
        default_factory=dict, description='channel id -> agent id, e.g. "telegram:42": "backend"'
    )
    allowed_senders: dict[str, list[str]] = Field(
        default_factory=dict,
        description="provider -> sender ids allowed to reach agents; everyone else is rejected",
    )


class PhoneConfig(Section):
    provider: str = "twilio"
    account_sid: str | None = None
    auth_token: SecretStr | None = None
    from_number: str | None = None
    to_number: str | None = None
    base_url: str | None = None


class TTSConfig(Section):
    provider: str = "elevenlabs"
    api_key: SecretStr | None = None
    voice: str = "Rachel"
    model: str = "eleven_turbo_v2_5"
    base_url: str | None = None


class STTConfig(Section):
    provider: str = "deepgram"
    api_key: SecretStr | None = None
    model: str = "nova-2"
    language: str = "en-US"
    silence_ms: int = Field(default=800, ge=0)
    base_url: str | None = None


class VoiceConfig(Section):
    phone: PhoneConfig = PhoneConfig()
    tts: TTSConfig = TTSConfig()
    stt: STTConfig = STTConfig()
    public_url: str | None = None
    transcript_timeout_s: float = Field(default=180, gt=0)
    ring_timeout_s: float = Field(default=30, gt=0)
    sms_fallback_message: str = (
        "I tried calling but couldn't reach you. Here's my message: {message}"
    )


class LoggingConfig(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    file: Path | None = None

    @field_validator("level", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        # "info" is what people type; keep anything else as written so the error quotes it.
        if isinstance(value, str) and value.upper() in typing.get_args(
            cls.model_fields["level"].annotation
        ):
            return value.upper()
        return value


class Config(Section):
    server: ServerConfig = ServerConfig()
    temporal: TemporalConfig = TemporalConfig()
    database: DatabaseConfig = DatabaseConfig()
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    chat: ChatConfig = ChatConfig()
    voice: VoiceConfig = VoiceConfig()
    logging: LoggingConfig = LoggingConfig()


def host_name() -> str:
    """This machine's name, as used in host task queues (``agentcomms-host-<host>``)."""
    return socket.gethostname()


# --- Loading -----------------------------------------------------------------------------------

Loc = tuple[str | int, ...]


@dataclass
class ResolvedConfig:
    """A loaded configuration and where its values came from (what ``config show`` prints)."""

    config: Config
    path: Path
    file_exists: bool
    file_keys: set[Loc] = field(default_factory=set)  # every key path present in the file
    env: dict[Loc, str] = field(default_factory=dict)  # key path -> variable that set it

    def source(self, loc: Loc) -> str:
        """``env NAME``, ``file`` or ``default`` for a key path."""
        for i in range(len(loc), 0, -1):
            if loc[:i] in self.env:
                return f"env {self.env[loc[:i]]}"
        return "file" if loc in self.file_keys else "default"


def load_config(path: Path | None = None) -> Config:
    """Read the configuration: the file, then ``AGENTCOMMS_*`` overrides, then defaults.

    ``path`` defaults to :func:`default_config_path`; a missing default file means defaults (plus
    environment overrides), a missing explicit ``path`` is an error. Every problem raises
    :class:`ConfigError` with one line per problem and no secret in it.
    """
    return resolve_config(path).config


def resolve_config(path: Path | None = None) -> ResolvedConfig:
    """:func:`load_config`, keeping track of where each value came from."""
    explicit = path is not None
    path = (path or default_config_path()).expanduser()
    label = str(path)
    data: dict[str, Any] = {}
    exists = path.exists()
    if exists:
        _check_private(path)
        data = _parse(_read(path), label)
    elif explicit:
        raise ConfigError(
            f"{path} does not exist; create it with `agentcomms config init -o {path}`"
        )

    expander = _Expander(label)
    data = expander.walk(data, ())
    file_keys = set(_locs(data, ()))
    env = _apply_env_overrides(data, os.environ)

    problems = list(expander.problems)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            loc: Loc = tuple(err["loc"])
            if any(loc[: len(bad)] == bad for bad in expander.failed):
                continue  # already reported: the reference could not be expanded
            where = next((env[loc[:i]] for i in range(len(loc), 0, -1) if loc[:i] in env), label)
            problems.append(f"{where}: {_dotted(loc)}: {_describe(err, loc)}{expander.note(loc)}")
        if not problems:  # pragma: no cover - every validation error maps to a line above
            raise ConfigError(f"{label}: invalid configuration") from None
    if problems:
        raise ConfigError("\n".join(problems))
    return ResolvedConfig(config, path, exists, file_keys, env)


def _check_private(path: Path) -> None:
    """Refuse a config others could read (it holds secrets) or swap (in a home they can write)."""
    if os.name != "posix":
        return
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        home = agentcomms_home()
        in_home = path.parent.resolve() == home.resolve()
        home_mode = stat.S_IMODE(home.stat().st_mode) if in_home else 0
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if mode & 0o077:
        raise ConfigError(
            f"{path} is accessible to other users (mode {mode:04o}) and may hold secrets; "
            f"make it private with: chmod 600 {_quote(path)}"
        )
    if home_mode & 0o022:
        raise ConfigError(
            f"{home} is writable by other users (mode {home_mode:04o}), who could replace the "
            f"config; fix it with: chmod 700 {_quote(home)}"
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


class _JsonObject(dict[str, Any]):
    """A parsed JSON object that remembers keys it saw twice (json keeps the last, silently)."""

    duplicates: list[str]


def _object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj and not key.startswith(COMMENT_PREFIX):
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _parse(text: str, label: str) -> dict[str, Any]:
    if not text.strip():
        raise ConfigError(
            f"{label}: the file is empty; write {{}} for all defaults, "
            "or run `agentcomms config init --force` for a starter config"
        )
    try:
        value = json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        # Only the parser's own words and the position: echoing the line could echo a secret.
        hint = ""
        if text[exc.pos : exc.pos + 2] in ("//", "/*") or text[exc.pos : exc.pos + 1] == "#":
            hint = ' (JSON has no comments; use a "//" key instead: {"//": "a note"})'
        elif exc.msg.startswith("Expecting property name"):
            hint = " (a trailing comma before }, or a key without double quotes?)"
        raise ConfigError(
            f"{label}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{label}: expected a JSON object {{...}} at the top, got {_kind(value)}")
    return value


# `$${` is a literal `${`; `${NAME}` or `${NAME:-default}`; any other `${` is malformed.
_REFERENCE = re.compile(
    r"\$\$\{|\$\{(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\})?"
)


class _Expander:
    """Drops comment keys, reports duplicate keys and expands ``${VAR}`` in string values."""

    def __init__(self, label: str, environ: Mapping[str, str] = os.environ) -> None:
        self.label = label
        self.environ = environ
        self.problems: list[str] = []
        self.failed: list[Loc] = []
        self.used: dict[Loc, list[str]] = {}

    def walk(self, value: Any, loc: Loc) -> Any:
        if isinstance(value, dict):
            for key in getattr(value, "duplicates", ()):
                self._problem((*loc, key), "duplicate key (only the last would count); keep one")
            return {
                k: self.walk(v, (*loc, k))
                for k, v in value.items()
                if not k.startswith(COMMENT_PREFIX)
            }
        if isinstance(value, list):
            return [self.walk(v, (*loc, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "${" in value:
            return self._expand(value, loc)
        return value

    def _expand(self, text: str, loc: Loc) -> str:
        failed = False

        def replace(m: re.Match[str]) -> str:
            nonlocal failed
            if m[0] == "$${":
                return "${"
            name, default = m["name"], m["default"]
            if name is None:
                failed = True
                self._problem(
                    loc,
                    f"malformed ${{...}} at character {m.start() + 1}: write ${{NAME}} or "
                    "${NAME:-default}, or $${ for a literal ${",
                )
                return ""
            self.used.setdefault(loc, []).append(name)
            value = self.environ.get(name)
            if default is not None and not value:
                return default
            if value is None:
                failed = True
                self._problem(
                    loc,
                    f"environment variable {name} is not set "
                    f"(use ${{{name}:-default}} for a default)",
                )
                return ""
            return value

        result = _REFERENCE.sub(replace, text)
        if failed:
            self.failed.append(loc)
        return result

    def _problem(self, loc: Loc, message: str) -> None:
        self.problems.append(f"{self.label}: {_dotted(loc)}: {message}")

    def note(self, loc: Loc) -> str:
        names = self.used.get(loc)
        return f" (after expanding {', '.join(f'${{{n}}}' for n in names)})" if names else ""


def env_overrides(
    environ: Mapping[str, str] | None = None,
) -> list[tuple[str, tuple[str, ...], str]]:
    """The variables that override keys, as ``(name, key path, raw value)``, in applying order.

    ``AGENTCOMMS_TEMPORAL__ADDRESS`` sets ``temporal.address``: the part after the prefix is split
    on ``__`` and lower-cased. Only names whose first part is a top-level section of
    :class:`Config` count, so ``AGENTCOMMS_HOME``, ``AGENTCOMMS_AGENT_ID`` or
    ``AGENTCOMMS_TEST_DATABASE_URL`` (which configure other things) are never mistaken for keys.
    ``AGENTCALL_*`` names are applied first, so ``AGENTCOMMS_*`` wins; within each, shallower
    keys first, so ``…_CHAT__TELEGRAM='{"enabled": true}'`` and ``…_CHAT__TELEGRAM__TOKEN`` combine.
    """
    environ = os.environ if environ is None else environ
    found: list[tuple[int, int, str, tuple[str, ...], str]] = []
    for name, raw in environ.items():
        for rank, prefix in enumerate((LEGACY_ENV_PREFIX, ENV_PREFIX)):
            if not name.startswith(prefix):
                continue
            parts = tuple(name[len(prefix) :].lower().split("__"))
            if parts[0] in Config.model_fields and all(parts):
                found.append((rank, len(parts), name, parts, raw))
    found.sort()
    return [(name, parts, raw) for _, _, name, parts, raw in found]


def env_override_hints(environ: Mapping[str, str] | None = None) -> list[str]:
    """Variables that look like overrides but are ignored, with the name that was probably meant."""
    environ = os.environ if environ is None else environ
    hints = []
    for name in sorted(environ):
        for prefix in (ENV_PREFIX, LEGACY_ENV_PREFIX):
            rest = name[len(prefix) :] if name.startswith(prefix) else ""
            first = rest.lower().split("__")[0]
            section = next((s for s in Config.model_fields if first.startswith(s + "_")), None)
            if section:
                meant = f"{prefix}{section.upper()}__{rest[len(section) + 1 :]}"
                hints.append(
                    f"{name} is ignored: keys are separated by a double underscore, as in {meant}"
                )
    return hints


def _apply_env_overrides(data: dict[str, Any], environ: Mapping[str, str]) -> dict[Loc, str]:
    applied: dict[Loc, str] = {}
    for name, parts, raw in env_overrides(environ):
        target: dict[str, Any] = data
        loc: Loc = ()
        for part in parts[:-1]:
            key = _match_key(target, part)
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target, loc = target[key], (*loc, key)
        key = _match_key(target, parts[-1])
        loc = (*loc, key)
        target[key] = _env_value(raw, _annotation_at(loc))
        applied = {k: v for k, v in applied.items() if k[: len(loc)] != loc}
        applied[loc] = name
    return applied


def _match_key(obj: dict[str, Any], part: str) -> str:
    # Variable names are upper case; an agent id in the file may not be.
    if part in obj:
        return part
    return next((k for k in obj if k.lower() == part), part)


def _env_value(raw: str, annotation: Any) -> Any:
    """A string key takes the text as is (so 007 stays "007"); others parse it as JSON if they can."""
    if _is_text(annotation):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _is_text(annotation: Any) -> bool:
    if typing.get_origin(annotation) is Literal:
        return all(isinstance(a, str) for a in typing.get_args(annotation))
    return annotation in (str, SecretStr, Path)


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _annotation_at(loc: Loc) -> Any:
    """The declared type at a key path, or None where the path leaves the schema."""
    annotation: Any = Config
    for part in loc:
        annotation = _unwrap_optional(annotation)
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(part) if isinstance(part, str) else None
            if info is None:
                return None
            annotation = info.annotation
        elif origin is dict:
            annotation = typing.get_args(annotation)[1]
        elif origin is list:
            annotation = typing.get_args(annotation)[0]
        else:
            return None
    return _unwrap_optional(annotation)


def _locs(value: Any, loc: Loc) -> Iterator[Loc]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*loc, k)
            yield from _locs(v, (*loc, k))


# --- Describing problems without leaking secrets ------------------------------------------------

_SECRET_KEY = re.compile(r"token|api_?key|passw(or)?d|secret|credential|private_key", re.IGNORECASE)

_EXPECTED = {
    "int_parsing": "expected an integer",
    "int_type": "expected an integer",
    "int_from_float": "expected an integer",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected a string",
    "path_type": "expected a path (a string)",
    "model_type": "expected an object {...}",
    "model_attributes_type": "expected an object {...}",
    "dict_type": "expected an object {...}",
    "list_type": "expected a list [...]",
}
_BOUNDS = {
    "greater_than_equal": ">=",
    "less_than_equal": "<=",
    "greater_than": ">",
    "less_than": "<",
}


def is_secret_key(name: str) -> bool:
    """Whether a key's name says it holds a secret (token, auth_token, api_key, password…)."""
    return bool(_SECRET_KEY.search(name))


def _describe(err: Any, loc: Loc) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown key" + _suggest(loc)
    if kind == "missing":
        return "required key is missing"
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
    elif kind == "literal_error":
        expected = f"expected {ctx['expected']}"
    elif kind in _BOUNDS:
        bound = next(iter(ctx.values()), "?")
        expected = f"expected a number {_BOUNDS[kind]} {bound}"
    else:
        msg: str = err["msg"]
        expected = msg[:1].lower() + msg[1:]
    secret = any(isinstance(p, str) and is_secret_key(p) for p in loc) or (
        _annotation_at(loc) is SecretStr
    )
    return f"{expected}, got {_show_input(err.get('input'), secret=secret)}"


def _suggest(loc: Loc) -> str:
    parent = _annotation_at(loc[:-1])
    if not (isinstance(parent, type) and issubclass(parent, BaseModel)):
        return ""
    known = list(parent.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(known)})"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _show_input(value: Any, *, secret: bool) -> str:
    if secret:
        return f"{_kind(value)} (value hidden)"
    if isinstance(value, str):
        text = json.dumps(mask_url_password(value), ensure_ascii=False)
        return text if len(text) <= 60 else text[:56] + '..."'
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return _kind(value)


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(top level)"


def _quote(path: Path) -> str:
    return shlex.quote(str(path))


# --- Showing a configuration ---------------------------------------------------------------------

_URL_PASSWORD = re.compile(r"(?<=://)([^/:@\s]*):([^/@\s]+)@")


def mask_url_password(text: str) -> str:
    """``postgresql://u:hunter2@db/x`` -> ``postgresql://u:***@db/x``."""
    return _URL_PASSWORD.sub(lambda m: f"{m[1]}:{REDACTED}@", text)


def redacted(config: BaseModel) -> dict[str, Any]:
    """The configuration as plain JSON data with every secret replaced by ``"***"``.

    Redacted: every ``SecretStr``, any value under a key whose name looks secret (token,
    auth_token, api_key, password, secret…) and the password in a URL. ``null`` stays ``null``,
    so an unset secret reads as unset.
    """
    result: dict[str, Any] = _redact(config.model_dump(), None)
    return result


def _redact(value: Any, key: str | None) -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, key) for v in value]
    if value is None:
        return None
    if isinstance(value, SecretStr) or (key is not None and is_secret_key(key)):
        return REDACTED
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return mask_url_password(value)
    return value
