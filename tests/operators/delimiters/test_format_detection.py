# ruff: noqa: RUF001  (DeepSeek's markers use full-width bars)
"""``--tool-format auto`` and ``streamfold formats``: every registered format says which models write it
and what names it; the detector reads those declarations, so every format is told apart from the others
and from prose, at any chunking, and the CLI and the docs list them all."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import FORMATS, FormatLexer
from operators.delimiters.detect import (
    MAX_HELD_CHARS,
    FormatDetector,
    detect_tool_format,
    detected_formats,
    registry_detector,
)
from operators.delimiters.formats.hermes import HermesLexer
from pipeline.cli.formats import describe_formats, render_formats
from pipeline.cli.main import main
from pipeline.proxy.autodetect import AutoToolRewriter
from tests.conftest import ROOT
from tests.delimiter_cases import collect, numbered_ids, pieces_at, run

DOCS = ROOT / "docs"

DS = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
SAMPLES: dict[str, str] = {
    "kimi_k2": "Checking. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>',
    "deepseek_v3": f"Checking. {DS}function<｜tool▁sep｜>get_weather\n```json\n"
    '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "deepseek_v31": f'Checking. {DS}get_weather<｜tool▁sep｜>{{"city": "Paris"}}'
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "deepseek_v32": 'Checking. <｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
    "</｜DSML｜function_calls>",
    "hermes": 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    "qwen3_coder": "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</tool_call>",
    "glm45": "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    "</tool_call>",
    "minimax_m2": 'Checking.\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris'
    "</parameter>\n</invoke>\n</minimax:tool_call>",
    "mistral": 'Checking. [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
    "harmony": "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    '{"city": "Paris"}<|call|>',
    "llama3_json": '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    "xml": 'Checking. <tool name="get_weather"><arguments><arg name="city">Paris</arg></arguments></tool>',
    "json": 'Checking. {"tool": {"function": "get_weather", "parameters": {"city": "Paris"}}}',
    "sentinel": 'Checking. [[SEG_START {"type": "tool_call", "tool_name": "get_weather"}]]'
    '{"city": "Paris"}[[SEG_END]]',
    "pythonic": '[get_weather(city="Paris")]',
    "olmo3": "Checking.\n<function_calls>get_weather(city='Paris')</function_calls>",
    "lfm2": "<|tool_call_start|>[get_weather(city='Paris')]<|tool_call_end|>Checking.",
    "gemma4": 'Checking. <|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>',
    "functiongemma": "Checking. <start_function_call>call:get_weather{city:<escape>Paris<escape>}"
    "<end_function_call>",
    "granite": '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    "granite_20b_fc": '<function_call> {"name": "get_weather", "arguments": {"city": "Paris"}}',
    "internlm2": "Checking. <|action_start|><|plugin|>"
    '{"name": "get_weather", "parameters": {"city": "Paris"}}<|action_end|>',
    "gigachat3": "Checking.<|message_sep|>\n\nfunction call<|role_sep|>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}</s>',
    "gigachat35": '<｜GCML｜tool_calls><｜GCML｜invoke name="get_weather"><｜GCML｜parameter name="city" '
    'string="true">Paris</｜GCML｜parameter></｜GCML｜invoke></｜GCML｜tool_calls>',
    "jamba": ' <tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>',
    "phi4_mini": 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    "xlam": 'Checking.\n```json\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n```',
    "cohere_command": "<|START_THINKING|>The user asks.<|END_THINKING|><|START_ACTION|>\n"
    '[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}]\n<|END_ACTION|>',
    "longcat": '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
    "</longcat_tool_call>",
    "seed_oss": "Checking.\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
    "</function>\n</seed:tool_call>",
    "step3": '<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="get_weather">'
    '<steptml:parameter name="city">Paris</steptml:parameter></steptml:invoke><｜tool_call_end｜>'
    "<｜tool_calls_end｜>",
    "hunyuan": "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
    "<arg_value>Paris</arg_value>\n</tool_call>\n</tool_calls>",
    "kimi_k3": '<|open|>tools<|sep|>\n  <|open|>call tool="get_weather" index="1"<|sep|>\n'
    '    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>\n'
    "  <|close|>call<|sep|>\n<|close|>tools<|sep|>",
    "minimax_m3": ']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<city>'
    "Paris]<]minimax[>[</city>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>",
}
"""One answer with a call per detected format: every detected format must have one."""


def lexers() -> list[type[FormatLexer]]:
    return list(dict.fromkeys(FORMATS.values()))


def test_every_format_names_the_models_that_write_it() -> None:
    assert [lexer.name for lexer in lexers() if not lexer.models] == []


def test_every_format_is_detected_or_read_by_a_detected_one() -> None:
    detected = {FORMATS[name] for name in detected_formats()}
    undetected = [
        lexer.name
        for lexer in lexers()
        if lexer not in detected and not any(issubclass(lexer, other) for other in detected)
    ]
    assert undetected == []


def test_every_detected_format_has_a_sample_here() -> None:
    assert sorted(set(detected_formats()) - set(SAMPLES)) == []


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_sample_names_its_format_and_the_format_reads_its_call(name: str) -> None:
    text = SAMPLES[name]
    assert detect_tool_format(text) == name
    assert [call.name for call in run(name, [text], id_factory=numbered_ids).calls] == ["get_weather"]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_no_prefix_names_another_format(name: str) -> None:
    """While the answer grows, the detector says "wait", "no call yet" or the right format: never another."""
    text = SAMPLES[name]
    for end in range(len(text) + 1):
        assert detect_tool_format(text[:end], final=False) in ("", None, name), text[:end]


@pytest.mark.parametrize("name", sorted(SAMPLES))
@settings(max_examples=20, deadline=None)
@given(cuts=st.lists(st.integers(0, 200), max_size=8).map(sorted))
def test_auto_rewrites_as_the_named_format_at_any_chunking(name: str, cuts: list[int]) -> None:
    pieces = pieces_at(SAMPLES[name], cuts)
    auto = AutoToolRewriter(id_factory=numbered_ids)
    from pipeline.models import ChunkResponse

    out = [chunk for piece in pieces for chunk in auto.feed(ChunkResponse(content=piece))]
    out += auto.finish()
    assert auto.format == name
    assert collect(out) == run(name, pieces, id_factory=numbered_ids)


@pytest.mark.parametrize(
    "text",
    [
        "the <tool_call> tag wraps a call",
        '{"name": "Alice", "age": 3}',  # a JSON answer that is not a call
        '{"type": "person", "name": "Alice"}',
        'Use [TOOL to write <tool name "x">',
        'I will answer: {"name": "get_weather", "parameters": {}}',  # not at the answer's start
    ],
)
def test_prose_and_other_json_name_no_format(text: str) -> None:
    assert detect_tool_format(text) is None


def test_a_held_opener_is_released_past_the_cap() -> None:
    assert detect_tool_format("a list [TOOL", final=False) == ""
    assert detect_tool_format("<tool_call>\n" + " " * (MAX_HELD_CHARS + 1), final=False) is None
    assert detect_tool_format('{"name": "' + "x" * (MAX_HELD_CHARS + 1), final=False) is None


def test_reasoning_first_then_a_bare_json_call_in_the_content() -> None:
    from pipeline.models import ChunkResponse

    auto = AutoToolRewriter(id_factory=numbered_ids)
    out = auto.feed(ChunkResponse(reasoning="The user wants the weather."))
    out += auto.feed(ChunkResponse(content='{"name": "get_weather", '))
    out += auto.feed(ChunkResponse(content='"parameters": {"city": "Paris"}}'))
    out += auto.finish()
    assert auto.format == "llama3_json"
    result = collect(out)
    assert (result.reasoning, result.content) == ("The user wants the weather.", "")
    assert result.parsed() == [("get_weather", {"city": "Paris"})]


def test_a_detector_is_made_of_any_formats_and_the_registry_one_follows_registrations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class AngleCall(HermesLexer):
        name = "angle_call"
        aliases = ()
        models = ("a test model",)
        detect_openers = ("<angle_call>",)

    assert FormatDetector({"angle_call": AngleCall}).detect('<angle_call>{"name"') == "angle_call"
    assert FormatDetector({"angle_call": AngleCall}).detect('<tool_call>{"name"') is None
    assert "angle_call" not in detected_formats()
    monkeypatch.setitem(FORMATS, "angle_call", AngleCall)
    assert "angle_call" in detected_formats()
    assert registry_detector().detect("<angle_call>{") == "angle_call"


def test_streamfold_formats_lists_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats"]) == 0
    table = capsys.readouterr().out
    names = {line.split()[0] for line in table.splitlines()[1:]}
    assert names == {"none", *(lexer.name for lexer in lexers())}
    assert main(["formats", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == [json.loads(line) for line in render_formats(as_json=True).splitlines()]
    assert {row["name"] for row in rows} == {lexer.name for lexer in lexers()}
    hermes = next(row for row in describe_formats() if row.name == "hermes")
    assert hermes.detected_by == ("<tool_call> then {",)


def test_the_docs_table_has_a_row_per_format() -> None:
    page = (DOCS / "tool-formats.md").read_text()
    rows = " ".join(line for line in page.splitlines() if line.startswith("| "))
    documented = set(re.findall(r"`([a-z0-9_]+)`", rows))
    assert sorted({lexer.name for lexer in lexers()} - documented) == []


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(SAMPLES))
async def test_process_with_tool_format_auto_gives_what_the_named_format_gives(name: str) -> None:
    from pipeline.compose import process
    from pipeline.models import ToolInvocation
    from pipeline.testing import collect as gather
    from pipeline.testing import sequential_call_ids

    async def invocations(tool_format: str) -> list[ToolInvocation]:
        events = process(
            [SAMPLES[name]],
            provider="text",
            tool_format=tool_format,  # type: ignore[arg-type]
            id_factory=sequential_call_ids,
        )
        return [event for event in await gather(events) if isinstance(event, ToolInvocation)]

    named = await invocations(name)
    assert [invocation.name for invocation in named] == ["get_weather"]
    assert await invocations("auto") == named


def test_replay_reads_tool_calls_with_tool_format_auto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = tmp_path / "answer.txt"
    recording.write_text(SAMPLES["qwen3_coder"])
    assert main(["replay", str(recording), "--tool-format", "auto", "--output", "jsonl", "--speed", "0"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    folded = [event for event in events if event["type"] == "TOOL_INVOCATION"]
    assert [(event["name"], event["arguments"]) for event in folded] == [("get_weather", {"city": "Paris"})]
