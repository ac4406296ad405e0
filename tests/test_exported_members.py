"""The public surface: every name in ``__all__`` exists, and ``__all__`` is sorted."""

from __future__ import annotations

import importlib

import pytest

import pipeline
import pipeline.seeds
import pipeline.stage

PACKAGES = ["pipeline", "operators", "operators.convert", "operators.delimiters"]


def sort_key(name: str) -> tuple[int, str]:
    """Constants first, then classes, then functions (ruff's RUF022 order)."""
    if name.isupper():
        return (0, name)
    return (1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_complete_and_sorted(package: str) -> None:
    module = importlib.import_module(package)
    exported = module.__all__
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert hasattr(module, name), f"{package}.{name} is in __all__ but missing"
    assert exported == sorted(exported, key=sort_key)


def test_the_stages_are_reachable_from_operators() -> None:
    import operators

    for name in ["rewrite_delimiters", "split_arguments", "emit_segments", "fold_invocations", "sse_events"]:
        assert name in operators.__all__


def test_the_stage_api_is_at_the_top_of_pipeline() -> None:
    for name in ["Core", "chain", "drive", "operator_stream"]:
        assert name in pipeline.__all__
        assert getattr(pipeline, name) is getattr(pipeline.stage, name)


SEEDS = [
    "ApiToolCallStreamingResponseHandler",
    "ParsingStreamingResponseHandler",
    "PassThroughStreamingResponseHandler",
    "StreamingResponseHandler",
    "ToolDefinition",
    "anthropic_tool",
    "create_streaming_handler",
    "gemini_tool",
    "openai_responses_tool",
    "openai_tool",
]


@pytest.mark.parametrize("name", SEEDS)
def test_the_seeds_names_moved_to_pipeline_seeds(name: str) -> None:
    assert name in pipeline.seeds.__all__
    assert name not in pipeline.__all__
    assert name not in dir(pipeline)
    with pytest.warns(DeprecationWarning, match=rf"pipeline\.{name} moved: import it from pipeline\.seeds"):
        assert getattr(pipeline, name) is getattr(pipeline.seeds, name)
    with pytest.warns(DeprecationWarning, match="import it from pipeline.seeds"):
        exec(f"from pipeline import {name}", {})


def test_a_name_the_facade_never_had_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'pipeline' has no attribute 'Nonexistent'"):
        _ = pipeline.Nonexistent
