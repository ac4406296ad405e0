"""The converters' shared helpers: generated call ids and call positions."""

from __future__ import annotations

import re

from operators.convert._base import CallIndexer, new_call_id


def test_new_call_id_is_call_and_24_hex_characters_and_unique() -> None:
    ids = {new_call_id(0) for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", call_id) for call_id in ids)


def test_call_indexer_positions_in_order_of_first_appearance() -> None:
    indexer = CallIndexer()
    assert [indexer.position(key) for key in (1, "toolu_a", 1, ("output", 7), "toolu_a")] == [0, 1, 0, 2, 1]
    assert len(indexer) == 3
    assert "toolu_a" in indexer
    assert 5 not in indexer
    assert indexer.get(("output", 7)) == 2
    assert indexer.get("unseen") is None
    assert len(indexer) == 3  # get() assigns nothing
