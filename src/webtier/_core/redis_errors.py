"""redis-py's exceptions as webtier's: the one place that says what an
error raised by redis-py (or the OS) means to a caller of webtier."""

from __future__ import annotations

from redis import exceptions as rx

from webtier.errors import ConfigError, RedisUnavailable, ServerError, WebtierError

# By the start of redis-py's message, what a command it refused means.
_MEANINGS: tuple[tuple[str, type[WebtierError], str], ...] = (
    ("Cluster mode is not enabled", ConfigError, "not a Redis Cluster: use a redis:// URL"),
    (
        "DB index is out of range",
        ConfigError,
        "no such database number on this server: use one below its 'databases' setting "
        "(16 unless configured), as in redis://host:6379/0",
    ),
)


def as_webtier_error(error: BaseException) -> WebtierError:
    """What a redis-py exception (or an OS error) that reached webtier means,
    as a :class:`~webtier.errors.WebtierError` whose cause is ``error``.

    Nothing is lost: the original stays chained as ``__cause__``. Failures to
    reach a server, including redis-py's cluster errors (which do not derive
    from ``RedisError``), become :class:`RedisUnavailable`.
    """
    if isinstance(error, WebtierError):
        return error
    message = str(error)
    translated: WebtierError
    for start, kind, meaning in _MEANINGS:
        if start in message:
            translated = kind(f"{meaning} ({message})")
            break
    else:
        if isinstance(error, rx.AuthenticationError | rx.AuthorizationError):
            translated = RedisUnavailable(f"Redis refused the credentials: {message}")
        elif isinstance(
            error, rx.ConnectionError | rx.TimeoutError | rx.RedisClusterException | OSError
        ) or (isinstance(error, rx.ClusterError) and not isinstance(error, rx.ResponseError)):
            translated = RedisUnavailable(f"Redis cannot be reached: {message}")
        else:
            translated = ServerError(f"Redis or redis-py refused a command: {message}")
    translated.__cause__ = error
    return translated
