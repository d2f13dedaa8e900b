"""Deprecated: the demo shop's database is :mod:`webtier.demo.shopdb`."""

from webtier._core.compat import moved

__getattr__ = moved(
    __name__,
    {
        name: f"webtier.demo.shopdb:{name}"
        for name in ("metadata", "inventory", "inventory_source", "item", "create")
    },
)
