"""Broker priority matching follows SQL Server's precedence order (docs/concepts.md) exactly."""

from __future__ import annotations

import itertools

from sbroker.core.priority import ANY, BrokerPriority, match_priority

ORDER = [  # most specific first, as docs/concepts.md lists them
    ("C", "L", "R"), ("C", "L", ANY), ("C", ANY, "R"), ("C", ANY, ANY),
    (ANY, "L", "R"), (ANY, "L", ANY), (ANY, ANY, "R"), (ANY, ANY, ANY),
]


def prio(name: str, c: str, loc: str, rem: str, level: int) -> BrokerPriority:
    return BrokerPriority(name, c, loc, rem, level)


def test_default_is_5_when_nothing_matches() -> None:
    assert match_priority([], "C", "L", "R") == 5
    assert match_priority([prio("p", "Other", ANY, ANY, 9)], "C", "L", "R") == 5


def test_each_level_of_precedence_beats_all_later_ones() -> None:
    for i, spec in enumerate(ORDER):
        present = [prio(f"p{j}", *ORDER[j], level=j + 1) for j in range(i, len(ORDER))]
        for perm in itertools.islice(itertools.permutations(present), 3):
            assert match_priority(perm, "C", "L", "R") == i + 1, spec


def test_local_and_remote_are_from_the_endpoint_point_of_view() -> None:
    p = [prio("p", ANY, "Initiator", "Target", 8)]
    assert match_priority(p, "C", "Initiator", "Target") == 8
    assert match_priority(p, "C", "Target", "Initiator") == 5
