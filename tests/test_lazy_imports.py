"""The facades are lazy: ``import pipeline`` and ``import operators`` load only what is used, and decoding
SSE loads neither the fan-out (reactivex), pydantic nor Starlette. Each check runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

HEAVY = ("reactivex", "pydantic", "pydantic_core", "starlette", "rich", "httpx", "uvicorn")


def loaded_after(code: str) -> set[str]:
    """Top-level names in ``sys.modules`` after ``code`` ran, and every ``pipeline``/``operators`` module."""
    script = (
        "import sys\n"
        f"{code}\n"
        "print('\\n'.join(sorted(name for name in sys.modules if name.startswith(('pipeline', 'operators'))"
        " or '.' not in name)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_import_pipeline_alone_is_cheap() -> None:
    loaded = loaded_after("import pipeline")
    assert {name for name in loaded if name.startswith("pipeline")} == {"pipeline", "pipeline._lazy"}
    assert not loaded & {*HEAVY, "msgspec", "aiostream", "operators"}


def test_import_operators_alone_is_cheap() -> None:
    loaded = loaded_after("import operators")
    assert {name for name in loaded if name.startswith(("pipeline", "operators"))} == {
        "operators",
        "pipeline",
        "pipeline._lazy",
    }
    assert not loaded & {*HEAVY, "msgspec", "aiostream"}


def test_a_model_from_the_facade_loads_only_the_models() -> None:
    loaded = loaded_after("from pipeline import SegmentEvent, ToolInvocation")
    assert {name for name in loaded if name.startswith("pipeline")} == {
        "pipeline",
        "pipeline._lazy",
        "pipeline.models",
    }
    assert not loaded & set(HEAVY)


def test_the_stage_api_from_the_facade_loads_only_the_stage_api() -> None:
    loaded = loaded_after("from pipeline import Core, chain, drive, operator_stream")
    assert {name for name in loaded if name.startswith(("pipeline", "operators"))} == {
        "pipeline",
        "pipeline._lazy",
        "pipeline.errors",
        "pipeline.stage",
    }
    assert not loaded & set(HEAVY)


DECODE_SSE = """
import asyncio
from operators.adapter.sse import EventParser, SSEDecoder, decode_sse

data = b'data: {"choices": [{"delta": {"content": "hi"}}]}\\n\\ndata: [DONE]\\n\\n'
decoder, parser = SSEDecoder(), EventParser()
events = [item for event in decoder.feed(data) + decoder.finish() for item in parser.feed(event)]
assert events == [{"choices": [{"delta": {"content": "hi"}}]}], events

async def pieces():
    yield data[:7]
    yield data[7:]

async def main():
    async with decode_sse(pieces()).stream() as stream:
        return [event.data async for event in stream]

assert len(asyncio.run(main())) == 2
"""


def test_decoding_sse_loads_no_fan_out_pydantic_or_starlette() -> None:
    loaded = loaded_after(DECODE_SSE)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    ours = {name for name in loaded if name.startswith(("pipeline", "operators"))}
    assert ours == {
        "operators",
        "operators.adapter",
        "operators.adapter._lines",
        "operators.adapter.payloads",
        "operators.adapter.sse",
        "pipeline",
        "pipeline._jsonenc",
        "pipeline._lazy",
        "pipeline.errors",
        "pipeline.models",
        "pipeline.stage",
    }
