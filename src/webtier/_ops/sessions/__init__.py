"""Login sessions and recently viewed items (Redis in Action 2.1) as
operations, one idea per module:

- ``layout``: where a session lives, its keys, the user index, the scripts;
- ``core``: new, check, touch, info, data and viewed items;
- ``users``: login rotation and cart merge, logout, a user's sessions;
- ``cleaner``: choosing and removing stale sessions without the book's race.
"""

from webtier._ops.sessions.cleaner import clean
from webtier._ops.sessions.core import (
    check,
    data,
    data_of,
    discard,
    info,
    load,
    new,
    recently_viewed,
    stats,
    touch,
    touch_request,
    update,
    update_fields,
    viewed_of,
)
from webtier._ops.sessions.layout import (
    PICK,
    TOUCH,
    VIEWED_SLACK,
    Place,
    ViewCounting,
    fields_of,
    place,
    timeouts,
)
from webtier._ops.sessions.users import (
    cart_of,
    login,
    logout,
    merge_carts,
    of_user,
    revoke,
    revoke_all,
)

__all__ = [
    "PICK",
    "TOUCH",
    "VIEWED_SLACK",
    "Place",
    "ViewCounting",
    "cart_of",
    "check",
    "clean",
    "data",
    "data_of",
    "discard",
    "fields_of",
    "info",
    "load",
    "login",
    "logout",
    "merge_carts",
    "new",
    "of_user",
    "place",
    "recently_viewed",
    "revoke",
    "revoke_all",
    "stats",
    "timeouts",
    "touch",
    "touch_request",
    "update",
    "update_fields",
    "viewed_of",
]
