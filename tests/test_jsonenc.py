import json

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
