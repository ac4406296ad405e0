"""README.md and the documentation site (docs/) tell the truth: every Python block runs and passes
``mypy --strict``, the set-up commands come first, every link and path resolves, and each claim about names,
options and behaviour is checked here, one test per claim."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import msgspec
import pytest

import operators
import pipeline
import pipeline.seeds
from operators.delimiters import FORMATS
from operators.registry import ToolFormat
from pipeline import ConfigurationError, SegmentType, ToolInvocation, process
from pipeline.cli.main import main
from pipeline.compose import PROVIDERS
from pipeline.seeds.handlers import create_streaming_handler
from pipeline.testing import collect, sequential_call_ids
from tests.conftest import FIXTURES
from tests.reference import read_payloads
from tests.typecheck import TEST_TIMEOUT, run_mypy

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
PAGES = {path: path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]}
"""README.md and every page of the documentation site, by path."""
BLOCKS = [
    (path, block)
    for path, text in PAGES.items()
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
]
BLOCK_IDS = [f"{path.relative_to(ROOT)}:{number}" for number, (path, _) in enumerate(BLOCKS)]


def section(title: str) -> str:
    """The text of the section (any level, in README.md or a docs page) whose heading is ``title``, up to
    the next heading."""
    found = [
        match.group(1)
        for text in PAGES.values()
        for match in re.finditer(
            rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, flags=re.DOTALL | re.MULTILINE
        )
    ]
    assert len(found) == 1, (
        f"{len(found)} sections {title!r} in README.md and docs/: a claim needs exactly one"
    )
    return found[0]


def table_column(text: str, column: int = 0) -> list[str]:
    """The backticked names in one column of the markdown table in ``text`` (header row skipped)."""
    rows = [line for line in text.splitlines() if line.startswith("|")][2:]
    return [name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[column + 1])]


def test_the_set_up_commands_come_first() -> None:
    first = re.search(r"```bash\n(.*?)```", README, flags=re.DOTALL)
    assert first is not None
    assert first.group(1).splitlines() == [
        "pip install -e '.[cli]' && streamfold demo",
        "pip install -e '.[test]' && pytest -n 2",
    ]
    assert README.index("```bash") < README.index("```python")


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=BLOCK_IDS)
def test_every_python_block_runs(page: Path, block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, str(page.relative_to(ROOT)), "exec"), {"__name__": "readme"})
    capsys.readouterr()


@pytest.mark.timeout(TEST_TIMEOUT)
def test_every_python_block_passes_mypy_strict(tmp_path: Path) -> None:
    files = []
    for number, (_, block) in enumerate(BLOCKS):
        path = tmp_path / f"readme_block{number}.py"
        path.write_text(block)
        files.append(str(path))
    report, status = run_mypy(
        "--strict", "--python-version", "3.11", "--cache-dir", str(tmp_path / "cache"), *files
    )
    assert status == 0, report


def test_the_package_ships_the_mit_license_it_declares() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 streamfold developers\n")
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


@pytest.mark.anyio
async def test_any_source_works_a_list_of_provider_dicts_and_one_bytes_object() -> None:
    """In a few lines: "Any source works: ... an SDK stream of objects, a list of provider dicts, one bytes
    object" (SDK objects: tests/operators/adapter/test_sources.py)."""
    recording = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
    dicts = [payload for _, payload in read_payloads(recording)]
    body = recording.read_bytes()
    from_dicts = await collect(process(dicts, id_factory=sequential_call_ids))
    from_bytes = await collect(process(body, id_factory=sequential_call_ids))
    invocations = [event for event in from_dicts if isinstance(event, ToolInvocation)]
    assert [(call.name, call.arguments) for call in invocations] == [
        ("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
        ("get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
    ]
    assert invocations == [event for event in from_bytes if isinstance(event, ToolInvocation)]


def test_what_comes_out_is_the_to_dict_wire_format(capsys: pytest.CaptureFixture[str]) -> None:
    text = section("What comes out")
    lines = re.search(r"```json\n(.*?)```", text, flags=re.DOTALL)
    assert lines is not None
    events = [json.loads(line) for line in lines.group(1).splitlines()]
    assert [event["type"] for event in events] == [
        "SEGMENT_START",
        "SEGMENT_CONTENT",
        "SEGMENT_ARGUMENT",
        "SEGMENT_ARGUMENT",
        "SEGMENT_ARGUMENT",
        "SEGMENT_END",
        "TOOL_INVOCATION",
        "RESPONSE_END",
    ]
    recording = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
    assert main(["replay", str(recording), "--output", "jsonl"]) == 0
    real: dict[str, set[str]] = {}
    for line in capsys.readouterr().out.splitlines():
        event = json.loads(line)
        real.setdefault(event["type"], set(event))
    assert {event["type"]: set(event) for event in events} == real
    segment_types = re.search(r"Segment types: (.*?)\. A segment", text, flags=re.DOTALL)
    assert segment_types is not None
    assert re.findall(r"`(\w+)`", segment_types.group(1)) == [kind.value for kind in SegmentType]


def test_the_error_kinds_named_are_the_ones_the_code_gives() -> None:
    text = " ".join(section("What comes out").split())
    kinds = re.search(r"give an invocation with `error` \((.*?)\)", text)
    assert kinds is not None
    names = re.findall(r"`(\w+)`", kinds.group(1))
    assert names == [
        "invalid_json",
        "truncated",
        "too_large",
        "interrupted",
        "not_an_object",
        "invalid_arguments",
        "missing_name",
    ]
    source = "".join(path.read_text() for path in (ROOT / "operators").rglob("*.py"))
    for name in names:
        assert f'"{name}"' in source, name


def test_every_name_in_the_stages_table_exists() -> None:
    text = section("The stages")
    names = table_column(text, 1) + table_column(text, 2)
    names = [name for name in names if name not in ("...",)]
    assert "from_dicts" in names
    for name in names:
        assert hasattr(operators, name) or hasattr(pipeline, name), name
    for name in ("ChunkResponse", "ToolCallDelta", "SegmentEvent", "ToolInvocation"):
        model = getattr(pipeline, name)
        assert issubclass(model, msgspec.Struct)
        assert model.__struct_config__.frozen, name


def test_the_providers_table_is_the_list_of_providers() -> None:
    assert table_column(section("Providers")) == list(PROVIDERS)


def test_the_tool_format_table_names_every_format() -> None:
    names = table_column(section("Tool calls written in the text"))
    assert set(names) <= set(FORMATS)
    assert {lexer.name for lexer in FORMATS.values()} <= set(names)


@pytest.mark.anyio
@pytest.mark.parametrize("spelling", ["none", "api_tool_call"])
async def test_none_means_no_rewriting_and_api_tool_call_is_its_alias(spelling: ToolFormat) -> None:
    text = " ".join(section("Tool calls written in the text").split())
    assert "`none` means no rewriting" in text
    assert "`api_tool_call`, the name the synchronous handlers use, is accepted as an alias of it" in text
    recording = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
    body = recording.read_bytes()
    named = await collect(process(body, tool_format=spelling, id_factory=sequential_call_ids))
    default = await collect(process(body, id_factory=sequential_call_ids))
    assert [e for e in named if isinstance(e, ToolInvocation)] == [
        e for e in default if isinstance(e, ToolInvocation)
    ]
    with pytest.raises(ConfigurationError, match="expected one of: none, "):
        process(body, tool_format="kimi-k9")  # type: ignore[arg-type]  # the typo mypy catches


def test_the_handler_factory_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(section("The synchronous handler API").split())
    assert "`create_streaming_handler()`, which reads `STREAMFOLD_STREAM_PARSER`" in text
    for name in ("api_tool_call", "xml", "json", "sentinel", "kimi_k2"):
        monkeypatch.setenv("STREAMFOLD_STREAM_PARSER", name)
        create_streaming_handler()
    monkeypatch.setenv("STREAMFOLD_STREAM_PARSER", "native")
    with pytest.raises(ConfigurationError, match="api_tool_call"):
        create_streaming_handler()
    for name in ("openai_tool", "openai_responses_tool", "anthropic_tool", "gemini_tool"):
        assert name in text
        assert name in pipeline.seeds.__all__


@pytest.mark.parametrize("command", ["demo", "replay", "proxy"])
def test_the_command_line_block_lists_real_options(capsys: pytest.CaptureFixture[str], command: str) -> None:
    block = re.search(r"```\n(streamfold demo.*?)```", section("The command line"), flags=re.DOTALL)
    assert block is not None
    usage = block.group(1).split(f"streamfold {command}", 1)[1].split("\nstreamfold ", 1)[0]
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = capsys.readouterr().out
    for option in re.findall(r"--[a-z-]+", usage):
        assert f"{option} " in help_text, option
    for choices in re.findall(r"--[a-z-]+ ((?:[a-z0-9_-]+\|)+[a-z0-9_.-]+)", usage):
        for choice in choices.split("|"):
            if choice != "...":
                assert choice in help_text, choice


def test_a_raw_text_file_is_replayed_as_4_character_deltas(capsys: pytest.CaptureFixture[str]) -> None:
    assert "replayed as 4-character deltas" in " ".join(section("The command line").split())
    path = FIXTURES / "raw_model_output" / "vllm-test_kimi-k2_text_then_3_parallel_tools.txt"
    assert main(["replay", str(path), "--provider", "text", "--output", "jsonl"]) == 0
    deltas = [
        event["payload"]["delta"]
        for event in map(json.loads, capsys.readouterr().out.splitlines())
        if event["type"] == "SEGMENT_CONTENT"
    ]
    text = path.read_text()
    assert "".join(deltas) == text
    assert deltas == [text[i : i + 4] for i in range(0, len(text), 4)]


@pytest.mark.parametrize("page", list(PAGES), ids=[str(path.relative_to(ROOT)) for path in PAGES])
def test_the_files_and_modules_each_page_points_to_exist(page: Path) -> None:
    text = PAGES[page]
    for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (page.parent / link).exists(), link
    for path in re.findall(r"`((?:examples|tests|docs|\.ci)/[\w./]+|CONTRIBUTING\.md|\.ci/run)`", text):
        assert (ROOT / path).exists(), path
    for module in re.findall(r"python -m (benchmarks\.\w+)", text):
        assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module


def test_the_readme_is_the_pitch_and_the_first_steps() -> None:
    assert len(README.splitlines()) <= 250
    assert "seed" not in README.lower()
    for page in ("events", "providers", "tool-formats", "hub", "serving", "ui-protocols", "agent", "proxy"):
        assert f"(docs/{page}.md)" in README, page
    for page in ("cli", "performance"):
        assert f"(docs/{page}.md)" in README, page


def test_the_tool_gate_and_the_cancel_grace_are_as_the_agent_section_says() -> None:
    from pipeline.agent import DEFAULT_CANCEL_GRACE, SAFE_FINISH_REASONS, ToolRegistry

    text = " ".join(section("The agent's side").split())
    assert "only if its `finish_reason` is `stop` or `tool_calls`" in text
    assert sorted(SAFE_FINISH_REASONS) == ["stop", "tool_calls"]
    assert "`run_tools(..., cancel_grace=1.0)`, the default" in text
    assert DEFAULT_CANCEL_GRACE == 1.0
    tools = ToolRegistry()
    tools.add(lambda: None, name="reader", read_only=True)
    tools.add(lambda: None, name="writer")
    assert (tools["reader"].start, tools["writer"].start) == ("eager", "after_finish")
