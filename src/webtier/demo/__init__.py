"""The demo shop, Fake Web Retailer: its live traffic (``webtier demo``,
:mod:`webtier.demo.traffic`, needs the ``cli`` extra) and its inventory
database (``webtier rows``, :mod:`webtier.demo.shopdb`, needs ``sql``).

Importing this package imports neither.
"""

from webtier._core.compat import moved

# ``webtier.demo`` was the traffic module itself.
__getattr__ = moved(__name__, {"run_demo": "webtier.demo.traffic:run_demo"})
