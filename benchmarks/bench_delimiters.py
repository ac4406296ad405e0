"""The delimiter-token rewriter on long Kimi-K2, Qwen3-Coder, Hermes and gpt-oss harmony streams, beside
SGLang's detectors on the same deltas.

Run: ``python -m benchmarks.bench_delimiters`` (``--sizes 1000000 10000000 100000000``; ``--formats
kimi_k2 qwen3_coder seed_oss hermes harmony``; ``--no-async`` skips the operator rows; ``--repeat 3``
keeps the fastest of three runs, which filters out the noise of a shared machine; ``--peer-max`` is how many
characters of the smallest size's stream the peer rows run on).

Streams are built up to 10 MB (:data:`BUILT_MAX`); a larger size feeds the 10 MB stream's deltas
through one rewriter as many times as it takes (the stream goes on where it ended, at rest in prose or
after a call), so that 100 MB shows the growth without holding 25 million deltas. Its output is
checked on one pass.

The ``pythonic`` stream (Llama 4's ``<|python_start|>[f(k='v'), ...]<|python_end|>`` between paragraphs
of prose, the same arguments written as Python literals) has one more row, its floor: what a parser
that waits for the whole answer does once (each call list cut out with ``str.split``, ``ast.parse``,
``ast.literal_eval`` of each keyword value, ``json.dumps``), timed on the whole text; ``x floor`` is
the rewriter's time over it. ``--growth`` runs each stream at 1x, 10x and 100x the first ``--sizes``
and prints ns/byte at each over 1x: flat when the rewriter is linear.

The peer: SGLang's streaming detectors (``KimiK2Detector``, ``Qwen3CoderDetector``, ``HermesDetector``,
``GptOssDetector``, ``PythonicDetector``), each called with ``parse_streaming_increment(delta, tools)`` on
the same deltas (their text), in the same process, CPU time, fastest of ``--repeat``, on the first ``--peer-
max`` characters of the smallest stream (some detectors rescan their buffer, so their time per byte grows
with the stream); the rewriter runs again on the same deltas just before, and the ``x peer`` column is the
peer's time over the rewriter's. The ``calls`` column of a peer row counts the calls it named (here
``KimiK2Detector`` names fewer calls than the stream holds, whose argument strings hold marker text, and
``GptOssDetector`` names none of the harmony calls: their rows time what they do all the same).

SGLang is heavy to install whole; its detectors need only ``sglang/srt/function_call/``,
``sglang/srt/environ.py``, ``orjson``, ``partial-json-parser`` and ``pydantic``::

    pip install --no-deps sglang partial-json-parser orjson

:func:`sglang_detectors` imports the detector modules unchanged with two stubs: the ``sglang`` and
``sglang.srt`` packages are bare (their ``__init__`` would import the server: torch, numpy, ...), and
``sglang.srt.entrypoints.openai.protocol`` holds only ``Tool`` / ``Function`` / ``ToolChoice`` (the real
one imports ``openai`` and ``sglang.utils``; the detectors use only ``tool.function.name`` and
``.parameters``). Without sglang the peer rows print "not installed".

The stream is model output as Kimi-K2 writes it: paragraphs of prose (with the odd ``<`` and ``|`` that
look like the start of a marker) interleaved with tool sections of one to three calls whose JSON
arguments hold strings with escapes, non-ASCII text and marker-like text. The Qwen3-Coder stream has the
same shape with XML-style calls (``<parameter=content>`` values are raw text, rewritten as JSON strings;
compared parsed; the Seed-OSS stream is the same calls in ``<seed:tool_call>`` blocks, an XML-style
format read by the invoke-section lexer, its floor the ``prose`` row); the harmony stream has
``analysis`` and ``final`` messages around ``commentary``
function calls with the same JSON arguments. It is cut into 4-character
content deltas (about one token each), built before timing. Each row runs the whole stream through a
fresh :class:`~operators.delimiters.DelimiterRewriter` (``feed`` per delta, then ``finish``), or through
the ``rewrite_delimiters`` operator over a plain async generator (what a converter stage hands it; the
operator adds one ``drive`` hop, the ``+ns/delta`` column); the output is folded after timing and
checked (text and every call's arguments) against what the generator wrote. The ``prose`` row is the
same number of deltas of prose alone, the rewriter's pass-through path. The ``markup`` column is the share of
the stream's characters that are markup (tags, call headers, parameter keys: neither text nor argument
text as the model wrote it), counted by the generator. Per byte, a stream with more markup costs more
whatever the format: it is what the lexer's states read, where most other deltas take one rule.

Times are CPU time of this process (nothing here waits), so that other work on the machine does not
count. Each timed run lets every output chunk go as it comes, as a consumer that encodes and sends it
does (the output of one more run, untimed, is kept and checked). ``--keep`` times a consumer that keeps
every chunk until the run ends instead: that adds the allocator's cost of fresh memory, which is not the
rewriter's and not the same for every format. Kept chunks fill new memory pages, and between runs
pymalloc returns the emptied arenas to the system or keeps them: measured, Kimi-K2's and harmony's runs
took 12,600-13,600 page faults each (about 20-24 ns/byte of system time) and Qwen3-Coder's none, which
made Qwen3-Coder look 1.1x Kimi-K2 kept and 1.35x dropped. The rewriter is linear: the target is ns/byte
at 10 MB within 1.3x of 1 MB, for every format. Wall time is noisy on a shared machine: instruction
counts (``valgrind --tool=callgrind``, the run minus building the stream) compare the formats steadily.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import functools
import gc
import importlib
import importlib.util
import itertools
import json
import random
import sys
import time
import types
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, NamedTuple

from aiostream import streamcontext

from operators.delimiters import DelimiterRewriter, rewrite_delimiters
from pipeline.models import ChunkResponse

CHUNK = 4
SIZES = (1_000_000, 10_000_000)
BUILT_MAX = 10_000_000
"""The largest stream built; a larger size repeats it (see the module doc)."""
PEER_MAX = 200_000
"""How many characters of each stream the peer rows run on by default (some peers are quadratic)."""
TARGET_RATIO = 1.3
_PROSE = (
    "Let me look at the repository layout first. ",
    "The function returns a list of <items> | results, so 2 < 3 holds. ",
    "I'll read the configuration and then update the tests accordingly.\n",
    "Les résultats sont stockés dans un cache; 東京の天気も確認します。 ",
    "Done with this step <| next one |> follows.\n",
)
_VALUES = (
    'print("hello, \\"world\\"")\n',
    "C:\\Users\\dev\\file.txt",
    "naïve café → ☕ and emoji 🎉",
    "literal <|tool_call_end|> inside a string",
    "SELECT * FROM t WHERE name = 'x'",
)


Calls = list[tuple[str, str, str]]


class Stream(NamedTuple):
    """A benchmark stream: its text, the content and calls ``(id, name, args)`` it should give, and how
    many of its characters are markup (tags, headers, parameter keys: neither text nor argument text as
    the model wrote it), which the lexer's states read rather than its rules pass on."""

    text: str
    content: str
    calls: Calls
    markup: int


def kimi_stream(size: int, seed: int = 7) -> Stream:
    """About ``size`` characters of Kimi-K2 output."""
    rng = random.Random(seed)
    parts: list[str] = []
    content: list[str] = []
    calls: Calls = []
    total = markup = 0
    while total < size:
        prose = "".join(rng.choice(_PROSE) for _ in range(rng.randint(3, 12)))
        parts.append(prose)
        content.append(prose)
        section = ["<|tool_calls_section_begin|>"]
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(("read_file", "write_file", "search", "run_shell"))
            call_id = f"functions.{name}:{len(calls)}"
            arguments = json.dumps(
                {
                    "path": f"src/module_{rng.randint(0, 999)}.py",
                    "content": "".join(rng.choice(_VALUES) for _ in range(rng.randint(2, 30))),
                    "options": {
                        "overwrite": rng.random() < 0.5,
                        "lines": [rng.randint(1, 99) for _ in range(4)],
                    },
                },
                ensure_ascii=rng.random() < 0.5,
            )
            section.append(
                f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{arguments}<|tool_call_end|>"
            )
            calls.append((call_id, name, arguments))
            markup -= len(arguments)  # (what the model wrote, not markup)
        section.append("<|tool_calls_section_end|>")
        text = "".join(section)
        parts.append(text)
        total += len(prose) + len(text)
        markup += len(text)
    return Stream("".join(parts), "".join(content), calls, markup)


_QWEN_VALUES = (
    'print("hello, \\"world\\"")\n',
    "C:\\Users\\dev\\file.txt",
    "naïve café → ☕ and emoji 🎉",
    "literal <tool_call> and </param> inside a value",
    "SELECT * FROM t WHERE name = 'x'",
)


def _arguments(rng: random.Random, values: tuple[str, ...]) -> dict[str, object]:
    return {
        "path": f"src/module_{rng.randint(0, 999)}.py",
        "content": "".join(rng.choice(values) for _ in range(rng.randint(2, 30))),
        "options": {"overwrite": rng.random() < 0.5, "lines": [rng.randint(1, 99) for _ in range(4)]},
    }


def qwen3_coder_stream(
    size: int, seed: int = 7, block: tuple[str, str] = ("<tool_call>", "</tool_call>")
) -> Stream:
    """About ``size`` characters of Qwen3-Coder output: prose, then one to three XML calls, and so on
    (each in ``block``, its opening and closing tags)."""
    rng = random.Random(seed)
    parts: list[str] = []
    content: list[str] = []
    calls: Calls = []
    total = markup = 0
    while total < size:
        prose = "".join(rng.choice(_PROSE) for _ in range(rng.randint(3, 12)))
        parts.append(prose)
        content.append(prose)
        total += len(prose)
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(("read_file", "write_file", "search", "run_shell"))
            arguments = _arguments(rng, _QWEN_VALUES)
            values = {
                key: value if isinstance(value, str) else json.dumps(value)
                for key, value in arguments.items()
            }
            params = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in values.items())
            text = f"{block[0]}\n<function={name}>\n{params}</function>\n{block[1]}"
            parts.append(text)
            total += len(text)
            markup += len(text) - sum(map(len, values.values()))
            calls.append((str(len(calls)), name, json.dumps(arguments, ensure_ascii=False)))
    return Stream("".join(parts), "".join(content), calls, markup)


def harmony_stream(size: int, seed: int = 7) -> Stream:
    """About ``size`` characters of gpt-oss harmony output: ``analysis`` and ``final`` messages (their
    text, the reasoning and the content) with one to three function calls between them."""
    rng = random.Random(seed)
    parts: list[str] = []
    content: list[str] = []
    calls: Calls = []
    total = markup = 0
    while total < size:
        thought = "".join(rng.choice(_PROSE) for _ in range(rng.randint(1, 6)))
        prose = "".join(rng.choice(_PROSE) for _ in range(rng.randint(3, 12)))
        messages = [f"<|start|>assistant<|channel|>analysis<|message|>{thought}<|end|>"]
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(("read_file", "write_file", "search", "run_shell"))
            arguments = json.dumps(_arguments(rng, _VALUES), ensure_ascii=rng.random() < 0.5)
            messages.append(
                f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json"
                f"<|message|>{arguments}<|call|>"
            )
            calls.append((str(len(calls)), name, arguments))
            markup -= len(arguments)  # (what the model wrote, not markup)
        messages.append(f"<|start|>assistant<|channel|>final<|message|>{prose}<|end|>")
        content.append(prose)
        text = "".join(messages)
        parts.append(text)
        total += len(text)
        markup += len(text) - len(thought) - len(prose)
    return Stream("".join(parts), "".join(content), calls, markup)


def hermes_stream(size: int, seed: int = 7) -> Stream:
    """About ``size`` characters of Hermes output: prose, then one to three ``<tool_call>`` JSON calls."""
    rng = random.Random(seed)
    parts: list[str] = []
    content: list[str] = []
    calls: Calls = []
    total = markup = 0
    while total < size:
        prose = "".join(rng.choice(_PROSE) for _ in range(rng.randint(3, 12)))
        parts.append(prose)
        content.append(prose)
        total += len(prose)
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(("read_file", "write_file", "search", "run_shell"))
            arguments = json.dumps(_arguments(rng, _VALUES), ensure_ascii=rng.random() < 0.5)
            text = f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'
            parts.append(text)
            total += len(text)
            markup += len(text) - len(arguments)
            calls.append((str(len(calls)), name, arguments))
    return Stream("".join(parts), "".join(content), calls, markup)


def pythonic_stream(size: int, seed: int = 7) -> Stream:
    """About ``size`` characters of Llama 4 pythonic output: prose, then ``<|python_start|>[...]
    <|python_end|>`` with one to three calls whose arguments are Python literals (``repr``)."""
    rng = random.Random(seed)
    parts: list[str] = []
    content: list[str] = []
    calls: Calls = []
    total = markup = 0
    while total < size:
        prose = "".join(rng.choice(_PROSE) for _ in range(rng.randint(3, 12)))
        parts.append(prose)
        content.append(prose)
        written = []
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(("read_file", "write_file", "search", "run_shell"))
            arguments = _arguments(rng, _VALUES)
            values = [f"{key}={value!r}" for key, value in arguments.items()]
            written.append(f"{name}({', '.join(values)})")
            markup += len(written[-1]) - sum(len(value) for value in values)
            calls.append((str(len(calls)), name, json.dumps(arguments, ensure_ascii=False)))
        text = f"<|python_start|>[{', '.join(written)}]<|python_end|>"
        parts.append(text)
        total += len(prose) + len(text)
        markup += len(text) - sum(map(len, written))
    return Stream("".join(parts), "".join(content), calls, markup)


def pythonic_floor(text: str) -> int:
    """The floor of the ``pythonic`` rows: the work a parser that waits for the whole answer does once,
    each call list cut out with ``str.split``, parsed with ``ast.parse`` and its keyword values
    converted with ``ast.literal_eval`` and ``json.dumps``; no streaming, no text passed on. Returns
    the calls it read."""
    count = 0
    for section in text.split("<|python_start|>")[1:]:
        body = section.split("<|python_end|>", 1)[0]
        tree = ast.parse(body, mode="eval").body
        assert isinstance(tree, ast.List)
        for call in tree.elts:
            assert isinstance(call, ast.Call)
            json.dumps(
                {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords},
                ensure_ascii=False,
            )
            count += 1
    return count


def _floor_row(fmt: str, text: str, calls: int, core: float, args: argparse.Namespace) -> None:
    """The ``pythonic`` floor (:func:`pythonic_floor`) on the same text, and the rewriter's ``x floor``."""
    if fmt != "pythonic":
        return
    times = []
    for _ in range(args.repeat):
        gc.collect()
        start = time.process_time()
        assert pythonic_floor(text) == calls
        times.append(time.process_time() - start)
    elapsed = min(times)
    size_bytes = len(text.encode())
    print(
        f"{'':>10} {'pythonic floor: ast.parse per list':<40} {'':>7} {'':>10} {calls:>7} {elapsed:>8.2f} "
        f"{size_bytes / elapsed / 1e6:>7.2f} {elapsed * 1e9 / size_bytes:>8.1f} {'':>9} {'':>9} "
        f"{core / elapsed:>6.1f}x floor"
    )


STREAMS: dict[str, Callable[[int], Stream]] = {
    "kimi_k2": kimi_stream,
    "qwen3_coder": qwen3_coder_stream,
    "seed_oss": functools.partial(qwen3_coder_stream, block=("<seed:tool_call>", "</seed:tool_call>")),
    "hermes": hermes_stream,
    "harmony": harmony_stream,
    "pythonic": pythonic_stream,
}
"""The streams by format name (the rewriter's format of the same name reads each)."""


def prose_stream(size: int, seed: int = 7) -> str:
    """About ``size`` characters of the prose alone (no markers)."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        parts.append(rng.choice(_PROSE))
        total += len(parts[-1])
    return "".join(parts)


def deltas(text: str) -> list[ChunkResponse]:
    return [ChunkResponse(content=text[start : start + CHUNK]) for start in range(0, len(text), CHUNK)]


def fold(chunks: Sequence[ChunkResponse]) -> tuple[str, Calls]:
    content = "".join(chunk.content for chunk in chunks)
    calls: dict[int, list[str]] = {}
    ids: dict[int, tuple[str, str]] = {}
    for chunk in chunks:
        for delta in chunk.tool_calls or ():
            if delta.index not in ids:
                ids[delta.index] = (delta.call_id or "", delta.name or "")
                calls[delta.index] = []
            if delta.arguments_delta:
                calls[delta.index].append(delta.arguments_delta)
    return content, [(*ids[index], "".join(calls[index])) for index in sorted(ids)]


def run_core(
    items: list[ChunkResponse], fmt: str = "kimi_k2", keep: bool = True, passes: int = 1
) -> tuple[float, list[ChunkResponse]]:
    """Seconds to rewrite ``items`` (``passes`` times in a row, one stream) and the output
    (``keep=False``: each output dropped as it comes, as a consumer lets it go; the output returned is
    then empty)."""
    rewriter = DelimiterRewriter(fmt, id_factory=str)
    out: list[ChunkResponse] = []
    extend = out.extend
    feed = rewriter.feed
    stream = itertools.chain.from_iterable(itertools.repeat(items, passes)) if passes > 1 else items
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        if keep:
            for item in stream:
                extend(feed(item))
            extend(rewriter.finish())
        else:
            for item in stream:
                feed(item)
            rewriter.finish()
        elapsed = time.process_time() - start
    finally:
        gc.enable()
    return elapsed, out


async def _run_operator(
    items: list[ChunkResponse], fmt: str, keep: bool = True, passes: int = 1
) -> tuple[float, list[ChunkResponse]]:
    out: list[ChunkResponse] = []
    append = out.append if keep else _drop

    async def source() -> AsyncIterator[ChunkResponse]:
        for _ in range(passes):
            for item in items:
                yield item

    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        async with streamcontext(rewrite_delimiters(source(), fmt, id_factory=str)) as chunks:
            async for chunk in chunks:
                append(chunk)
        elapsed = time.process_time() - start
    finally:
        gc.enable()
    return elapsed, out


def _drop(chunk: ChunkResponse) -> None:
    """What a consumer that lets each chunk go does with it."""


def run_operator(
    items: list[ChunkResponse], fmt: str = "kimi_k2", keep: bool = True, passes: int = 1
) -> tuple[float, list[ChunkResponse]]:
    return asyncio.run(_run_operator(items, fmt, keep, passes))


_SGLANG_DETECTORS: Final = {
    "kimi_k2": ("kimik2_detector", "KimiK2Detector"),
    "qwen3_coder": ("qwen3_coder_detector", "Qwen3CoderDetector"),
    "hermes": ("hermes_detector", "HermesDetector"),
    "harmony": ("gpt_oss_detector", "GptOssDetector"),
    "pythonic": ("pythonic_detector", "PythonicDetector"),
}


def sglang_detectors() -> tuple[dict[str, Any], list[Any]]:
    """SGLang's detector class per stream (those that import) and the tools to call them with; empty
    when sglang is not installed. Their modules are imported unchanged (the stubs: see the module doc)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return {}, []
    root = spec.submodule_search_locations[0]
    from pydantic import BaseModel

    class Function(BaseModel):
        name: str
        description: str | None = None
        parameters: Any = None
        strict: bool | None = None

    class Tool(BaseModel):
        type: str = "function"
        function: Function

    class ToolChoice(BaseModel):
        type: str = "function"
        function: Any = None

    for name, path in (("sglang", root), ("sglang.srt", f"{root}/srt")):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package
    protocol = types.ModuleType("sglang.srt.entrypoints.openai.protocol")
    protocol.__dict__.update(Function=Function, Tool=Tool, ToolChoice=ToolChoice)
    sys.modules.setdefault(protocol.__name__, protocol)
    detectors: dict[str, Any] = {}
    for fmt, (module, name) in _SGLANG_DETECTORS.items():
        try:
            detectors[fmt] = getattr(importlib.import_module(f"sglang.srt.function_call.{module}"), name)
        except ImportError:
            continue
    properties = {"path": {"type": "string"}, "content": {"type": "string"}, "options": {"type": "object"}}
    schema = {"type": "object", "properties": properties}
    tools = [
        Tool(function=Function(name=name, parameters=schema))
        for name in ("read_file", "write_file", "search", "run_shell")
    ]
    return detectors, tools


def run_peer(texts: list[str], detector_type: Any, tools: list[Any], passes: int = 1) -> tuple[float, int]:
    """Seconds for a fresh SGLang detector to parse ``texts`` delta by delta (``passes`` times in a row),
    and how many calls it named."""
    detector = detector_type()
    parse = detector.parse_streaming_increment
    stream = itertools.chain.from_iterable(itertools.repeat(texts, passes)) if passes > 1 else texts
    named = 0
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        for text in stream:
            for call in parse(text, tools).calls:
                named += call.name is not None
        elapsed = time.process_time() - start
    finally:
        gc.enable()
    return elapsed, named


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="stream sizes in characters"
    )
    parser.add_argument(
        "--formats", nargs="+", choices=list(STREAMS), default=list(STREAMS), help="streams to run"
    )
    parser.add_argument("--no-async", action="store_true", help="skip the async operator rows")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the fastest counts")
    parser.add_argument(
        "--peer-max", type=int, default=PEER_MAX, help="characters of each stream the SGLang rows run on"
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="time a consumer that keeps every output chunk until the run ends (fresh memory: see above)",
    )
    parser.add_argument(
        "--growth",
        action="store_true",
        help="run each stream at 1x, 10x and 100x the first --sizes and print ns/byte over 1x (flat: linear)",
    )
    args = parser.parse_args(argv)
    if args.growth:
        args.sizes = [args.sizes[0] * factor for factor in (1, 10, 100)]
    args.peers = sglang_detectors()
    print(
        f"{'stream':>10} {'path':<40} {'markup':>7} {'deltas':>10} {'calls':>7} {'seconds':>8} {'MB/s':>7}"
        f" {'ns/byte':>8}"
        f" {'ns/delta':>9} {'+ns/delta':>9} {'x peer':>7}"
    )
    per_byte: dict[str, list[float]] = {}
    for fmt in args.formats:
        for size in args.sizes:
            _rows(fmt, size, args, per_byte)
    status = 0
    for label, values in per_byte.items():
        if len(values) > 1:
            ratio = values[-1] / values[0]
            verdict = "ok" if ratio <= TARGET_RATIO else f"ABOVE the {TARGET_RATIO}x target"
            print(f"{label}: ns/byte at the largest size / smallest = {ratio:.2f} ({verdict})")
            status = status or int(ratio > TARGET_RATIO)
    if args.growth:
        for label, values in per_byte.items():
            ratios = ", ".join(
                f"{size // args.sizes[0]}x {value / values[0]:.2f}"
                for size, value in zip(args.sizes[1:], values[1:], strict=False)
            )
            print(f"{label}: ns/byte over 1x: {ratios}")
    return status


def _rows(fmt: str, size: int, args: argparse.Namespace, per_byte: dict[str, list[float]]) -> None:
    """The rows of one format's stream of about ``size`` characters; ns/byte kept in ``per_byte``."""
    passes = max(1, round(size / BUILT_MAX))
    text, content, calls, markup = STREAMS[fmt](size // passes)
    items = deltas(text)
    size_bytes = len(text.encode())
    # XML-style parameters are rewritten as JSON, Hermes's arguments are the object as the model wrote
    # it: their calls are compared parsed.
    normal: Callable[[str], object] = (
        json.loads if fmt in ("qwen3_coder", "seed_oss", "hermes", "pythonic") else str
    )
    expected = (content, [(call_id, name, normal(arguments)) for call_id, name, arguments in calls])

    def check(out: list[ChunkResponse]) -> bool:
        folded, got = fold(out)
        return (folded, [(call_id, name, normal(arguments)) for call_id, name, arguments in got]) == expected

    core_runner = functools.partial(run_core, fmt=fmt)
    label = f"{fmt} DelimiterRewriter.feed"
    shown = f"{size_bytes * passes / 1e6:>8.1f}MB"
    row = _Row(items, size_bytes, passes, len(calls) * passes)
    core = _row(shown, label, core_runner, row, args, check, markup=markup / len(text))
    per_byte.setdefault(label, []).append(core * 1e9 / (size_bytes * passes))
    _floor_row(fmt, text, len(calls), core / passes, args)
    if not args.no_async:
        label = f"{fmt} rewrite_delimiters (async)"
        runner = functools.partial(run_operator, fmt=fmt)
        elapsed = _row("", label, runner, row, args, check, core=core)
        per_byte.setdefault(label, []).append(elapsed * 1e9 / (size_bytes * passes))
    if size == args.sizes[0]:
        _peer_row(fmt, row, args)
    del items, row
    prose = prose_stream(size // passes)

    def passes_on(out: list[ChunkResponse]) -> bool:
        return fold(out) == (prose, [])

    prose_row = _Row(deltas(prose), len(prose.encode()), passes, 0)
    _row("", f"{fmt} prose (pass-through)", core_runner, prose_row, args, passes_on)


class _Row(NamedTuple):
    """What a row runs: the deltas, their bytes, how many times in a row, and the calls they make."""

    items: list[ChunkResponse]
    size_bytes: int
    passes: int
    calls: int


def _peer_row(fmt: str, row: _Row, args: argparse.Namespace) -> None:
    """SGLang's detector on the first ``--peer-max`` characters of the same deltas (see the module doc),
    and the rewriter on them again: ``x peer`` is the peer's time over the rewriter's."""
    label = f"{fmt} SGLang parse_streaming_increment"
    detectors, tools = args.peers
    if fmt not in detectors:
        print(f"{'':>10} {label:<40} not installed")
        return
    items = row.items[: max(1, args.peer_max // CHUNK)]
    texts = [item.content for item in items]
    prefix = _Row(items, len("".join(texts).encode()), 1, len(fold(run_core(items, fmt)[1])[1]))
    core = min(run_core(items, fmt, keep=False)[0] for _ in range(args.repeat))
    elapsed, named = run_peer(texts, detectors[fmt], tools)
    for _ in range(args.repeat - 1):
        elapsed = min(elapsed, run_peer(texts, detectors[fmt], tools)[0])
    _print_row(f"{prefix.size_bytes / 1e6:>8.1f}MB", f"{fmt} DelimiterRewriter.feed", prefix, core, "", "")
    _print_row("", label, prefix._replace(calls=named), elapsed, "", f"{elapsed / core:>7.1f}x")


def _row(
    stream_label: str,
    label: str,
    runner: Callable[..., tuple[float, list[ChunkResponse]]],
    row: _Row,
    args: argparse.Namespace,
    check: Callable[[list[ChunkResponse]], bool],
    *,
    core: float | None = None,
    markup: float | None = None,
) -> float:
    """Time ``runner`` over ``row`` (the fastest of ``--repeat`` runs, after one more that keeps its
    output of one pass, checked and then dropped; with ``--keep``, the runs keep theirs), print its row
    and return the seconds."""
    elapsed, out = runner(row.items, keep=True)
    if not check(out):
        raise SystemExit(f"{label} on {stream_label.strip() or 'the stream'} gave the wrong text or calls")
    del out
    keep = args.keep
    times = [runner(row.items, keep=keep, passes=row.passes)[0] for _ in range(args.repeat)]
    if keep and row.passes == 1:
        times.append(elapsed)
    elapsed = min(times)
    added = f"{(elapsed - core) * 1e9 / (len(row.items) * row.passes):>9.0f}" if core is not None else ""
    share = f"{markup:>7.1%}" if markup is not None else ""
    _print_row(stream_label, label, row, elapsed, share, "", added)
    return elapsed


def _print_row(
    stream_label: str, label: str, row: _Row, elapsed: float, share: str, peer: str, added: str = ""
) -> None:
    size_bytes = row.size_bytes * row.passes
    deltas_count = len(row.items) * row.passes
    print(
        f"{stream_label:>10} {label:<40} {share:>7} {deltas_count:>10} {row.calls:>7} {elapsed:>8.2f} "
        f"{size_bytes / elapsed / 1e6:>7.2f} {elapsed * 1e9 / size_bytes:>8.1f} "
        f"{elapsed * 1e9 / deltas_count:>9.0f} {added:>9} {peer}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
