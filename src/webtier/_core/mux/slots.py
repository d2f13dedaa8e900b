"""A Redis Cluster's slot map, read from ``CLUSTER SLOTS`` (pure: no I/O).

Each of the 16,384 slots maps to the address of the master that serves it;
replicas are listed as known nodes, to ask for the map when masters are
down, and are never written to. A slot no master serves (mid-failover) maps
to nothing: a send there fails as "not sent", and the wire retries it after
a backoff and a new map.
"""

from __future__ import annotations

from typing import Any

from redis.crc import key_slot

SLOTS = 16384


def slot_of(route: str) -> int:
    """The slot of a key or ``prefix:{tag}`` route (hash tags as Redis reads them)."""
    return key_slot(route.encode())


class SlotMap:
    """Slot -> master address (``host:port``), and every node the map names."""

    __slots__ = ("masters", "nodes", "owners")

    def __init__(self, owners: list[str | None], masters: set[str], nodes: list[tuple[str, int]]):
        self.owners = owners
        self.masters = masters
        self.nodes = nodes  # (host, port) of every node named, masters first

    @classmethod
    def parse(cls, reply: Any, asked: tuple[str, int]) -> SlotMap:
        """The map in a ``CLUSTER SLOTS`` reply, given by the node at ``asked``
        (a node may name itself with an empty host: the address we used)."""
        owners: list[str | None] = [None] * SLOTS
        masters: set[str] = set()
        named: dict[str, tuple[str, int]] = {}
        replicas: dict[str, tuple[str, int]] = {}
        for entry in reply:
            start, end, master, *others = entry
            host, port = _address(master, asked)
            name = f"{host}:{port}"
            masters.add(name)
            named[name] = (host, port)
            for slot in range(int(start), int(end) + 1):
                owners[slot] = name
            for replica in others:
                rhost, rport = _address(replica, asked)
                replicas[f"{rhost}:{rport}"] = (rhost, rport)
        nodes = list(named.values()) + [a for n, a in replicas.items() if n not in named]
        return cls(owners, masters, nodes)

    def owner(self, route: str) -> str | None:
        return self.owners[slot_of(route)]


def _address(node: Any, asked: tuple[str, int]) -> tuple[str, int]:
    host = node[0].decode() if isinstance(node[0], bytes) else str(node[0])
    return (host or asked[0], int(node[1]))
