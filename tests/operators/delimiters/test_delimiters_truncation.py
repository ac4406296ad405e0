"""Every format, cut after every character (a ``max_tokens`` cut): the rewriter ends cleanly.

The texts put JSON escapes everywhere a format reads JSON (keys, names, ids, values, arguments written as
a JSON string, surrogate pairs), since a cut right after a backslash is where lexers used to fail.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import FORMATS
from pipeline._jsonenc import arguments_complete
from pipeline.models import ChunkResponse
from tests.delimiter_cases import Call, assert_every_prefix_ends_cleanly, pieces_at, run

ARGS = '{"k\\"ey\\\\": "v\\u00e9\\ud83d\\ude00\\n", "n\\u0041": [1, {"x": "\\/"}]}'
"""JSON arguments with escapes in keys and values, and a surrogate pair."""

STRING_ARGS = '"{\\"k\\\\\\"ey\\": \\"v\\\\u00e9\\ud83d\\ude00\\"}"'
"""The same kind of arguments written as a JSON string (Granite)."""

DS = "\uff5c"
SEP = "\u2581"

TEXTS: dict[str, list[str]] = {
    "hermes": [
        f'Hi <tool_call>\n{{"na\\u006de": "get\\"w", "arguments": {ARGS}}}\n</tool_call> bye',
        f'<tool_call>{{"id": "a\\\\b", "name": "f", "arguments": {STRING_ARGS}}}</tool_call>',
    ],
    "mistral": [
        f'[TOOL_CALLS][{{"na\\u006de": "get\\"w", "id": "ab\\\\c", "arguments": {ARGS}}}, '
        f'{{"name": "g", "arguments": {STRING_ARGS}}}] ok',
        f'[TOOL_CALLS]{{"name": "f\\\\", "arguments": {ARGS}}}',
        f"[TOOL_CALLS]get_w[CALL_ID]a1B2c3D4e[ARGS]{ARGS}[TOOL_CALLS]f[ARGS]{ARGS} done",
    ],
    "llama3_json": [
        f'<|python_tag|>{{"na\\u006de": "get\\"w", "parameters": {ARGS}}}; '
        f'{{"type": "function", "name": "g", "arguments": {STRING_ARGS}}}<|eom_id|>',
        f'{{"name": "f\\\\", "parameters": {ARGS}}}',
    ],
    "json": [
        f'{{"tool": {{"function": "f\\"", "id": "x\\\\", "parameters": {ARGS}}}}} after',
        f'```json\n{{"tools": [{{"function": "a", "parameters": {ARGS}}}]}}\n```',
    ],
    "kimi_k2": [
        "x<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        f"{ARGS}<|tool_call_end|><|tool_calls_section_end|>y",
    ],
    "deepseek_v31": [
        f"a<{DS}tool{SEP}calls{SEP}begin{DS}><{DS}tool{SEP}call{SEP}begin{DS}>f<{DS}tool{SEP}sep{DS}>"
        f"{ARGS}<{DS}tool{SEP}call{SEP}end{DS}><{DS}tool{SEP}calls{SEP}end{DS}>b",
    ],
    "deepseek_v3": [
        f"<{DS}tool{SEP}calls{SEP}begin{DS}><{DS}tool{SEP}call{SEP}begin{DS}>function<{DS}tool{SEP}sep{DS}>f"
        f"\n```json\n{ARGS}\n```<{DS}tool{SEP}call{SEP}end{DS}><{DS}tool{SEP}calls{SEP}end{DS}>",
    ],
    "deepseek_v32": [
        f'<{DS}DSML{DS}function_calls>\n<{DS}DSML{DS}invoke name="f">\n'
        f'<{DS}DSML{DS}parameter name="a" string="true">x\\"y\\</{DS}DSML{DS}parameter>\n'
        f'<{DS}DSML{DS}parameter name="b" string="false">{ARGS}</{DS}DSML{DS}parameter>\n'
        f"</{DS}DSML{DS}invoke>\n</{DS}DSML{DS}function_calls>",
    ],
    "glm45": [
        f"<tool_call>f\n<arg_key>k\\</arg_key>\n<arg_value>{ARGS}</arg_value>\n"
        '<arg_key>s</arg_key>\n<arg_value>a\\"b\\</arg_value>\n</tool_call>',
    ],
    "glm47": [f"<tool_call>f<arg_key>k</arg_key><arg_value>{ARGS}</arg_value></tool_call>"],
    "qwen3_coder": [
        f"<tool_call>\n<function=f>\n<parameter=k>\n{ARGS}\n</parameter>\n"
        '<parameter=s>\na\\"b\\\n</parameter>\n</function>\n</tool_call>',
        f"Hi <function=f>\n<parameter=k>\n{ARGS}\n</parameter>\n</function>\n</tool_call> "
        "<function=g>\n</function>",
    ],
    "minimax_m2": [
        f'<minimax:tool_call>\n<invoke name="f\\">\n<parameter name="k">{ARGS}</parameter>\n'
        '<parameter name="s">a\\"b\\</parameter>\n</invoke>\n</minimax:tool_call>',
    ],
    "harmony": [
        "<|channel|>analysis<|message|>think \\<|end|><|start|>assistant<|channel|>commentary "
        f"to=functions.f <|constrain|>json<|message|>{ARGS}<|call|>",
    ],
    "granite": [
        f'<|tool_call|>[{{"na\\u006de": "get\\"w", "arguments": {ARGS}}}, '
        f'{{"name": "g", "arguments": {STRING_ARGS}}}]',
        f'[{{"name": "f\\\\", "arguments": {ARGS}}}] ok',
    ],
    "granite_20b_fc": [
        f'<function_call> {{"name": "f\\"", "arguments": {ARGS}}}\n<function_call> {{"name": "g"}}'
    ],
    "internlm2": [f'a<|action_start|><|plugin|>{{"name": "f\\\\", "parameters": {ARGS}}}<|action_end|>b'],
    "gigachat3": [f'a<|message_sep|>\n\nfunction call<|role_sep|>\n{{"name": "f", "arguments": {ARGS}}}</s>'],
    "longcat": [f'<longcat_tool_call>{{"name": "f\\"", "arguments": {STRING_ARGS}}}</longcat_tool_call>'],
    "gigachat35": [
        f'<\uff5cGCML\uff5ctool_calls><\uff5cGCML\uff5cinvoke name="f\\">'
        f'<\uff5cGCML\uff5cparameter name="k" string="false">{ARGS}</\uff5cGCML\uff5cparameter>'
        '<\uff5cGCML\uff5cparameter name="s">a\\"b\\</\uff5cGCML\uff5cparameter>'
        "</\uff5cGCML\uff5cinvoke></\uff5cGCML\uff5ctool_calls>",
    ],
    "jamba": [
        f'<tool_calls>[{{"name": "f", "arguments": {ARGS}}}]</tool_calls>',
        f'x<tool_calls>[{{"name": "f\\"", "arguments": {ARGS}}}, {{"name": "g", "arguments": {STRING_ARGS}}}]'
        "</tool_calls>y",  # Hunyuan-A13B's
    ],
    "phi4_mini": [f'functools[{{"name": "f", "parameters": {ARGS}}}] x'],
    "xlam": [
        f'```json\n[{{"name": "f", "arguments": {ARGS}}}]\n```',
        f'<tool_call>[{{"name": "f", "arguments": {ARGS}}}]</tool_call>',
    ],
    "cohere_command": [
        f'<|START_THINKING|>t\\<|END_THINKING|><|START_ACTION|>[{{"tool_call_id": "0\\"", "tool_name": "f", '
        f'"parameters": {ARGS}}}]<|END_ACTION|>',
        f'Action: ```json\n[{{"tool_name": "f", "parameters": {ARGS}}}]\n```',
    ],
    "xml": [
        f'<tool name="f">\n<arguments>\n<arg name="k\\">{ARGS}</arg>\n<arg name="s">a\\"b\\</arg>\n'
        "</arguments>\n</tool>",
    ],
    "pythonic": [
        "[f(k='v\\'\\u00e9\\U0001f600\\n\\x41', n=[1, {'x': None}]), g()]",
        '<|python_start|>[f(s="a\\"b\\\\", t=(True, 1.5e3))]<|python_end|> after',
    ],
    "olmo3": ["<function_calls>f(k='v\\'\\u00e9', n=1)\ng(d={'a': [true, null]})</function_calls>"],
    "lfm2": ["<|tool_call_start|>[f(k='\\\\x', n=-0.5), g()]<|tool_call_end|>text"],
    "gemma4": [
        '<|tool_call>call:f{k:<|"|>v\\<|"|>,n:[1,{<|"|>x<|"|>:null}],b:true}<tool_call|>'
        "<|tool_call>call:g{}<turn|>text",
    ],
    "functiongemma": ["<start_function_call>call:f{a:<escape>x<escape>b:-1.5}<end_function_call>"],
    "sentinel": [f'[[SEG_START {{"type": "tool_call", "name": "f\\\\", "arguments": {ARGS}}}]]x[[SEG_END]]'],
    "step3": [
        f"x<\uff5ctool_calls_begin\uff5c><\uff5ctool_call_begin\uff5c>function<\uff5ctool_sep\uff5c>"
        f'<steptml:invoke name="f"><steptml:parameter name="k">{ARGS}</steptml:parameter>'
        '<steptml:parameter name="s">a\\"b\\</steptml:parameter></steptml:invoke>'
        "<\uff5ctool_call_end\uff5c><\uff5ctool_calls_end\uff5c>y",
    ],
    "step3p5": [f"<tool_call>\n<function=f>\n<parameter=k>\n{ARGS}\n</parameter>\n</function>\n</tool_call>"],
    "hunyuan": [
        f"<tool_calls>\n<tool_call>f<tool_sep>\n<arg_key>k\\</arg_key>\n<arg_value>{ARGS}</arg_value>\n"
        '<arg_key>s</arg_key><arg_value>a\\"b\\</arg_value></tool_call><tool_call>g</tool_call></tool_calls>',
    ],
    "kimi_k3": [
        '<|open|>response<|sep|>x<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="f\\"<|sep|>'
        f'<|open|>argument key="k" type="object"<|sep|>{ARGS}<|close|>argument<|sep|>'
        '<|open|>argument key="s" type="string"<|sep|>a\\"b\\<|close|>argument<|sep|><|close|>call<|sep|>'
        "<|close|>tools<|sep|><|close|>message<|sep|>",
    ],
    "minimax_m3": [
        ']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="f">]<]minimax[>[<k>a\\"b\\]<]minimax[>[</k>'
        f"]<]minimax[>[<o>]<]minimax[>[<j>{ARGS}]<]minimax[>[</j>]<]minimax[>[</o>]<]minimax[>[</invoke>\n"
        "]<]minimax[>[</tool_call>",
    ],
    "seed_oss": [
        f"a<seed:tool_call>\n<function=f>\n<parameter=k>\n{ARGS}\n</parameter>\n"
        '<parameter=s>a\\"b\\</parameter>\n</function>\n</seed:tool_call>b',
    ],
}


def test_every_format_has_texts() -> None:
    assert {FORMATS[name].name for name in FORMATS} == set(TEXTS)


CASES = [(format, text) for format, texts in TEXTS.items() for text in texts]


@pytest.mark.parametrize(("format", "text"), CASES)
def test_cut_after_every_character_ends_cleanly(format: str, text: str) -> None:
    assert_every_prefix_ends_cleanly(format, text)
    assert_every_prefix_ends_cleanly(format, text, channel="reasoning")


STOP_ENDS = [
    [ChunkResponse(finish_reason="stop", is_complete=True)],
    [ChunkResponse(finish_reason="stop"), ChunkResponse(finish_reason="stop", is_complete=True)],
]
"""How an upstream's ``stop`` arrives: on the last chunk, or on a chunk of its own before it."""


@pytest.mark.parametrize(("format", "text"), CASES)
def test_a_stop_becomes_tool_calls_only_when_every_call_ended(format: str, text: str) -> None:
    """The model stops after every character: a call it left open keeps ``stop`` (no client may run
    it), and ``tool_calls`` comes exactly when each call found ended, its arguments whole JSON whenever
    the whole text's are (a cut inside an end marker that may be left out does not end a call)."""
    json_calls = all(arguments_complete(call.arguments) for call in run(format, [text]).calls)
    for end in range(len(text) + 1):
        for stop in STOP_ENDS:
            result = run(format, [text[:end], *stop])
            ended = bool(result.calls) and all(call.finished for call in result.calls)
            assert result.finish_reasons == ["tool_calls" if ended else "stop"] * len(stop), (end, result)
            if ended and json_calls:
                assert all(arguments_complete(call.arguments) for call in result.calls), (end, result)


@settings(max_examples=200, deadline=None)
@given(case=st.sampled_from(CASES), data=st.data())
def test_cut_anywhere_at_any_chunking_gives_the_whole_prefix_result(
    case: tuple[str, str], data: st.DataObject
) -> None:
    format, text = case
    end = data.draw(st.integers(0, len(text)), label="end")
    prefix = text[:end]
    cuts = data.draw(st.lists(st.integers(1, max(1, end - 1)), max_size=12), label="cuts")
    assert run(format, pieces_at(prefix, cuts)) == run(format, [prefix])


@pytest.mark.parametrize(
    ("format", "text", "name"),
    [
        ("hermes", '<tool_call>{"\\', ""),
        ("hermes", '<tool_call>{"name": "get\\', "get\\"),
        ("mistral", '[TOOL_CALLS]{"\\', ""),
        ("mistral", '[TOOL_CALLS][{"name": "a\\', "a\\"),
        ("llama3_json", '<|python_tag|>{"\\', ""),
        ("llama3_json", '{"name": "a\\', "a\\"),
        ("json", '{"tool": {"\\', ""),
    ],
)
def test_cut_right_after_a_backslash_in_a_key_or_name(format: str, text: str, name: str) -> None:
    for pieces in ([text], list(text)):
        assert run(format, pieces).calls == [Call(0, "call_0", name, "", finished=False)]
