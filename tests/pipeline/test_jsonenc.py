import json
import math

import msgspec
import pytest

from pipeline._jsonenc import encode_json


def test_plain_values_are_msgspec_json() -> None:
    value = {"a": [1, 2.5, None, True], "b": "caf\u00e9 \U0001f600"}
    assert encode_json(value) == msgspec.json.encode(value)


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\U0001f600\ud83d"])
def test_a_lone_surrogate_is_escaped_and_round_trips(text: str) -> None:
    with pytest.raises(UnicodeEncodeError):
        msgspec.json.encode({"delta": text})
    encoded = encode_json({"delta": text})
    encoded.decode("utf-8")  # valid UTF-8
    assert json.loads(encoded) == {"delta": text}


class _Named(msgspec.Struct):
    name: str
    score: float


def test_the_escape_path_writes_the_rest_as_msgspec_does() -> None:
    """A lone surrogate beside a struct and non-finite floats: valid JSON, structs as objects, inf and
    NaN as null (the standard library alone wrote ``Infinity`` and refused the struct)."""
    value = {"who": _Named("\ud800", math.inf), "scores": [1.5, math.nan, -math.inf]}
    encoded = encode_json(value)
    assert encoded == b'{"who":{"name":"\\ud800","score":null},"scores":[1.5,null,null]}'
    assert json.loads(encoded, parse_constant=lambda name: pytest.fail(f"not JSON: {name}")) == {
        "who": {"name": "\ud800", "score": None},
        "scores": [1.5, None, None],
    }
