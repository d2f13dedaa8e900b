"""What webtier's own client needs to open a connection, from a URL and
keyword options: where, over what (TCP, unix socket, TLS), as whom, which
database, which protocol, and how much one connection holds.

The URL is read by redis-py's own parser (``redis.connection.parse_url``),
so the same URLs and query parameters mean the same things on both clients.
"""

from __future__ import annotations

import dataclasses
import ssl
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.connection import parse_url

from webtier._core.protocol import Command
from webtier.errors import ConfigError

# Options of redis-py's clients that mean nothing here: its pool, its retry,
# its health checks. webtier's client keeps one connection per node, retries
# by webtier's rules, and notices a dead connection as soon as the loop does.
_IGNORED = frozenset(
    {
        "health_check_interval",
        "retry",
        "retry_on_timeout",
        "retry_on_error",
        "max_connections",
        "pool_timeout",
        "socket_keepalive",
        "socket_keepalive_options",
        "connection_class",
        "encoding",
        "encoding_errors",
        "decode_responses",
    }
)
_TLS_OPTIONS = (
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_path",
    "ssl_ca_data",
    "ssl_check_hostname",
    "ssl_password",
    "ssl_min_version",
    "ssl_ciphers",
)
# A connection's bounds: past them a burst waits for room (memory stays bounded).
MAX_IN_FLIGHT = 8192  # commands queued or sent, not yet answered
MAX_QUEUED_BYTES = 8 * 1024 * 1024  # packed, not yet written
_CERT_REQS = {
    "none": ssl.CERT_NONE,
    "optional": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


@dataclass(frozen=True)
class Settings:
    """How to open and greet one connection (the same for every node of a
    cluster but its address)."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None  # a unix socket
    tls: ssl.SSLContext | None = None
    check_hostname: bool = False
    username: str | None = None
    password: str | None = None
    db: int = 0
    protocol: int = 2
    client_name: str | None = None
    connect_timeout: float | None = 2.0  # seconds to connect and be greeted
    read_timeout: float | None = 5.0  # seconds without a byte while replies are due
    connections: int = 1  # per node
    max_in_flight: int = MAX_IN_FLIGHT  # commands per connection
    max_queued_bytes: int = MAX_QUEUED_BYTES  # unwritten bytes per connection
    # The server must say it is a master before a command is sent (a
    # Sentinel's: a sentinel behind a failover names the old one).
    master_only: bool = False
    extras: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        return self.path or f"{self.host}:{self.port}"

    def at(self, host: str, port: int) -> Settings:
        """The same settings for another node."""
        return _replace(self, host=host, port=port, path=None)

    def greeting(self) -> tuple[Command, ...]:
        """The commands a new connection sends, and waits for, before any
        other: at least a PING. A server that accepts the connection but
        does not answer (stopped, hung) is found here, before a write is
        put on it: that write then fails as "not sent", not "maybe applied"."""
        commands: list[Command] = []
        if self.protocol == 3:
            hello: list[Any] = ["HELLO", 3]
            if self.password is not None:
                hello += ["AUTH", self.username or "default", self.password]
            if self.client_name:
                hello += ["SETNAME", self.client_name]
            commands.append(tuple(hello))
        else:
            if self.password is not None:
                user = () if self.username is None else (self.username,)
                commands.append(("AUTH", *user, self.password))
            if self.client_name:
                commands.append(("CLIENT", "SETNAME", self.client_name))
        if self.db:
            commands.append(("SELECT", self.db))
        if self.master_only and self.protocol == 2:
            commands.append(self.role_check())
        return tuple(commands) or (("PING",),)

    def role_check(self) -> Command:
        """The command whose reply says the server's role: ``HELLO``, not
        ``ROLE``, which a user without ``@admin`` may not send; it keeps
        the connection's protocol (RESP3's greeting sends it anyway)."""
        return ("HELLO", self.protocol)


def _replace(settings: Settings, **changes: Any) -> Settings:
    return dataclasses.replace(settings, **changes)


def _tls_context(options: dict[str, Any]) -> tuple[ssl.SSLContext, bool]:
    reqs = options.get("ssl_cert_reqs", "required")
    if isinstance(reqs, str):
        if reqs.lower() not in _CERT_REQS:
            raise ConfigError(f"ssl_cert_reqs must be none, optional or required, got {reqs!r}")
        reqs = _CERT_REQS[reqs.lower()]
    context = ssl.create_default_context(
        cafile=options.get("ssl_ca_certs"),
        capath=options.get("ssl_ca_path"),
        cadata=options.get("ssl_ca_data"),
    )
    check = bool(options.get("ssl_check_hostname", False)) and reqs != ssl.CERT_NONE
    context.check_hostname = check
    context.verify_mode = reqs
    if options.get("ssl_certfile"):
        context.load_cert_chain(
            options["ssl_certfile"], options.get("ssl_keyfile"), options.get("ssl_password")
        )
    if options.get("ssl_min_version") is not None:
        context.minimum_version = options["ssl_min_version"]
    if options.get("ssl_ciphers"):
        context.set_ciphers(options["ssl_ciphers"])
    return context, check


def _number(options: dict[str, Any], name: str, default: Any) -> Any:
    value = options.pop(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{name} must be a positive number, got {value!r}")
    return value


def settings_from(url: str, options: dict[str, Any]) -> Settings:
    """Settings for a redis://, rediss:// or unix:// ``url``, with keyword
    ``options`` over the URL's query. An option webtier's client does not
    know is refused, rather than silently ignored."""
    try:
        merged: dict[str, Any] = {**parse_url(url), **options}  # type: ignore[no-untyped-call]
    except ValueError as error:
        raise ConfigError(f"bad Redis URL {url!r}: {error}") from error
    tls = merged.get("connection_class") is redis.SSLConnection or merged.pop("ssl", False)
    if merged.get("decode_responses"):
        raise ConfigError(
            "webtier's client returns bytes: drop decode_responses, or pass "
            "client='redis-py' to connect_async for a redis-py client"
        )
    context, check = _tls_context(merged) if tls else (None, False)
    for name in _TLS_OPTIONS:
        merged.pop(name, None)
    for name in _IGNORED:
        merged.pop(name, None)
    protocol = int(merged.pop("protocol", 2) or 2)
    if protocol not in (2, 3):
        raise ConfigError(f"protocol must be 2 or 3, got {protocol!r}")
    db = merged.pop("db", 0) or 0
    if isinstance(db, bool) or not isinstance(db, int) or db < 0:
        raise ConfigError(f"the database number must be an integer >= 0, got {db!r}")
    settings = Settings(
        host=merged.pop("host", "localhost") or "localhost",
        port=int(merged.pop("port", 6379) or 6379),
        path=merged.pop("path", None),
        tls=context,
        check_hostname=check,
        username=merged.pop("username", None) or None,
        password=merged.pop("password", None),
        db=db,
        protocol=protocol,
        client_name=merged.pop("client_name", None),
        connect_timeout=_number(merged, "socket_connect_timeout", 2.0),
        read_timeout=_number(merged, "socket_timeout", 5.0),
        connections=int(_number(merged, "connections", 1)),
        max_in_flight=int(_number(merged, "max_in_flight", MAX_IN_FLIGHT)),
        max_queued_bytes=int(_number(merged, "max_queued_bytes", MAX_QUEUED_BYTES)),
    )
    if merged:
        raise ConfigError(
            f"webtier's client does not take {', '.join(sorted(merged))}; pass "
            "client='redis-py' to connect_async for a redis-py client"
        )
    return settings
