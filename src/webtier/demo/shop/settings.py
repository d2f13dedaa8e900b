"""How the demo shop runs: :class:`ShopSettings`. No I/O, no environment."""

from __future__ import annotations

from dataclasses import dataclass

from webtier.config.validate import is_int, is_seconds, require

# The items of the flash sale page: their rows are refreshed from the
# database every second by the worker (the book's scheduled row cache), so
# the page shows stock at most about a second old without querying SQL.
FLASH_SALE_ITEMS: tuple[int, ...] = (3, 5, 8, 13, 21, 34)

# The cookie the session middleware carries the token in: a request without
# it is an anonymous visitor, whose item pages the page cache may answer.
SESSION_COOKIE = "webtier_session"

MIN_SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class ShopSettings:
    """The shop's own settings; webtier's are the tier's :class:`~webtier.Config`.

    ``secret`` signs the session cookie and the CSRF token (at least 32
    bytes; ``None``: a random one per process, so every process of a
    deployment needs the same one given). ``session_cap`` is the most live
    sessions the cleaner keeps (``None``: the tier's
    ``SessionSettings.limit``). ``run_jobs`` runs the maintenance jobs
    (session cap, counter cleanup, row refresh, ranking rescale) in the
    app's lifespan, as the demo does; in production ``webtier worker`` runs
    them. ``dashboard`` serves webtier's dashboard at ``/dashboard`` and
    the Prometheus exposition at ``/metrics``, outside the shop's own
    middleware (their polls are not shop pages); they have no credentials
    here, so turn it off wherever the shop is reachable beyond this machine
    (``webtier demo`` does) and run ``webtier dashboard --token`` instead.
    """

    items: int = 100_000  # item ids are 1..items
    run_jobs: bool = True
    session_cap: int | None = None  # live sessions kept by the cleaner
    flash_refresh: float = 1.0  # seconds between two refreshes of a flash-sale row
    view_flush: float = 1.0  # seconds item views are summed in process before reaching Redis
    secret: bytes | None = None
    most_viewed: int = 8  # items on the home page's "most viewed" shelf
    sql_threads: int = 16  # database calls run at once (SQLite and small pools like few)
    sql_wait: float = 2.0  # seconds a SQLite statement waits for another writer's lock: then 503
    dashboard: bool = True  # /dashboard and /metrics (see above)
    # Rows of the most viewed items the jobs keep cached ahead of their views
    # (as many as the page cache admits by default); 0: none.
    warm_rows: int = 10_000
    # Replicas that must hold a cart change's or a checkout's Redis writes
    # before its page answers (WAIT, within DURABLE_WAIT); fewer: a 503
    # (the writes are on the master, and repeating them is safe). 0: none.
    durable: int = 0

    def __post_init__(self) -> None:
        require(is_int(self.items) and self.items >= 1, "items must be an int >= 1")
        for name in ("run_jobs", "dashboard"):
            require(isinstance(getattr(self, name), bool), f"{name} must be True or False")
        require(
            self.session_cap is None or (is_int(self.session_cap) and self.session_cap >= 1),
            "session_cap must be None or an int >= 1",
        )
        for name in ("flash_refresh", "view_flush", "sql_wait"):
            require(is_seconds(getattr(self, name), 0.01, 3600), f"{name} must be 0.01 to 3600 s")
        require(
            self.secret is None
            or (isinstance(self.secret, bytes) and len(self.secret) >= MIN_SECRET_BYTES),
            f"secret must be None or at least {MIN_SECRET_BYTES} bytes",
        )
        require(is_int(self.warm_rows) and self.warm_rows >= 0, "warm_rows must be an int >= 0")
        require(is_int(self.durable) and self.durable >= 0, "durable must be an int >= 0")
        for name in ("most_viewed", "sql_threads"):
            require(is_int(getattr(self, name)) and getattr(self, name) >= 1, f"{name} >= 1")
