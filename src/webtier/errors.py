"""Every error webtier raises derives from :class:`WebtierError`.

Catch ``WebtierError`` to handle them all; catch a subclass to react to one
kind. Errors from redis-py never escape untranslated: they become the
``__cause__`` of one of these.
"""

from __future__ import annotations


class WebtierError(Exception):
    """Root of every webtier error."""


class InvalidInput(WebtierError, ValueError):
    """An argument was refused before anything was sent to Redis.

    Nothing was stored. ``field`` names the argument, ``value`` is a short
    rendering of what was passed (long values are cut so logs stay readable).
    """

    def __init__(self, field: str, problem: str, value: object = None) -> None:
        self.field = field
        self.problem = problem
        self.value = _short(value)
        super().__init__(field, problem, value)

    def __str__(self) -> str:
        shown = "" if self.value is None else f" (got {self.value})"
        return f"{self.field}: {self.problem}{shown}"


class ConfigError(WebtierError, ValueError):
    """A setting is out of range or inconsistent; raised when it is built."""


class SettingsMismatch(ConfigError):
    """Settings that decide where data lives differ from those the
    deployment stored in Redis (its first writer's): run this way, the
    process would look for data where there is none, or write it where no
    one else looks. Nothing was done.

    ``differences`` holds ``(setting, value here, value in Redis)`` for
    each; ``fix`` says what to do. See docs/deployment-settings.md.
    """

    def __init__(
        self,
        differences: tuple[tuple[str, object, object], ...],
        fix: str = "run with the deployment's settings, "
        "or change them deliberately with `webtier settings adopt`",
    ) -> None:
        self.differences, self.fix = differences, fix
        super().__init__(differences, fix)

    def __str__(self) -> str:
        each = ", ".join(
            f"{name} is {here} here, {there} in Redis" for name, here, there in self.differences
        )
        return (
            f"settings differ from the deployment's (stored by the first writer): "
            f"{each}; {self.fix}"
        )


class RedisUnavailable(WebtierError):
    """Redis could not be reached or did not answer in time, after the retries
    (and within the time limit) the operation allows. The cause is chained.

    Raised as such, nothing the operation writes was applied, so it may be
    retried; the one exception is an idempotent operation over several slots
    (``invalidate_all``, a worker's step), which may have applied some of its
    parts: repeating it is safe and completes them. The subclasses say
    otherwise: :class:`OutcomeUnknown` (maybe applied) and
    :class:`PartiallyApplied` (some parts applied).
    """


class OutcomeUnknown(RedisUnavailable):
    """A write was sent, but its reply was lost: it may or may not have been
    applied.

    webtier never re-sends a write that is not safe to repeat (a counter
    increment, for one), so it is applied at most once. An idempotent write
    (a cart line's count, an invalidation) was tried again until the retries
    or the time limit ran out; it too may have been applied (a hung server
    runs what it had read once it resumes), and repeating it is safe.
    """


class PartiallyApplied(OutcomeUnknown):
    """An operation that writes to several slots (several nodes of a Cluster)
    was cut off midway: some of its parts took effect, others did not.

    ``applied`` names the parts that took effect, ``not_applied`` those that
    provably did not, ``unknown`` those whose reply was lost. Repeating the
    operation would repeat the applied parts; docs/reliability.md lists every
    such operation and its parts.
    """

    def __init__(
        self,
        operation: str,
        applied: tuple[str, ...],
        not_applied: tuple[str, ...] = (),
        unknown: tuple[str, ...] = (),
    ) -> None:
        self.operation = operation
        self.applied, self.not_applied, self.unknown = applied, not_applied, unknown
        super().__init__(operation, applied, not_applied, unknown)

    def __str__(self) -> str:
        parts = [f"applied: {', '.join(self.applied)}"]
        if self.not_applied:
            parts.append(f"not applied: {', '.join(self.not_applied)}")
        if self.unknown:
            parts.append(f"unknown: {', '.join(self.unknown)}")
        cause = f" ({self.__cause__})" if self.__cause__ is not None else ""
        return f"{self.operation} was cut off midway; {'; '.join(parts)}{cause}"


class ServerError(WebtierError):
    """Redis answered with an error webtier did not expect (a key of the wrong
    type in webtier's keyspace, a script error, out of memory...)."""


class EmbeddedServerError(WebtierError):
    """The embedded redis-server could not be found or started."""


class MissingExtra(WebtierError, ImportError):
    """A feature needs an optional dependency that is not installed; the
    message names the extra that brings it (``pip install 'webtier[sql]'``).

    Also an ``ImportError``, so code that guards an optional import with
    ``except ImportError`` keeps working.
    """

    def __init__(self, extra: str, purpose: str, missing: str) -> None:
        self.extra = extra
        self.purpose = purpose
        super().__init__(
            f"webtier[{extra}] is needed for {purpose}: pip install 'webtier[{extra}]'",
            name=missing,
        )


class SourceError(WebtierError):
    """A row source (the SQL database, or your loader) failed to load rows.

    Cached copies were left as they were; the rows are retried with backoff.
    The cause (an SQLAlchemy error, say) is chained.
    """


class SourceConflict(ConfigError):
    """A row source's name already caches rows of another database: two
    sources of one name would read each other's cached rows. Nothing was
    read or written."""


def _short(value: object, limit: int = 80) -> str | None:
    if value is None:
        return None
    try:
        text = repr(value)
    except Exception:  # an int past Python's digit limit, or a repr that fails
        if isinstance(value, int):
            return f"an int of {value.bit_length()} bits"
        return f"a {type(value).__name__} that cannot be shown"
    return text if len(text) <= limit else f"{text[: limit - 12]}... ({len(text)} chars)"


class BadToken(InvalidInput):
    """The token is not one webtier could have issued; nothing was sent."""


class UnknownSession(WebtierError, LookupError):
    """No live session has this token (never issued, logged out, expired or
    cleaned); nothing was written."""


class UserMismatch(WebtierError):
    """The session belongs to another user: switching users goes through
    ``login`` (which rotates the token); nothing was written."""


class DataTooLarge(InvalidInput):
    """A session data value, or all of them together, would exceed the
    configured size or field limits; nothing was written."""


class CartLimit(InvalidInput):
    """A cart line count or the number of lines would exceed the configured
    limits; nothing was written."""


class LateCookie(WebtierError, RuntimeError):
    """A login or logout after the response's headers went out: the cookie
    could not follow, so nothing was changed."""


class OutOfStock(WebtierError):
    """The demo shop could not place an order: an item has fewer units in
    stock than the order asks for; nothing was written."""

    def __init__(self, item_id: int, wanted: int) -> None:
        self.item_id, self.wanted = item_id, wanted
        super().__init__(f"item {item_id}: fewer than {wanted} in stock; no order was placed")


class DatabaseUnavailable(WebtierError):
    """The demo shop's SQL database could not be used: locked by another
    writer past the shop's wait, gone, or broken. Its transaction was rolled
    back; the cause is chained."""
