"""Servers of the fault suite's own: a standalone redis-server that keeps
every acknowledged write on disk (AOF, ``appendfsync always``), over TCP or
TLS, and a test certificate made with openssl."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from tests.helpers.servers import BINARIES
from webtier.testing import RedisServer, free_port

# Every write acknowledged is on disk first: a kill -9 loses nothing acknowledged.
DURABLE = ("--appendonly", "yes", "--appendfsync", "always")


@dataclass(frozen=True)
class Certificate:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files)."""

    cert: str
    key: str


def make_certificate(directory: Path) -> Certificate:
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return Certificate(str(cert), str(key))


class TlsRedisServer(RedisServer):
    """A redis-server that speaks TLS only, on ``port``; clients check its
    certificate against the test CA (the certificate itself)."""

    @property
    def ca_file(self) -> str:
        return self.extra[self.extra.index("--tls-ca-cert-file") + 1]

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.ca_file}"

    def client(self, **options: Any) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, ssl=True, ssl_ca_certs=self.ca_file, **options
        )


def start_server(*args: str, tls: Certificate | None = None) -> RedisServer:
    """A standalone server of the default binary; over TLS only with ``tls``."""
    if tls is None:
        return RedisServer.start(BINARIES["standalone"], *args)
    port = free_port()
    return TlsRedisServer.start(BINARIES["standalone"], *tls_only(tls, port), *args, port=port)


def tls_only(tls: Certificate, port: int) -> tuple[str, ...]:
    """redis-server options serving TLS only, on ``port``, and replicating
    over TLS (a replica's, a sentinel's connections)."""
    return (
        "--port", "0", "--tls-port", str(port),
        "--tls-cert-file", tls.cert, "--tls-key-file", tls.key,
        "--tls-ca-cert-file", tls.cert, "--tls-auth-clients", "no",
        "--tls-replication", "yes",
    )  # fmt: skip


@contextlib.contextmanager
def stopped(server: RedisServer) -> Iterator[None]:
    """The server's process stopped (SIGSTOP): connections open, no answer."""
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
