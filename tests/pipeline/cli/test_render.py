"""The terminal renderers: what a person sees, live and on a dumb terminal."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from importlib import resources

import pytest
from rich.console import Console

from pipeline import PipelineEvent, process
from pipeline.cli.render import LiveRenderer, PlainRenderer, make_renderer
from pipeline.testing import collect


async def demo_events() -> list[PipelineEvent]:
    data = (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()

    async def body() -> AsyncIterator[bytes]:
        yield data

    return await collect(process(body()))


@pytest.mark.anyio
async def test_live_view_shows_arguments_file_panel_and_invocations() -> None:
    events = await demo_events()
    console = Console(file=io.StringIO(), force_terminal=True, width=100, record=True)
    renderer = LiveRenderer(console)
    halfway = next(i for i, event in enumerate(events) if "write_file" in str(event.to_dict())) + 40
    for event in events[:halfway]:
        renderer.feed(event)
    partial = console.export_text(clear=False, styles=False)
    for event in events[halfway:]:
        renderer.feed(event)
    renderer.close()
    screen = console.export_text(styles=False)
    assert "tool get_weather" in screen
    assert 'location "Paris, France"' in screen
    assert "write_file weather/watch.py" in screen
    assert "def fetch(city: str) -> dict[str, object]:" in screen
    assert "✓ invocation toolu_01WriteFileDemo ready" in screen
    assert "finish: tool_calls  412 in / 389 out tokens" in screen
    assert "✓ invocation toolu_01WriteFileDemo ready" not in partial  # it appears only once folded


def test_dumb_terminals_and_pipes_get_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(make_renderer(io.StringIO()), PlainRenderer)
    assert isinstance(make_renderer(io.StringIO(), force_plain=True), PlainRenderer)
