"""Real Redis servers and clusters (and a PostgreSQL) for tests and benchmarks.

webtier's own test suite and benchmarks use these; so can yours. Each server
is a real ``redis-server`` process on a free loopback port, with no
persistence, started in a temporary directory and killed on ``stop()``.

    with RedisServer.start() as server:          # one server
        client = redis.Redis(port=server.port)
    with RedisCluster.start() as cluster:        # 3 masters + 3 replicas
        client = redis.cluster.RedisCluster(port=cluster.ports[0])
    with RedisSentinel.start() as sentinel:      # 1 master, 2 replicas, 3 sentinels
        client = webtier.connect(sentinel.url)

:mod:`webtier.testing.pgserver` has a throwaway PostgreSQL likewise.
"""

from webtier.testing.redis_servers import RedisCluster, RedisServer, find_redis_cli, free_port
from webtier.testing.sentinel import RedisSentinel, StaleSentinel

__all__ = [
    "RedisCluster",
    "RedisSentinel",
    "RedisServer",
    "StaleSentinel",
    "find_redis_cli",
    "free_port",
]
