"""Every example runs, and does what its docstring says."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import anyio
import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.anyio
async def test_agent_loop_starts_the_read_only_tool_early_and_the_other_at_the_end(tmp_path: Path) -> None:
    example = load("agent_loop")
    results, streamed = await example.run_agent(
        example.paced_response(speed=2000), example.make_tools(tmp_path)
    )
    weather_started = next(at for call_id, _, at in results if call_id == "toolu_01WeatherDemo")
    assert weather_started < streamed  # it ran while the model was still writing the file
    write_started = next(at for call_id, _, at in results if call_id == "toolu_01WriteFileDemo")
    assert write_started == streamed  # held until the response ended with tool_calls
    assert [call_id for call_id, _, _ in sorted(results, key=lambda r: r[2])] == [
        "toolu_01WeatherDemo",
        "toolu_01WriteFileDemo",
    ]
    weather = next(result for call_id, result, _ in results if call_id == "toolu_01WeatherDemo")
    assert weather == "18°C and cloudy in Paris, France"
    written_message = next(result for call_id, result, _ in results if call_id == "toolu_01WriteFileDemo")
    assert written_message == "wrote 521 characters to weather/watch.py"
    written = (tmp_path / "weather" / "watch.py").read_text()
    assert written.startswith('"""Print the weather for a city, every ten minutes."""')


@pytest.mark.anyio
async def test_two_ui_observers_of_different_speeds_see_the_same_text() -> None:
    example = load("ui_observers")
    fast, slow, invocations = await example.main()
    assert fast.segments() == slow.segments()
    assert slow.events < fast.events
    assert [invocation.name for invocation in invocations] == ["get_weather", "write_file"]


@pytest.mark.anyio
@pytest.mark.parametrize("approved", [True, False])
async def test_tool_approval_writes_the_file_only_when_approved(tmp_path: Path, approved: bool) -> None:
    example = load("tool_approval")
    asked: list[str] = []

    def decide(request: object) -> tuple[bool, str | None]:
        asked.append(getattr(request, "name", ""))
        return approved, None if approved else "not in this project"

    outputs = await example.run_step(example.make_tools(tmp_path), decide)
    assert asked == ["write_file"]  # the read tool ran without asking
    by_name = {output.name: output for output in outputs}
    assert by_name["get_weather"].status == "ok"
    written = [path async for path in anyio.Path(tmp_path).rglob("*") if await path.is_file()]
    if approved:
        assert by_name["write_file"].status == "ok"
        assert len(written) == 1
    else:
        assert (by_name["write_file"].status, by_name["write_file"].output) == (
            "denied",
            "denied: not in this project",
        )
        assert written == []
