"""The API reference (docs/reference/) renders every public name, each once, and the docstrings it renders
read in one style.

mkdocs is slow, so these tests do not build the site: they read each page's ``::: path`` directives and
their options, load the packages with griffe (what mkdocstrings renders from) and work out what each
directive shows, the way mkdocstrings-python chooses members: the ones listed under ``members:``, else the
public members with a docstring (an imported one only when the module's ``__all__`` names it).
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.test_public_surface import MODULES

griffe: Any = importlib.import_module("griffe")  # test dependencies: a missing one fails, never skips
yaml: Any = importlib.import_module("yaml")

ROOT = Path(__file__).parent.parent
REFERENCE = ROOT / "docs" / "reference"
OPTIONS = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["plugins"][1]["mkdocstrings"]["handlers"][
    "python"
]["options"]
"""mkdocstrings' options for every directive (mkdocs.yml), before a directive's own."""


@dataclass(frozen=True)
class Directive:
    """One ``::: path`` of a reference page and its own options."""

    page: str
    path: str
    options: dict[str, Any] = field(default_factory=dict)


def directives() -> list[Directive]:
    """Every ``::: path`` directive of every reference page, in page order."""
    found = []
    for page in sorted(REFERENCE.rglob("*.md")):
        pattern = r"^::: ([\w.]+)\n((?:(?: {4}.*)?\n)*)"
        for match in re.finditer(pattern, page.read_text(), flags=re.MULTILINE):
            block = yaml.safe_load(match.group(2)) or {}
            relative = str(page.relative_to(REFERENCE))
            found.append(Directive(relative, match.group(1), dict(block.get("options") or {})))
    return found


def documented_modules() -> list[str]:
    """The modules whose public names the reference must show: every public package (the facades), the
    modules the shared types and helpers live in, and every module a docs page's code imports from."""
    packages = [name for name in MODULES if hasattr(importlib.import_module(name), "__path__")]
    shared = [
        "pipeline.models",
        "pipeline.errors",
        "pipeline.stage",
        "pipeline.compose",
        "pipeline.testing",
        "pipeline.telemetry",
        "operators.registry",
    ]
    pages = "\n".join(path.read_text() for path in (ROOT / "docs").glob("*.md"))
    imported = re.findall(r"^\s*from ((?:pipeline|operators)[\w.]*) import", pages, flags=re.MULTILINE)
    return sorted({*packages, *shared, *imported})


@pytest.fixture(scope="module")
def loaded() -> Any:
    """``pipeline`` and ``operators`` as griffe reads them, with Google-style docstrings."""
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)], docstring_parser=griffe.Parser.google)
    loader.load("pipeline")
    loader.load("operators")
    loader.resolve_aliases(implicit=False, external=None)
    return loader.modules_collection


def target(item: Any) -> Any:
    """What an alias stands for (an object is its own)."""
    return item.final_target if item.is_alias else item


def shown(collection: Any, directive: Directive) -> list[str]:
    """The paths (of the objects themselves, not of aliases) that one directive renders at its top level:
    its object, and that object's members as mkdocstrings-python chooses them."""
    options = {**OPTIONS, **directive.options}
    try:
        root = target(collection[directive.path])
    except KeyError:
        pytest.fail(f"docs/reference/{directive.page}: ::: {directive.path} names nothing")
    paths = [root.path]
    members = options.get("members")
    if not (root.is_module or root.is_class) or members is False:
        return paths
    if isinstance(members, list):
        missing = [name for name in members if name not in root.members]
        assert missing == [], f"{directive.page}: {directive.path} has no {missing}"
        return paths + [target(root.members[name]).path for name in members]
    filters = [re.compile(pattern.lstrip("!")) for pattern in options["filters"]]
    return paths + [
        target(member).path
        for name, member in root.members.items()
        if not any(pattern.search(name) for pattern in filters)
        and (not member.is_alias or member.is_public)
        and not member.is_module
        and (member.has_docstrings or options["show_if_no_docstring"])
    ]


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(str(page.relative_to(ROOT / "docs")) for page in REFERENCE.rglob("*.md"))
    assert [page for page in pages if page not in nav] == []


@pytest.mark.parametrize("module", documented_modules())
def test_every_public_name_is_in_the_reference(loaded: Any, module: str) -> None:
    rendered = {path for directive in directives() for path in shown(loaded, directive)}
    names = importlib.import_module(module).__all__
    missing = [name for name in names if target(loaded[f"{module}.{name}"]).path not in rendered]
    assert missing == [], (
        f"{module}: {missing} not in docs/reference/: add a `::: {module}.<name>` line (or one naming "
        "it in the package it comes from) to the reference page of that package"
    )


def test_the_reference_shows_each_object_once(loaded: Any) -> None:
    counts = Counter(path for directive in directives() for path in shown(loaded, directive)[1:])
    counts.update(target(loaded[directive.path]).path for directive in directives())
    roots = {directive.path for directive in directives() if directive.options.get("members") is not None}
    assert sorted(path for path, count in counts.items() if count > 1 and path not in roots) == []


STYLED = (
    "pipeline.models",
    "pipeline.errors",
    "pipeline.compose",
    "pipeline.telemetry",
    "pipeline.testing",
    "pipeline._options",
    "pipeline.agent.tools",
    "pipeline.agent.turns",
    "pipeline.agent.checks",
    "pipeline.agent.approval",
    "pipeline.agent.runner",
    "pipeline.agent.structured",
    "pipeline.agent._portable",
    "pipeline.fanout",
    "pipeline.seeds",
    "pipeline.proxy",
    "operators.arguments",
    "operators.invocations",
    "operators.encode",
    "operators.registry",
    "operators.adapter",
    "operators.convert",
    "operators.delimiters",
    "operators.segments",
    "pipeline.stage",
    "pipeline.agent.durable",
    "pipeline.agent.leases",
    "pipeline.cli",
)
"""The modules (and packages) whose docstrings are in the one style; the others join as theirs are."""

SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Attributes|Examples?|Note)( \(.*\))?:\s*$", re.M
)
"""A Google section title: in a text section it is one the parser did not take (a missing blank line...)."""
OTHER_STYLES = re.compile(
    r":(class|func|meth|attr|data|exc|mod|obj|const|param|returns?|raises?|rtype|type)[: ]|::$", re.M
)
"""reST roles, Sphinx fields and literal-block markers (``::``), which Markdown shows as they are."""


def rendered_objects(collection: Any) -> dict[str, Any]:
    """The functions and classes the reference renders, with the public methods and classes of each class,
    by path."""
    found: dict[str, Any] = {}
    for directive in directives():
        for path in shown(collection, directive):
            item = target(collection[path])
            if item.is_function or item.is_class:
                found[item.path] = item
    for item in [item for item in found.values() if item.is_class]:
        for name, member in item.members.items():
            if not name.startswith("_") and not member.is_alias and (member.is_function or member.is_class):
                found[member.path] = member
    return found


def styled(path: str) -> bool:
    return any(path == module or path.startswith(f"{module}.") for module in STYLED) and not path.startswith(
        "pipeline.proxy.autodetect"
    )


def test_the_docstrings_the_reference_renders_read_in_one_style(
    loaded: Any, caplog: pytest.LogCaptureFixture
) -> None:
    problems = []
    for path, item in sorted(rendered_objects(loaded).items()):
        if not styled(path):
            continue
        if item.docstring is None or not item.docstring.value.strip().splitlines()[0].strip():
            problems.append(f"{path}: no summary line")
            continue
        if OTHER_STYLES.search(item.docstring.value):
            problems.append(f"{path}: a reST role or Sphinx field")
        caplog.clear()
        with caplog.at_level("WARNING", logger="griffe"):
            sections = item.docstring.parse("google", warn_unknown_params=True, warn_missing_types=False)
        problems += [f"{path}: {record.getMessage()}" for record in caplog.records]
        texts = [section.value for section in sections if section.kind.value == "text"]
        problems += [f"{path}: a section the parser did not read" for text in texts if SECTION.search(text)]
    assert problems == [], "\n".join(problems)


PASSED_IN = frozenset({"self", "cls"})
VARIADIC = frozenset({griffe.ParameterKind.var_positional, griffe.ParameterKind.var_keyword})


def arguments(item: Any, collection: Mapping[str, Any]) -> list[str]:
    """The parameters a caller names, of a function or of the ``__init__`` a class's page shows (its own,
    or one inherited from a class the reference does not render): not ``self``, ``*args`` or ``**kwargs``.
    A dataclass's fields that have a docstring are documented where they are, so they do not count."""
    function = item
    fields: dict[str, Any] = {}
    if item.is_class:
        init = item.all_members.get("__init__")
        if init is None:
            return []
        function = target(init)
        if function.parent.path != item.path and function.parent.path in collection:
            return []  # documented on the rendered class it comes from
        if "dataclass" in item.labels:
            fields = item.members
    return [
        parameter.name
        for parameter in function.parameters
        if parameter.name not in PASSED_IN
        and parameter.kind not in VARIADIC
        and not (parameter.name in fields and fields[parameter.name].docstring)
    ]


def described(item: Any) -> set[str]:
    """The parameters the ``Args:`` sections of an object's docstring (and of its ``__init__``'s) name."""
    docstrings = [item.docstring]
    if item.is_class and "__init__" in item.members:
        docstrings.append(item.members["__init__"].docstring)
    return {
        parameter.name.lstrip("*")
        for docstring in docstrings
        if docstring is not None
        for section in docstring.parse("google", warn_unknown_params=False)
        if section.kind.value == "parameters"
        for parameter in section.value
    }


def test_the_reference_describes_each_argument_in_an_args_section(loaded: Any) -> None:
    """A function, method or class the reference renders that takes two arguments or more says what each
    is in an ``Args:`` section (prose leaves the reader to find them); one that has the section names
    every argument in it."""
    rendered = rendered_objects(loaded)
    problems = []
    for path, item in sorted(rendered.items()):
        if not styled(path):
            continue
        names = arguments(item, rendered)
        documented = described(item)
        missing = [name for name in names if name not in documented]
        if missing and (len(names) >= 2 or documented):
            problems.append(f"{path}: no line in Args: for {', '.join(missing)}")
    assert problems == [], "\n".join(problems)
