"""The incremental JSON parser of tool-call arguments (``operators.arguments._jsonstream``), fed at every
chunking.

The references are :func:`ijson_loads` (``json.loads`` restricted to I-JSON, RFC 7493: no lone
surrogates, no number that overflows a double), ``json``'s own scanner (where each value ends) and
:func:`valid_prefix_length`, a naive recursive-descent oracle written here (where invalid text becomes
invalid).
"""

from __future__ import annotations

import itertools
import json
import math
from _json import scanstring
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from operators.arguments import _jsonstream as jsonstream
from operators.arguments._jsonstream import MAX_DEPTH, JSONStreamParser
from pipeline.models import ArgumentDelta, ArgumentError, ArgumentEvent, ArgumentValue, JSONPath

# Helpers.


def feed_chunks(chunks: Iterable[str], max_size: int | None = None) -> list[list[ArgumentEvent]]:
    """Events per feed call, the last list being finish()'s; checks the per-feed delta rules."""
    parser = JSONStreamParser() if max_size is None else JSONStreamParser(max_size)
    per_feed = [parser.feed(chunk) for chunk in chunks]
    per_feed.append(parser.finish())
    for events in per_feed:
        previous: ArgumentEvent | None = None
        for event in events:
            if isinstance(event, ArgumentDelta):
                assert event.delta, "an empty delta"
                same_string = isinstance(previous, ArgumentDelta) and previous.path == event.path
                assert not same_string, f"two deltas of one string in one feed: {events}"
            previous = event
    return per_feed


def parse(text: str, chunk_size: int | None = None) -> list[ArgumentEvent]:
    size = chunk_size or max(len(text), 1)
    return [event for events in feed_chunks(split_every(text, size)) for event in events]


def split_every(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def split_at(text: str, cuts: Iterable[int]) -> list[str]:
    points = [0, *sorted(set(cuts)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


def chunkings(text: str) -> Iterator[list[str]]:
    """One character at a time, every single split position, and a few fixed sizes."""
    yield list(text)
    for cut in range(1, len(text)):
        yield [text[:cut], text[cut:]]
    for size in (2, 3, 5, 7):
        yield split_every(text, size)


def _finite_float(token: str) -> float:
    value = float(token)
    if math.isinf(value):
        raise ValueError(f"{token} overflows a double")
    return value


def _double_int(token: str) -> int:
    value = int(token)
    float(value)  # OverflowError past a double
    return value


def ijson_loads(text: str) -> Any:
    """``json.loads`` restricted to I-JSON: ValueError for a lone surrogate or a number past a double."""
    try:
        value = json.loads(text, parse_float=_finite_float, parse_int=_double_int)
    except OverflowError as exc:
        raise ValueError(str(exc)) from exc
    json.dumps(value, ensure_ascii=False).encode()  # UnicodeEncodeError (a ValueError): a lone surrogate
    return value


def root_values(events: Sequence[ArgumentEvent]) -> list[Any]:
    return [event.value for event in events if isinstance(event, ArgumentValue) and event.path == ()]


def errors(events: Sequence[ArgumentEvent]) -> list[ArgumentError]:
    return [event for event in events if isinstance(event, ArgumentError)]


def joined_deltas(events: Sequence[ArgumentEvent]) -> dict[JSONPath, str]:
    joined: dict[JSONPath, list[str]] = {}
    for event in events:
        if isinstance(event, ArgumentDelta):
            joined.setdefault(event.path, []).append(event.delta)
    return {path: "".join(parts) for path, parts in joined.items()}


def string_values(value: Any, path: JSONPath = ()) -> dict[JSONPath, str]:
    """Every non-empty string value (not key) in ``value`` by path."""
    found: dict[JSONPath, str] = {}
    if isinstance(value, str):
        if value:
            found[path] = value
    elif isinstance(value, dict):
        for key, item in value.items():
            found.update(string_values(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.update(string_values(item, (*path, index)))
    return found


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (1 != 1.0 != True, -0.0 != 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def assert_parses_like_json(text: str, chunks: list[str]) -> list[ArgumentEvent]:
    events = [event for batch in feed_chunks(chunks) for event in batch]
    expected = ijson_loads(text)
    assert errors(events) == []
    roots = root_values(events)
    assert len(roots) == 1
    assert same(roots[0], expected), (chunks, roots[0], expected)
    assert joined_deltas(events) == string_values(expected)
    return events


class _Incomplete(Exception):
    pass


class _Invalid(Exception):
    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


def valid_prefix_length(text: str) -> int:
    """The oracle: the length of the longest prefix of ``text`` that some text json.loads accepts begins
    with. Naive recursive descent over the whole text; running out of text means "valid so far".

    I-JSON's rules put an error at the start of what breaks them: a lone surrogate escape (or a
    surrogate character) and a complete number that overflows a double are invalid at their first
    character."""
    position = 0

    def peek() -> str:
        if position >= len(text):
            raise _Incomplete
        return text[position]

    def skip_whitespace() -> None:
        nonlocal position
        while position < len(text) and text[position] in " \t\n\r":
            position += 1

    def expect(allowed: str) -> str:
        nonlocal position
        char = peek()
        if char not in allowed:
            raise _Invalid(position)
        position += 1
        return char

    def digits(at_least_one: bool) -> None:
        nonlocal position
        if at_least_one:
            expect("0123456789")
        while position < len(text) and text[position] in "0123456789":
            position += 1

    def number(nested: bool) -> None:
        nonlocal position
        start = position
        if peek() == "-":
            position += 1
        if expect("0123456789") != "0":
            digits(False)
        if position < len(text) and text[position] == ".":
            position += 1
            digits(True)
        if position < len(text) and text[position] in "eE":
            position += 1
            if peek() in "+-":
                position += 1
            digits(True)
        if position == len(text) and nested:
            raise _Incomplete  # more digits may follow
        try:
            ijson_loads(text[start:position])
        except ValueError:
            raise _Invalid(start) from None

    def unicode_escape() -> int:
        """The code point of the ``\\uXXXX`` escape whose ``u`` is at ``position``."""
        nonlocal position
        expect("u")
        code = 0
        for _ in range(4):
            code = code * 16 + int(expect("0123456789abcdefABCDEF"), 16)
        return code

    def string() -> None:
        nonlocal position
        expect('"')
        while True:
            char = peek()
            if char == '"':
                position += 1
                return
            if char == "\\":
                start = position
                position += 1
                if peek() != "u":
                    expect('"\\/bfnrt')
                    continue
                code = unicode_escape()
                if 0xDC00 <= code <= 0xDFFF:
                    raise _Invalid(start)
                if 0xD800 <= code <= 0xDBFF:
                    try:
                        expect("\\")
                        low = unicode_escape()
                    except _Invalid:
                        raise _Invalid(start) from None
                    if not 0xDC00 <= low <= 0xDFFF:
                        raise _Invalid(start)
            elif char < " " or "\ud800" <= char <= "\udfff":
                raise _Invalid(position)
            else:
                position += 1

    def value(nested: bool = False) -> None:
        nonlocal position
        skip_whitespace()
        char = peek()
        if char == "{":
            position += 1
            skip_whitespace()
            if peek() == "}":
                position += 1
                return
            while True:
                skip_whitespace()
                string()
                skip_whitespace()
                expect(":")
                value(True)
                skip_whitespace()
                if expect(",}") == "}":
                    return
        elif char == "[":
            position += 1
            skip_whitespace()
            if peek() == "]":
                position += 1
                return
            while True:
                value(True)
                skip_whitespace()
                if expect(",]") == "]":
                    return
        elif char == '"':
            string()
        elif char in "-0123456789":
            number(nested)
        elif char in "tfn":
            for expected in {"t": "true", "f": "false", "n": "null"}[char]:
                expect(expected)
        else:
            raise _Invalid(position)

    try:
        value()
        skip_whitespace()
        if position < len(text):
            return position
    except _Incomplete:
        pass
    except _Invalid as invalid:
        return invalid.position
    return len(text)


def value_ends(text: str) -> tuple[dict[str, int], int]:
    """Where each top-level member's value (of a root object) and the root itself are complete: the index
    of the character whose feed completes them (a number completes at the character after it; -1 means
    at finish()). Computed with json's own scanner."""
    decoder = json.JSONDecoder()

    def completed_at(start: int, end: int) -> int:
        is_number = text[start] in "-0123456789"
        return (end if end < len(text) else -1) if is_number else end - 1

    def skip(position: int) -> int:
        while position < len(text) and text[position] in " \t\n\r":
            position += 1
        return position

    start = skip(0)
    _, root_end = decoder.raw_decode(text, start)
    members: dict[str, int] = {}
    if text[start] == "{":
        position = skip(start + 1)
        while text[position] == '"':
            key, position = scanstring(text, position + 1)
            position = skip(skip(position) + 1)
            _, end = decoder.raw_decode(text, position)
            members[key] = completed_at(position, end)
            position = skip(end)
            position = skip(position + 1) if text[position] == "," else position
    return members, completed_at(start, root_end)


# The oracle itself.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": [1, 2]}', 13),
        ('{"a": [1, 2', 11),
        ("01", 1),
        ("1.", 2),
        ("1.}", 2),
        ("[1,]", 3),
        ('"\\x"', 2),
        ('"\\u12G4"', 5),
        ("tru", 3),
        ("trux", 3),
        ("{} x", 3),
        ('{"a" 1}', 5),
        ("-", 1),
        ("-a", 1),
        ("", 0),
    ],
)
def test_oracle(text: str, expected: int) -> None:
    assert valid_prefix_length(text) == expected


# Exact events.

D, V, E = ArgumentDelta, ArgumentValue, ArgumentError

LONE_HIGH = "invalid JSON at offset {}: high surrogate escape '{}' not followed by a low surrogate escape"
LONE_LOW = "invalid JSON at offset {}: low surrogate escape '{}' without a high surrogate escape before it"


def test_object_with_every_kind_of_member() -> None:
    text = '{"s": "x", "n": -1.5e2, "t": true, "f": false, "z": null, "a": [1, "y"], "o": {"k": "v"}}'
    assert parse(text) == [
        D(("s",), "x"),
        V(("s",), "x"),
        V(("n",), -150.0),
        V(("t",), True),
        V(("f",), False),
        V(("z",), None),
        D(("a", 1), "y"),
        V(("a",), [1, "y"]),
        D(("o", "k"), "v"),
        V(("o",), {"k": "v"}),
        V((), json.loads(text)),
    ]


def test_keys_are_not_streamed_and_deltas_stream_per_feed() -> None:
    assert feed_chunks(['{"con', 'tent": "ab', "cd", 'e", "x": 1}']) == [
        [],
        [D(("content",), "ab")],
        [D(("content",), "cd")],
        [D(("content",), "e"), V(("content",), "abcde"), V(("x",), 1), V((), {"content": "abcde", "x": 1})],
        [],
    ]


def test_nested_string_paths() -> None:
    text = '{"files": [{"path": "a", "content": "b"}, ["c", {"d": "e"}]]}'
    deltas = [event for event in parse(text, 1) if isinstance(event, ArgumentDelta)]
    assert deltas == [
        D(("files", 0, "path"), "a"),
        D(("files", 0, "content"), "b"),
        D(("files", 1, 0), "c"),
        D(("files", 1, 1, "d"), "e"),
    ]


def test_root_string_streams_with_the_empty_path() -> None:
    assert feed_chunks(['"ab', 'c"']) == [[D((), "ab")], [D((), "c"), V((), "abc")], []]


def test_a_chunk_ending_in_a_backslash() -> None:
    assert feed_chunks(['{"a": "x\\', 'n"}']) == [
        [D(("a",), "x")],
        [D(("a",), "\n"), V(("a",), "x\n"), V((), {"a": "x\n"})],
        [],
    ]


def test_an_escaped_backslash_at_the_end_of_a_chunk_is_not_held_back() -> None:
    assert feed_chunks(['"x\\\\', '"'])[:2] == [[D((), "x\\")], [V((), "x\\")]]


@pytest.mark.parametrize(
    ("cut", "first"),
    [
        (1, []),
        (2, ["a"]),
        (3, ["a"]),
        (4, ["a"]),
        (5, ["a"]),
        (6, ["a"]),
        (7, ["a"]),
        (8, ["aé"]),
        (9, ["aéb"]),
    ],
)
def test_unicode_escape_split_everywhere(cut: int, first: list[str]) -> None:
    text = '"a\\u00e9b"'
    events = feed_chunks([text[:cut], text[cut:]])
    assert [event.delta for event in events[0] if isinstance(event, ArgumentDelta)] == first
    assert joined_deltas(events[0] + events[1]) == {(): "aéb"}
    assert events[1][-1] == V((), "aéb")


def test_surrogate_pair_is_never_split_into_lone_halves() -> None:
    text = '"\\ud83d\\ude00!"'
    for chunks in chunkings(text):
        events = assert_parses_like_json(text, chunks)
        deltas = [event.delta for event in events if isinstance(event, ArgumentDelta)]
        assert all("\ud83d" not in delta and "\ude00" not in delta for delta in deltas)
        assert deltas[0].startswith("\U0001f600")


@pytest.mark.parametrize(
    ("chunks", "first", "second"),
    [
        (['"\\ud83d', '\\ude00"'], [], [D((), "\U0001f600"), V((), "\U0001f600")]),
        (['"a\\ud83d\\u', 'de00"'], [D((), "a")], [D((), "\U0001f600"), V((), "a\U0001f600")]),
        (['"\\ud83d\\', 'ude00"'], [], [D((), "\U0001f600"), V((), "\U0001f600")]),
        (['"\\ud83d', 'x"'], [], [E("invalid_json", LONE_HIGH.format(1, "\\ud83d"), 1)]),
        (['"\\ud83d', '"'], [], [E("invalid_json", LONE_HIGH.format(1, "\\ud83d"), 1)]),
        (['"\\ud83d', '\\u0041"'], [], [E("invalid_json", LONE_HIGH.format(1, "\\ud83d"), 1)]),
        (
            ['"x\\ud83d\\ud83d', '\\ude00"'],
            [D((), "x"), E("invalid_json", LONE_HIGH.format(2, "\\ud83d"), 2)],
            [],
        ),
        (['"\\ude00', '"'], [E("invalid_json", LONE_LOW.format(1, "\\ude00"), 1)], []),
    ],
)
def test_surrogate_escapes_split_between_chunks(
    chunks: list[str], first: list[ArgumentEvent], second: list[ArgumentEvent]
) -> None:
    assert feed_chunks(chunks) == [first, second, []]


def test_surrogate_pairs_split_in_a_row() -> None:
    chunks = ['"a\\ud83d', "\\ude00\\ud83d", '\\ude00"']
    assert feed_chunks(chunks) == [
        [D((), "a")],
        [D((), "\U0001f600")],
        [D((), "\U0001f600"), V((), "a\U0001f600\U0001f600")],
        [],
    ]


@pytest.mark.parametrize(
    ("text", "message", "before"),
    [
        ('"\\ud800"', LONE_HIGH.format(1, "\\ud800"), []),
        ('"\\uDBFFx"', LONE_HIGH.format(1, "\\uDBFF"), []),
        ('"\\udc00"', LONE_LOW.format(1, "\\udc00"), []),
        ('"ab\\uDFFF"', LONE_LOW.format(3, "\\uDFFF"), [D((), "ab")]),
        ('"\\ude00\\ud83d"', LONE_LOW.format(1, "\\ude00"), []),
        ('"\\ud800\\u0041"', LONE_HIGH.format(1, "\\ud800"), []),
        ('"\\ud800\\ud800\\udc00"', LONE_HIGH.format(1, "\\ud800"), []),
        ('"\\ud83d\\\\ude00"', LONE_HIGH.format(1, "\\ud83d"), []),
        ('"\\ud800\\x"', LONE_HIGH.format(1, "\\ud800"), []),
        ('"\\ud800\\u12"', LONE_HIGH.format(1, "\\ud800"), []),
        ('"\\ud800\n"', LONE_HIGH.format(1, "\\ud800"), []),
        ('["\\ud83d", "\\ude00"]', LONE_HIGH.format(2, "\\ud83d"), []),
        ('{"k\\udc00": 1}', LONE_LOW.format(3, "\\udc00"), []),
        (
            '{"a": "ok", "b": "x\\ud800y"}',
            LONE_HIGH.format(19, "\\ud800"),
            [D(("a",), "ok"), V(("a",), "ok"), D(("b",), "x")],
        ),
        ('"\ud83d\\ude00"', "invalid JSON at offset 1: lone surrogate '\\ud83d' (U+D83D) in a string", []),
        ('["\udfff"]', "invalid JSON at offset 2: lone surrogate '\\udfff' (U+DFFF) in a string", []),
    ],
)
def test_lone_surrogates_are_invalid_json_at_their_escape(
    text: str, message: str, before: list[ArgumentEvent]
) -> None:
    """I-JSON (RFC 7493) has no lone surrogates: they would break every UTF-8 encoder downstream."""
    offset = int(message.split()[4].rstrip(":"))
    assert valid_prefix_length(text) == offset
    for chunks in chunkings(text):
        events = [event for batch in feed_chunks(chunks) for event in batch]
        assert events[-1] == E("invalid_json", message, offset)
        deltas = joined_deltas(events[:-1])
        assert deltas == joined_deltas(before)
        assert [e for e in events[:-1] if isinstance(e, ArgumentValue)] == [
            e for e in before if isinstance(e, ArgumentValue)
        ]


@pytest.mark.parametrize("text", ['"\\uD83D\\uDE00"', '{"\\ud83d\\ude00": "\\udbff\\udfff"}'])
def test_surrogate_pairs_are_valid(text: str) -> None:
    for chunks in chunkings(text):
        assert_parses_like_json(text, chunks)


def test_every_escape() -> None:
    text = '{"e": "\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\\u001f\\uFFFF\\u20ac"}'
    assert json.loads(text)["e"] == '"\\/\b\f\n\r\t\x00\x1f\uffff€'
    for chunks in chunkings(text):
        assert_parses_like_json(text, chunks)


@pytest.mark.parametrize(
    "text",
    [
        *("0", "-0", "12", "-12", "1.5", "-0.25", "1e5", "1E+5", "2e-3", "-1.25E10", "-0.0", "10.0e0"),
        *("1e-999", "-1e-400", "1.7976931348623157e308", "-1.7976931348623157E+308", "9" * 308),
    ],
)
def test_numbers_split_everywhere(text: str) -> None:
    for document in (text, f"[{text}]", f'{{"n": {text}}}', f'{{"n": {text} }}', f"[ {text} , {text} ]"):
        for chunks in chunkings(document):
            assert_parses_like_json(document, chunks)


OVERFLOW = "invalid JSON at offset {}: the number {} overflows a double"


@pytest.mark.parametrize(
    "number", ["1e999", "-1e999", "1E400", "-2.5e+309", "1.8e308", "1" + "0" * 309, "-" + "9" * 309]
)
def test_numbers_that_overflow_a_double_are_invalid_json_at_their_start(number: str) -> None:
    """``json.loads`` gives ``inf`` (or an int no double holds), which encoders write as ``Infinity`` or
    ``null``: I-JSON (RFC 7493) rejects them."""
    # after an exponent, ".5" cannot continue the number: the number is reported before what follows it
    after = ".5" if "e" in number.lower() else "x"
    shown = number if len(number) <= 40 else f"{number[:20]}...{number[-12:]} ({len(number)} characters)"
    for document, offset, before in (
        (number, 0, []),
        (f"[{number}]", 1, []),
        (f'{{"a": 1, "n": {number} }}', 14, [V(("a",), 1)]),
        (f"[{number}{after}]", 1, []),
    ):
        message = OVERFLOW.format(offset, shown)
        assert valid_prefix_length(document) == offset
        for chunks in chunkings(document):
            assert parse_chunks(chunks) == [*before, E("invalid_json", message, offset)]


def test_a_number_cut_off_in_a_container_is_truncated_not_overflowing() -> None:
    (error,) = parse_chunks(["[1e99", "9"])
    assert error == E(
        "truncated", "the arguments end at offset 6 where more of the number, ',' or ']' was expected", 6
    )


def parse_chunks(chunks: Iterable[str]) -> list[ArgumentEvent]:
    return [event for batch in feed_chunks(chunks) for event in batch]


def test_a_number_completes_when_the_next_character_arrives() -> None:
    assert feed_chunks(['{"n": 12', "3", "}"]) == [
        [],
        [],
        [V(("n",), 123), V((), {"n": 123})],
        [],
    ]
    assert feed_chunks(['{"n": 1', " ", "}"])[1] == [V(("n",), 1)]
    assert feed_chunks(["[1", ",", "2]"]) == [[], [], [V((), [1, 2])], []]


def test_a_root_number_completes_at_the_end_or_at_whitespace() -> None:
    assert feed_chunks(["1", "2"]) == [[], [], [V((), 12)]]
    assert feed_chunks(["-2.5", "\n"]) == [[], [V((), -2.5)], []]


@pytest.mark.parametrize("text", ["true", "false", "null", "[true,false,null]", '{"a": true, "b": null}'])
def test_literals_split_everywhere(text: str) -> None:
    for chunks in chunkings(text):
        assert_parses_like_json(text, chunks)


def test_literals_complete_at_their_last_character() -> None:
    assert feed_chunks(['{"a": tr', "ue", "}"]) == [[], [V(("a",), True)], [V((), {"a": True})], []]


def test_whitespace_everywhere() -> None:
    text = ' \n\t\r{ \n "a" \t: \r [ 1 , "x" , { } , [ ] , true ] , "b" :"y"\n}\n \t'
    for chunks in chunkings(text):
        assert_parses_like_json(text, chunks)


def test_duplicate_keys_last_wins() -> None:
    assert parse('{"a": 1, "b": 2, "a": 3}') == [
        V(("a",), 1),
        V(("b",), 2),
        V(("a",), 3),
        V((), {"a": 3, "b": 2}),
    ]
    assert list(root_values(parse('{"a": 1, "b": 2, "a": 3}'))[0]) == ["a", "b"]


def test_empty_containers_and_strings() -> None:
    assert parse('{"a": "", "b": [], "c": {}}') == [
        V(("a",), ""),
        V(("b",), []),
        V(("c",), {}),
        V((), {"a": "", "b": [], "c": {}}),
    ]


@pytest.mark.parametrize("text", ["", " ", "\n\t \r"])
def test_no_arguments_is_an_empty_object(text: str) -> None:
    assert feed_chunks([text]) == [[], [V((), {})]]
    assert feed_chunks([]) == [[V((), {})]]


def test_deep_nesting_uses_no_recursion() -> None:
    depth = 20_000
    text = "[" * depth + '"x"' + "]" * depth
    parser = JSONStreamParser(max_depth=depth)
    events = [event for start in range(0, len(text), 3) for event in parser.feed(text[start : start + 3])]
    assert parser.finish() == []
    deltas = [event for event in events if isinstance(event, ArgumentDelta)]
    assert deltas == [D((0,) * depth, "x")]
    (root,) = [event.value for event in events if isinstance(event, ArgumentValue)]
    for _ in range(depth):
        assert type(root) is list
        assert len(root) == 1
        root = root[0]
    assert root == "x"


@pytest.mark.parametrize("max_depth", [MAX_DEPTH, 3])
def test_nesting_deeper_than_the_cap_is_invalid(max_depth: int) -> None:
    assert feed_chunks(["[" * max_depth + "]" * max_depth])[0][-1] == V(
        (), json.loads("[" * max_depth + "]" * max_depth)
    )
    text = '{"a":' * max_depth + "[" + "]" + "}" * max_depth
    parser = JSONStreamParser(max_depth=max_depth)
    events = [event for start in range(0, len(text), 64) for event in parser.feed(text[start : start + 64])]
    offset = 5 * max_depth
    message = f"invalid JSON at offset {offset}: nesting deeper than {max_depth} levels"
    assert events == [E("invalid_json", message, offset)]


def test_a_huge_string_in_small_chunks() -> None:
    content = ('line "quoted" \\ back\tslash \u00e9 \U0001f600\n' * 10_000)[:300_007]
    text = json.dumps({"path": "big.txt", "content": content})
    events = parse(text, 7)
    assert root_values(events) == [{"path": "big.txt", "content": content}]
    assert joined_deltas(events) == {("path",): "big.txt", ("content",): content}
    assert [event for event in events if isinstance(event, ArgumentValue)][1] == V(("content",), content)


def test_each_character_is_decoded_about_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear work, counted rather than timed: the C string decoders never re-read accumulated text,
    only the few characters of an escape cut by a chunk boundary (and a chunk the fast route hands over
    to the general one)."""
    scanned = 0

    def counting_scanstring(text: str, start: int, strict: bool = True) -> tuple[str, int]:
        nonlocal scanned
        piece, after = scanstring(text, start, strict)
        scanned += after - start
        return piece, after

    decode = jsonstream._decode_string

    def counting_decode(quoted: str) -> str:
        nonlocal scanned
        scanned += len(quoted) - 2
        return decode(quoted)

    monkeypatch.setattr(jsonstream, "_scanstring", counting_scanstring)
    monkeypatch.setattr(jsonstream, "_decode_string", counting_decode)
    content = 'a "quoted" C:\\path\tand \u00e9\U0001f600 line\n' * 2_000
    text = json.dumps({"path": "x", "content": content, "more": [content, {"deep": content}]})
    for size in (1, 4, 64):
        scanned = 0
        assert root_values(parse(text, size))[0]["content"] == content
        assert scanned <= len(text) + 12 * (len(text) // size + 1)


@pytest.mark.parametrize("chunk_size", [1, 100, 10_000])
def test_big_integers_and_the_digit_limit(chunk_size: int) -> None:
    assert root_values(parse("9" * 308, chunk_size)) == [int("9" * 308)]
    assert root_values(parse("[" + "9" * 308 + "]", chunk_size)) == [[int("9" * 308)]]
    (error,) = parse("[" + "9" * 4000 + "]", chunk_size)
    assert error == E("invalid_json", OVERFLOW.format(1, f"{'9' * 20}...{'9' * 12} (4000 characters)"), 1)
    events = parse('{"m": 1, "n": ' + "9" * 5000 + "}", chunk_size)
    (error,) = errors(events)
    assert events == [V(("m",), 1), error]
    assert error.kind == "invalid_json"
    assert error.offset == 14
    assert "Exceeds the limit (4300 digits)" in error.message


# Errors.


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ('{"a" 1}', 5, "expected ':' after the key, found '1'"),
        ("[1,]", 3, "expected a value, found ']'"),
        ('{"a": 1,}', 8, "expected a key string, found '}'"),
        ("{,}", 1, "expected a key string or '}', found ','"),
        ("01", 1, "expected the end of the arguments after the number, found '1'"),
        ("[01]", 2, "expected ',' or ']' after the number, found '1'"),
        ('{"a": 1.}', 8, "expected a digit after the decimal point, found '}'"),
        ("[-]", 2, "expected a digit after '-', found ']'"),
        ("[1e]", 3, "expected a digit or sign in the exponent, found ']'"),
        ("[1e+]", 4, "expected a digit in the exponent, found ']'"),
        ("[1.5.2]", 4, "expected ',' or ']' after the number, found '.'"),
        ('"\\x"', 2, "invalid escape '\\x' in a string"),
        ('"ab\\u12G4"', 7, "expected 4 hex digits after '\\u', found 'G'"),
        ('"\\ud801\\u12"', 1, "high surrogate escape '\\ud801' not followed by a low surrogate escape"),
        ('"\\u0041\\u12"', 11, "expected 4 hex digits after '\\u', found '\"'"),
        ('"a\nb"', 2, "unescaped control character '\\n' (U+000A) in a string"),
        ("trux", 3, "expected 'true', found 'x'"),
        ("NaN", 0, "expected a value, found 'N'"),
        ("Infinity", 0, "expected a value, found 'I'"),
        ("-Infinity", 1, "expected a digit after '-', found 'I'"),
        ('{"a": 1}x', 8, "unexpected data after the arguments: 'x'"),
        ("{} {}", 3, "unexpected data after the arguments: '{'"),
        ("\ufeff{}", 0, "expected a value, found '\\ufeff' (U+FEFF)"),
        ("[1 2]", 3, "expected ',' or ']', found '2'"),
        ('{"a": 1 "b"}', 8, "expected ',' or '}', found '\"'"),
        ("[1}", 2, "expected ',' or ']' after the number, found '}'"),
        ('["a"}', 4, "expected ',' or ']', found '}'"),
        ("'a'", 0, 'expected a value, found "\'"'),
        ("[\x0b]", 1, "expected a value or ']', found '\\x0b' (U+000B)"),
    ],
)
def test_invalid_json_at_the_exact_offset(text: str, offset: int, message: str) -> None:
    assert valid_prefix_length(text) == offset
    for chunks in chunkings(text):
        events = [event for batch in feed_chunks(chunks) for event in batch]
        (error,) = errors(events)
        assert error == E("invalid_json", f"invalid JSON at offset {offset}: {message}", offset)
        assert events[-1] is error


@pytest.mark.parametrize("code", [*range(0x20), 0x7F])
def test_control_characters_in_strings(code: int) -> None:
    text = '{"a": "x' + chr(code) + 'y"}'
    events = parse(text, 1)
    if code == 0x7F:
        assert root_values(events) == [json.loads(text)]
        return
    assert errors(events)[0].offset == 8
    assert events[:-1] == [D(("a",), "x")]  # what came before the bad character is not lost


@pytest.mark.parametrize(
    ("text", "expectation"),
    [
        ('{"a": "x', "the rest of the string at path ('a',) and its closing quote"),
        ('{"a": "x\\', "the rest of the escape sequence"),
        ('{"a": "x\\u00', "the rest of the escape sequence"),
        ('{"a', "the rest of an object key and its closing quote"),
        ('{"a"', "':' after the key"),
        ('{"a":', "a value"),
        ('{"a": 1', "more of the number, ',' or '}'"),
        ("[1.5e3", "more of the number, ',' or ']'"),
        ('{"a": -', "a digit after '-'"),
        ("[tr", "the rest of 'true'"),
        ("[", "a value or ']'"),
        ("{", "a key string or '}'"),
        ('{"a": 1,', "a key string"),
        ("[1, [2]", "',' or ']'"),
        ('{"a": {}', "',' or '}'"),
        ("1.", "a digit after the decimal point"),
    ],
)
def test_truncated(text: str, expectation: str) -> None:
    for chunks in chunkings(text):
        events = feed_chunks(chunks)
        message = f"the arguments end at offset {len(text)} where {expectation} was expected"
        assert events[-1] == [E("truncated", message, len(text))]


def test_too_large() -> None:
    events = feed_chunks(['{"a": "01', "23456789", '"}'], max_size=10)
    message = "the arguments are longer than the limit of 10 characters"
    assert events == [[D(("a",), "01")], [D(("a",), "2"), E("too_large", message, 10)], [], []]


def test_the_size_limit_is_inclusive() -> None:
    text = '{"a": "xy"}'
    at_limit = [event for batch in feed_chunks(list(text), max_size=len(text)) for event in batch]
    assert root_values(at_limit) == [{"a": "xy"}]
    assert errors(at_limit) == []
    over = [event for batch in feed_chunks([text], max_size=len(text) - 1) for event in batch]
    message = f"the arguments are longer than the limit of {len(text) - 1} characters"
    assert over == [D(("a",), "xy"), V(("a",), "xy"), E("too_large", message, len(text) - 1)]


def test_nothing_is_reported_after_an_error() -> None:
    parser = JSONStreamParser()
    assert parser.feed('{"a": x') == [
        E("invalid_json", "invalid JSON at offset 6: expected a value, found 'x'", 6)
    ]
    assert parser.feed('"b": "c"}') == []
    assert parser.finish() == []
    assert parser.finish() == []


def test_feed_after_finish_is_a_programming_error() -> None:
    parser = JSONStreamParser()
    parser.feed("{}")
    parser.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        parser.feed(" ")


# Properties: any JSON value, any serialisation, any chunking.

_ESCAPE_HEAVY = st.text(
    alphabet=st.sampled_from(['"', "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "é", "€"])
    | st.sampled_from(["\U0001f600", "\U00010000", "\U0010ffff", "\ud7ff", "\ue000", "a", " "]),
    max_size=30,
)
_TEXT = st.text(max_size=20) | _ESCAPE_HEAVY
_NUMBERS = (
    st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, -0.0, 1e-7, 1e21, 2.5e-300, 1.7976931348623157e308])
)
_SCALARS = st.none() | st.booleans() | _NUMBERS | _TEXT
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_TEXT, children, max_size=5),
    max_leaves=25,
)
JSON_OBJECTS = st.dictionaries(_TEXT, JSON_VALUES, max_size=6)


@st.composite
def serialised(draw: st.DrawFn, values: st.SearchStrategy[Any] = JSON_VALUES) -> str:
    value = draw(values)
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]))
    indent = draw(st.sampled_from([None, 0, 2, "\t"]))
    text = json.dumps(value, ensure_ascii=draw(st.booleans()), separators=separators, indent=indent)
    return draw(st.sampled_from(["", " ", "\n "])) + text + draw(st.sampled_from(["", " ", "\r\n"]))


@st.composite
def chunked(draw: st.DrawFn, values: st.SearchStrategy[Any] = JSON_VALUES) -> tuple[str, list[str]]:
    text = draw(serialised(values))
    cuts = draw(st.lists(st.integers(min_value=1, max_value=max(len(text) - 1, 1)), max_size=40))
    return text, split_at(text, cuts)


_PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(chunked())
def test_any_value_at_any_chunking_parses_like_json_loads(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    assert_parses_like_json(text, chunks)
    assert_parses_like_json(text, list(text))


@settings(max_examples=60, deadline=None)
@given(serialised(st.recursive(_SCALARS, lambda c: st.lists(c, max_size=3), max_leaves=4)))
def test_small_values_at_every_split_position(text: str) -> None:
    for cut in range(1, len(text)):
        assert_parses_like_json(text, [text[:cut], text[cut:]])


def _completion_points(per_feed: list[list[ArgumentEvent]], chunks: list[str]) -> dict[JSONPath, int]:
    """Path of each reported value -> index in the text of the last character of the chunk that reported
    it (-1 for finish())."""
    points: dict[JSONPath, int] = {}
    fed = 0
    for position, events in enumerate(per_feed):
        fed += len(chunks[position]) if position < len(chunks) else 0
        for event in events:
            if isinstance(event, ArgumentValue):
                assert event.path not in points, "a value reported twice"
                points[event.path] = fed - 1 if position < len(chunks) else -1
    return points


def _chunk_end(chunk_ends: list[int], index: int) -> int:
    """Index of the last character of the chunk that holds ``index`` (-1 stays -1: finish())."""
    if index < 0:
        return -1
    return next(end - 1 for end in chunk_ends if end > index)


@_PROPERTY
@given(chunked(JSON_OBJECTS))
def test_top_level_values_are_reported_exactly_when_complete(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    expected = ijson_loads(text)
    members, root_end = value_ends(text)
    assert list(members) == list(expected)
    for pieces in (list(text), chunks):
        per_feed = feed_chunks(pieces)
        points = _completion_points(per_feed, pieces)
        by_path = {
            event.path: event.value
            for events in per_feed
            for event in events
            if isinstance(event, ArgumentValue)
        }
        assert same(by_path.pop(()), expected)
        assert by_path.keys() == {(key,) for key in expected}
        for key, value in expected.items():
            assert same(by_path[(key,)], value)
        ends = list(itertools.accumulate(len(piece) for piece in pieces))
        assert points[()] == _chunk_end(ends, root_end)
        for key, end in members.items():
            assert points[(key,)] == _chunk_end(ends, end), (key, text)


_CORRUPTING_CHARS = st.sampled_from(list('{}[]",:\\ \n0123456789.-+eEtrufalsn/bu\x01x\ud800'))


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(serialised(st.recursive(_SCALARS, lambda c: st.lists(c, max_size=3), max_leaves=6)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        position = draw(st.integers(min_value=0, max_value=len(text)))
        operation = draw(st.sampled_from(["delete", "insert", "replace"]))
        char = draw(_CORRUPTING_CHARS)
        if operation == "delete":
            text = text[:position] + text[position + 1 :]
        elif operation == "insert":
            text = text[:position] + char + text[position:]
        else:
            text = text[:position] + char + text[position + 1 :]
    cuts = draw(st.lists(st.integers(min_value=1, max_value=max(len(text) - 1, 1)), max_size=10))
    return text, split_at(text, cuts)


@settings(max_examples=600, deadline=None)
@given(corrupted())
def test_corrupted_json_is_rejected_where_it_stops_being_a_prefix(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    assume(text.strip(" \t\n\r"))
    try:
        expected = ijson_loads(text)
    except ValueError:
        accepted = False
    else:
        accepted = True
    valid_length = valid_prefix_length(text)
    for pieces in (chunks, list(text)):
        events = [event for batch in feed_chunks(pieces) for event in batch]
        if accepted:
            assert valid_length == len(text)
            assert errors(events) == []
            (root,) = root_values(events)
            assert same(root, expected)
            continue
        (error,) = errors(events)
        assert events[-1] is error
        if valid_length == len(text):
            assert error.kind == "truncated"
        else:
            assert error.kind == "invalid_json"
        assert error.offset == valid_length, (text, error)


@settings(max_examples=500, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list('{}[]",:\\ \n0123456789.-+eEtrufalsnu/x\x00\ud800é')) | st.characters()
    ),
    st.lists(st.integers(min_value=1, max_value=200), max_size=20),
)
def test_any_text_gives_exactly_one_outcome_and_never_raises(text: str, cuts: list[int]) -> None:
    events = [
        event
        for batch in feed_chunks(split_at(text, [cut for cut in cuts if cut < len(text)]))
        for event in batch
    ]
    failures = errors(events)
    roots = root_values(events)
    assert len(failures) <= 1
    assert len(roots) <= 1
    assert roots or failures
    if failures:
        assert events[-1] is failures[0]
    if roots and not failures:
        assert same(roots[0], ijson_loads(text) if text.strip(" \t\n\r") else {})


# The string fast route (msgspec's decoder on whole chunks) against the general one (the json scanner).


def _per_feed(chunks: Sequence[str], *, fast: bool, max_size: int | None = None) -> list[list[ArgumentEvent]]:
    saved = jsonstream._FAST_STRINGS
    jsonstream._FAST_STRINGS = fast
    try:
        parser = JSONStreamParser() if max_size is None else JSONStreamParser(max_size)
        per_feed = [parser.feed(chunk) for chunk in chunks]
        per_feed.append(parser.finish())
    finally:
        jsonstream._FAST_STRINGS = saved
    return per_feed


def assert_fast_route_is_the_general_one(chunks: Sequence[str], max_size: int | None = None) -> None:
    assert _per_feed(chunks, fast=True, max_size=max_size) == _per_feed(
        chunks, fast=False, max_size=max_size
    ), chunks


_STRING_PIECES = st.sampled_from(
    [
        "a",
        "é",
        "\U0001f600",
        '\\"',
        "\\\\",
        "\\/",
        "\\n",
        "\\t",
        "\\b",
        "\\u00e9",
        "\\u20AC",
        "\\ud83d\\ude00",
        "\\uD83D\\uDE00",
        "\\u0000",
        "\\ud800",
        "\\udc00",
        "\\ud83d",
        "\\u12",
        "\\q",
        "\\",
        '"',
        "\x01",
        "\ud800",
        "\\u",
        "\\ud83dx",
        "\\ud8zz",
        "\\\\u0041",
        "\\\\\\u0041",
    ]
)


@st.composite
def string_chunks(draw: st.DrawFn) -> list[str]:
    """An object whose string value is made of escapes (valid or not), cut anywhere."""
    content = "".join(draw(st.lists(_STRING_PIECES, max_size=30)))
    text = '{"content": "' + content + draw(st.sampled_from(['"}', '", "b": "x\\n"}', "", '"']))
    cuts = draw(st.lists(st.integers(min_value=1, max_value=max(len(text) - 1, 1)), max_size=30))
    return split_at(text, cuts)


@_PROPERTY
@given(string_chunks())
def test_the_string_fast_route_gives_the_general_routes_events(chunks: list[str]) -> None:
    assert_fast_route_is_the_general_one(chunks)
    text = "".join(chunks)
    assert_fast_route_is_the_general_one(list(text))
    assert_fast_route_is_the_general_one(split_every(text, 4))
    assert_fast_route_is_the_general_one(chunks, max_size=len(text) // 2)


@_PROPERTY
@given(chunked())
def test_the_string_fast_route_on_any_value_at_any_chunking(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    assert_fast_route_is_the_general_one(chunks)
    for size in (1, 2, 3, 4, 7):
        assert_fast_route_is_the_general_one(split_every(text, size))


@settings(max_examples=300, deadline=None)
@given(corrupted())
def test_the_string_fast_route_on_corrupted_json(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    assert_fast_route_is_the_general_one(chunks)
    assert_fast_route_is_the_general_one(split_every(text, 4))


def test_the_fast_route_holds_back_escapes_cut_by_the_chunk_end() -> None:
    """Each of these ends in an escape the next chunk completes: held back, never decoded in halves."""
    for head, tail in [
        ("ab\\", "n"),
        ("a\\\\\\", "t"),
        ("\\u00", "e9"),
        ("x\\ud83d", "\\ude00"),
        ("\\ud83d\\", "ude00"),
        ("\\ud83d\\u", "de00"),
        ("a\\\\", "b"),
    ]:
        parser = JSONStreamParser()
        parser.feed('{"c": "')
        first = parser.feed(head)
        second = parser.feed(tail + '"}')
        value = json.loads('"' + head + tail + '"')
        deltas = [e.delta for e in first + second if isinstance(e, ArgumentDelta)]
        assert "".join(deltas) == value
        assert all(not ("\ud800" <= d[-1] <= "\udbff") for d in deltas), (head, deltas)
        assert second[-1] == V((), {"c": value})
        assert_fast_route_is_the_general_one(['{"c": "', head, tail + '"}'])


def test_remembered_pieces_decode_as_new_ones_and_the_memory_is_capped() -> None:
    """Short string pieces are decoded once and remembered: a piece seen before (an escape cut by its
    end included) gives what the general route gives, and no more than ``_MEMO_SIZE`` are kept."""
    chunks = ['{"a": "', 'x\\"y', "\\u00", "e9\\n", 'x\\"y', "\\ud83d", "\\ude00", "\\u00", "e9\\n", '"}']
    assert_fast_route_is_the_general_one(chunks)
    assert_fast_route_is_the_general_one(chunks)  # every piece remembered now
    assert jsonstream._decoded_pieces['x\\"y'] == ('x"y', 4)
    assert jsonstream._decoded_pieces["\\u00"] == ("", 0)
    parser = JSONStreamParser()
    parser.feed('{"a": "')
    pieces = [f"\\t{number:x}" for number in range(jsonstream._MEMO_SIZE + 10)]
    for piece in pieces:
        parser.feed(piece)
        assert len(jsonstream._decoded_pieces) <= jsonstream._MEMO_SIZE
    value = json.loads('"' + "".join(pieces) + '"')
    assert parser.feed('"}') == [ArgumentValue(("a",), value), ArgumentValue((), {"a": value})]
