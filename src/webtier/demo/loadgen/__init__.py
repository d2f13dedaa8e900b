"""The shop's load generator (``webtier loadgen``, and the traffic of
``webtier demo``): visitors of a realistic model sent to a running shop over
HTTP, with what the shop answered reported per route. Needs the ``shop``
extra.

* :mod:`.model` -- who visits and what each visitor does (pure, seeded);
* :mod:`.browser` -- cookies, CSRF tokens and the target check (pure);
* :mod:`.driver` -- :func:`drive`, the asyncio loop over one httpx client;
* :mod:`.report` -- :class:`LoadReport`: latency percentiles per route
  template, status counts, checkouts acknowledged.
"""

from webtier.demo.loadgen.browser import check_target
from webtier.demo.loadgen.driver import drive
from webtier.demo.loadgen.model import Traffic, Zipf
from webtier.demo.loadgen.report import LoadReport, RouteFigures

__all__ = ["LoadReport", "RouteFigures", "Traffic", "Zipf", "check_target", "drive"]
