"""The profile summary sums py-spy's collapsed stacks by layer: a sample
goes to its innermost frame that has a layer, standard library frames
counting for their caller, and the table shows each layer's share."""

from __future__ import annotations

from benchmarks.shop_profile import markdown, summarise

STDLIB = ("/usr/lib/python3.11",)
UVICORN = "run (/v/site-packages/uvicorn/server.py:60)"
LOOP = "_run_once (/usr/lib/python3.11/asyncio/base_events.py:1900)"
GUARD = "__call__ (/src/webtier/demo/shop/security.py:140)"
HMAC = "new (/usr/lib/python3.11/hmac.py:184)"
ROUTE = "handle (/v/site-packages/starlette/routing.py:276)"
TEMPLATE = "root (/src/webtier/demo/shop/templates/item.html:12)"
ESCAPE = "escape (/usr/lib/python3.11/html/__init__.py:12)"
MUX = "send (/src/webtier/_core/mux/link.py:88)"


def test_samples_go_to_the_innermost_frame_with_a_layer() -> None:
    lines = [
        f"{UVICORN};{LOOP};{GUARD};{HMAC} 30",  # hmac counts for the CSRF guard
        f"{UVICORN};{LOOP};{GUARD};{ROUTE};{TEMPLATE};{ESCAPE} 50",  # escape: the template's
        f"{UVICORN};{LOOP} 15",
        f"{UVICORN};{LOOP};{GUARD};{ROUTE};{MUX} 5",
        "not a stack line",
    ]
    summary = summarise(lines, STDLIB)
    assert summary.samples == 100
    assert summary.layers == {
        "ASGI middleware (webtier.web, the shop's security)": 30,
        "Jinja2": 50,
        "event loop (asyncio, uvloop)": 15,
        "Redis transport (webtier._core, redis-py, hiredis)": 5,
    }
    assert summary.frames["Jinja2"] == {"root (templates/item.html)": 50}
    table = markdown(summary)
    largest = table.splitlines()[2]
    assert largest.startswith("| Jinja2 | 50.0 % | `root (templates/item.html)` 50.0 %")
    assert "100 samples." in table
