"""Structured output streamed into a pydantic model: streamfold against instructor and pydantic-ai.

A JSON object (a recipe with N steps) arrives as content in 4-character deltas; after every delta each
contender gives its partial result:

- streamfold: :class:`pipeline.agent.structured.StructuredOutput`, one incremental parse, each field
  validated once when it completes;
- instructor: ``Partial[Model].model_from_chunks`` (it re-parses the accumulated text with jiter's partial
  mode and rebuilds the partial object on every delta);
- pydantic-ai: ``ObjectOutputProcessor.validate(text, allow_partial=True)`` on the accumulated text on
  every delta, which is what its streamed output does.

Run: ``PYTHONPATH=. python benchmarks/bench_structured.py [--quick]``. instructor and pydantic-ai are not
streamfold dependencies: install them in a separate environment that also sees streamfold's (a row says
"not installed" otherwise). A peer row is skipped at the larger sizes once one run takes more than the
time budget (its per-byte cost is already known to grow).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from benchmarks._data import deltas
from operators.arguments._jsonstream import MAX_DEPTH, JSONStreamParser
from pipeline.agent.structured import StructuredOutput
from pipeline.models import ArgumentEvent, ArgumentValue


class Step(BaseModel):
    text: str
    minutes: int = Field(ge=0)
    tools: list[str] = []


class Recipe(BaseModel):
    title: str
    servings: int
    steps: list[Step]
    notes: str


def recipe_text(steps: int) -> str:
    """The JSON of a recipe with ``steps`` steps (about 110 characters a step)."""
    return json.dumps(
        {
            "title": 'Pancakes for a "crowd"',
            "servings": 4,
            "steps": [
                {
                    "text": f"Step {i}: whisk the eggs, add milk and flour → stir",
                    "minutes": i % 7,
                    "tools": ["bowl", "whisk"],
                }
                for i in range(steps)
            ],
            "notes": "Serve warm. " * 4,
        },
        ensure_ascii=False,
    )


def run_streamfold(pieces: list[str]) -> Any:
    core = StructuredOutput(Recipe)
    last = None
    for piece in pieces:
        for update in core.feed(piece):
            last = update
    for update in core.finish():
        last = update
    return last.value if last else None


def run_parser_alone(pieces: list[str]) -> Any:
    """The floor: the incremental parser's events, no model."""
    parser = JSONStreamParser(report_depth=MAX_DEPTH)
    events: list[ArgumentEvent] = []
    for piece in pieces:
        events = parser.feed(piece) or events
    final = (parser.finish() or events)[-1]
    assert isinstance(final, ArgumentValue)
    return final.value


def instructor_runner() -> Callable[[list[str]], Any] | None:
    try:
        instructor = importlib.import_module("instructor")
    except ImportError:
        return None
    partial = instructor.Partial[Recipe]

    def run(pieces: list[str]) -> Any:
        snapshots = partial.model_from_chunks(iter(pieces))
        last = None
        for snapshot in snapshots:
            last = snapshot
        return last

    return run


def pydantic_ai_runner() -> Callable[[list[str]], Any] | None:
    try:
        output = importlib.import_module("pydantic_ai._output")
        errors = importlib.import_module("pydantic_ai.exceptions")
    except ImportError:
        return None
    from pydantic import ValidationError

    processor = output.ObjectOutputProcessor(Recipe)
    retry = getattr(errors, "UnexpectedModelBehavior", ValidationError)

    def run(pieces: list[str]) -> Any:
        parts: list[str] = []
        for piece in pieces:
            parts.append(piece)
            with contextlib.suppress(ValidationError, retry):  # a partial that is not valid yet
                processor.validate("".join(parts), allow_partial=True)
        return Recipe.model_validate(processor.validate("".join(parts)))

    return run


def timed(run: Callable[[list[str]], Any], pieces: list[str], repeat: int = 1) -> tuple[float, Any]:
    """The best of ``repeat`` runs (the machine is shared: the minimum is the least disturbed)."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run(pieces)
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="sizes 1x and 10x only")
    parser.add_argument("--steps", type=int, default=10, help="steps of the 1x recipe (default 10)")
    parser.add_argument(
        "--budget", type=float, default=1.0, help="skip the larger sizes after a run this long (s)"
    )
    arguments = parser.parse_args()
    scales = (1, 10) if arguments.quick else (1, 10, 100)
    contenders: list[tuple[str, Callable[[list[str]], Any] | None]] = [
        ("floor: JSONStreamParser alone", run_parser_alone),
        ("streamfold StructuredOutput", run_streamfold),
        ("instructor Partial (re-parse)", instructor_runner()),
        ("pydantic-ai allow_partial (re-validate)", pydantic_ai_runner()),
    ]
    texts = {scale: recipe_text(arguments.steps * scale) for scale in scales}
    expected = Recipe.model_validate_json(texts[scales[0]])
    header = "".join(f"{f'{scale}x ({len(texts[scale]) // 1000} KB)':>22}" for scale in scales)
    print("4-character deltas; time per input byte (µs/B), total in brackets (ours: best of 5; peers: 1 run)")
    print(f"{'':42}{header}")
    for name, run in contenders:
        cells = []
        over = False
        for scale in scales:
            if run is None:
                cells.append("not installed")
                continue
            if over:
                cells.append("skipped (budget)")
                continue
            pieces = deltas(texts[scale])
            ours = run in (run_parser_alone, run_streamfold)
            seconds, result = timed(run, pieces, 5 if ours else 1)
            if scale == scales[0]:
                got = result if isinstance(result, Recipe) else Recipe.model_validate(result)
                assert got == expected, f"{name}: wrong result"
            cells.append(f"{seconds / len(texts[scale]) * 1e6:7.3f} ({seconds:.2f} s)")
            over = seconds > arguments.budget
        print(f"{name:42}" + "".join(f"{cell:>22}" for cell in cells))


if __name__ == "__main__":
    main()
