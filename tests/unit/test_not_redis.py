"""The verdict on a connection's first bytes, with no server."""

from __future__ import annotations

import pytest

from webtier._core.not_redis import not_redis
from webtier.errors import ConfigError


@pytest.mark.parametrize(
    "first",
    [b"+PONG\r\n", b"-NOAUTH Authentication required.\r\n", b"%1\r\n", b"", b"*2\r\n"],
)
def test_redis_replies_and_silence_are_not_judged(first: bytes) -> None:
    assert not_redis("h:1", first) is None


@pytest.mark.parametrize(
    ("first", "looks"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n", "it looks like HTTP"),
        (b"<!DOCTYPE HTML>\n<html>", "it looks like HTTP"),
        (b"SSH-2.0-OpenSSH_9.2\r\n", "it looks like SSH"),
        (b"\x15\x03\x03\x00\x02\x02\x32", "it looks like TLS: use rediss://"),
        (b"220 mail ESMTP\r\n", "it looks like SMTP or FTP"),
        (b"\x00\x01binary", "its first bytes: b'\\x00\\x01binary'"),
    ],
)
def test_other_protocols_are_named(first: bytes, looks: str) -> None:
    error = not_redis("127.0.0.1:8000", first)
    assert isinstance(error, ConfigError)
    assert str(error) == f"127.0.0.1:8000 answered, but not as Redis ({looks})"
