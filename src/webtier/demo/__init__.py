"""The demo shop, Fake Web Retailer (needs the ``shop`` extra but for its
database):

- :mod:`webtier.demo.shop`: the shop, a Starlette app on webtier;
- :mod:`webtier.demo.serve`: ``webtier demo``, the shop served with traffic;
- :mod:`webtier.demo.shopdb`: its database, the inventory and the orders
  (``webtier rows``; needs ``sql``).

Importing this package imports none of them.
"""
