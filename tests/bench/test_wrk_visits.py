"""The visits wrk replays are the loadgen model's, made in Python with a
fixed seed: the same seed makes the same requests, each step of a plan
becomes the requests the Python driver makes for it, and returning
visitors come back to the cookies kept at the end of an earlier visit."""

from __future__ import annotations

import random
from pathlib import Path

from benchmarks._wrk import step_lines, visit_lines, write_visits
from webtier.demo.loadgen.model import Step, Traffic, Zipf

TRAFFIC = Traffic(items=500, users=50)


def test_a_seed_makes_the_same_visits(tmp_path: Path) -> None:
    write_visits(tmp_path / "a", 2, TRAFFIC, 3, 30)
    write_visits(tmp_path / "b", 2, TRAFFIC, 3, 30)
    write_visits(tmp_path / "c", 2, TRAFFIC, 4, 30)
    for thread in (1, 2):
        first = (tmp_path / f"a.{thread}").read_text()
        assert first == (tmp_path / f"b.{thread}").read_text()
        assert first != (tmp_path / f"c.{thread}").read_text()
    assert (tmp_path / "a.1").read_text() != (tmp_path / "a.2").read_text()


def test_each_step_is_the_drivers_requests() -> None:
    assert step_lines(Step("item", item=42)) == ["G\t/item/42\tGET /item/{item_id}"]
    assert step_lines(Step("home")) == ["G\t/\tGET /"]
    assert step_lines(Step("add", item=7, count=2)) == ["P\t/cart\titem=7&count=2\t/item/7", "F"]
    assert step_lines(Step("login", user="user3")) == [
        "G\t/login\tGET /login", "P\t/login\tusername=user3\t/login", "F",
    ]  # fmt: skip
    assert step_lines(Step("checkout")) == ["G\t/cart\tGET /cart", "P\t/checkout\t\t/cart", "F"]
    assert step_lines(Step("logout")) == ["P\t/logout\t\t/account", "F"]


def test_visits_follow_the_model_and_returning_visitors_reuse_kept_cookies() -> None:
    zipf = Zipf(TRAFFIC.items, TRAFFIC.zipf_s)
    lines = visit_lines(TRAFFIC, zipf, 11, 400)
    starts = [line for line in lines if line[0] in "NR"]
    assert len(starts) == 400 == sum(line.startswith("K\t") for line in lines)
    kept: set[str] = set()
    returned = 0
    for line in lines:
        kind, _, jar = line.partition("\t")
        if kind == "R":
            assert jar in kept  # kept at the end of an earlier visit
            returned += 1
        elif kind == "K":
            kept.add(jar)
    assert 0 < returned < 400
    # Item views follow the Zipf law: item 1 is the most viewed.
    views = [int(line.split("\t")[1].removeprefix("/item/")) for line in lines
             if line.startswith("G\t/item/")]  # fmt: skip
    assert max(set(views), key=views.count) == 1
    # The same plans as the model's for the same draws.
    rng = random.Random(11)
    first_plan = TRAFFIC.plan(random.Random(rng.getrandbits(64)), zipf)
    expected = ["N", *(line for step in first_plan for line in step_lines(step))]
    assert lines[: len(expected)] == expected
