"""Where a session lives: its shard, its keys, the user index, and the
scripts every session operation runs.

Login sessions and recently viewed items (Redis in Action 2.1), without
the book's cleaner race.

Layout, per session, in the shard ``crc32(token) % shards``:

* one hash per session, ``<prefix>:{s:<shard>}:t:<token>``. One-letter
  fields are the session's own: user (``u``), created (``c``, server ms),
  public id (``i``), views so far (``n``), viewed items held (``m``), when
  the key expires (``e``, server ms: touches move it only when due); longer
  ones are a letter and a name: viewed items (``v<item>`` -> the number of
  its latest view), cart lines (``k<item>``) and data (``d<name>``, JSON).
  One key per session: it expires as a whole (idle, absolute or backstop)
  and leaves nothing behind;
* one recency index per shard, ``<prefix>:{s:<shard>}:recent``, a zset of the
  shard's tokens by last-seen time (server µs), in the same slot as its
  sessions, so a touch and a cleaner's check-and-delete are single scripts;
* one set per user, ``<prefix>:{u:<shard of user>}:<user>``, of the user's
  tokens: a hint, which readers check against each session's user and prune,
  and which expires a backstop after the user's last new session.

Login rotation picks the new token in the old one's shard, so the move is
one script in one slot. See docs/sessions.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Protocol

from webtier._core.keys import shard_of
from webtier._core.protocol import (
    Command,
    Reply,
    Request,
    pairs,
    text,
    write,
)
from webtier._core.scripts import Script
from webtier.config import Config, SessionSettings
from webtier.sessions.tokens import (
    check_token,
)

TOUCH = Script.load(__package__, "session_touch", prelude="session_prelude")
LOGIN = Script.load(__package__, "session_login", prelude="session_prelude")
LOAD = Script.load(__package__, "session_load", prelude="session_prelude")
END = Script.load(__package__, "session_end")
UPDATE = Script.load(__package__, "session_update")
SAVE = Script.load(__package__, "session_save", prelude="session_prelude")
ROTATE = Script.load(__package__, "session_rotate", prelude="session_prelude")
CLEAN = Script.load(__package__, "session_clean")
PICK = Script.load(__package__, "session_pick")
# A full session holds up to `viewed` + this many items between two trims.
VIEWED_SLACK = TOUCH.constant("SLACK")


class ViewCounting(Protocol):
    """How a touch counts its item's view (:class:`webtier.ranking.views.ViewCounter`)."""

    @property
    def inline(self) -> bool: ...

    def requests(self, item: str) -> tuple[Request, ...]: ...

    def upkeep(self, item: str) -> tuple[Request, ...]: ...


_NEW_ATTEMPTS = 5  # a fresh 256-bit token is never taken; this only bounds a broken RNG


# -- where a session lives -----------------------------------------------------------------


class Place:
    """The keys of one session (the token is checked before this is built)."""

    __slots__ = ("key", "recent", "route", "shard", "token")

    def __init__(self, cfg: Config, token: str) -> None:
        self.token = token
        self.shard = shard_of(token, cfg.sessions.shards)
        self.route = cfg.keys.session_shard(self.shard)
        self.key = cfg.keys.session(self.route, token)
        self.recent = cfg.keys.session_recent(self.route)


def place(cfg: Config, token: object) -> Place:
    return Place(cfg, check_token(token, strict=cfg.sessions.strict))


# The backstop only bounds memory, so a touch may set it up to this share of
# itself late and rewrites it only when due (session_touch.lua).
BACKSTOP_LATENESS = 64  # a 64th: 11 h 15 min of the default 30 days


def timeouts(settings: SessionSettings) -> tuple[int, int, int, int]:
    """(idle, absolute, backstop, how late the backstop may be set) in ms, as
    the scripts take them."""
    idle, absolute, backstop = settings.millis
    return idle, absolute, backstop, backstop // BACKSTOP_LATENESS


def _user_index(cfg: Config, user: str) -> str:
    return cfg.keys.user_sessions(user, cfg.sessions.shards)


def index_user(cfg: Config, user: str, token: str) -> Request:
    """List ``token`` among ``user``'s sessions (idempotent)."""
    key = _user_index(cfg, user)
    _, _, backstop = cfg.sessions.millis
    # A hash, not a set: a user's few tokens stay in a listpack (about 120
    # bytes less a session than a set of strings, which Redis 7.0 keeps as a
    # hash table).
    return write(key, ("HSET", key, token, ""), ("PEXPIRE", key, backstop), idempotent=True)


def _unindex(cfg: Config, by_user: Iterable[tuple[str, str]]) -> tuple[Request, ...]:
    """Requests dropping (user, token) pairs from the users' indexes: one
    pipeline per shard of the users' indexes."""
    commands: dict[str, list[Command]] = defaultdict(list)
    for user, token in by_user:
        key = _user_index(cfg, user)
        commands[key[: key.index("}") + 1]].append(("HDEL", key, token))
    return tuple(write(route, *found, idempotent=True) for route, found in commands.items())


def fields_of(reply: Reply) -> dict[str, bytes]:
    return {text(name): value for name, value in pairs(reply)}


def _user(value: Reply) -> str | None:
    return None if value is None or value == b"" else text(value)


def named(fields: Mapping[str, bytes], kind: str) -> dict[str, bytes]:
    """The fields of one kind (``v`` viewed, ``k`` cart, ``d`` data), by name.
    The session's own fields have one letter, so they are never among them."""
    return {name[1:]: value for name, value in fields.items() if len(name) > 1 and name[0] == kind}
