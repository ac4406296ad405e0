"""Every Python block of README.md runs, and the two set-up commands are the first code block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_the_set_up_commands_come_first() -> None:
    first = re.search(r"```bash\n(.*?)```", README, flags=re.DOTALL)
    assert first is not None
    assert first.group(1).splitlines() == [
        "pip install -e '.[cli]' && streamfold demo",
        "pip install -e '.[test]' && pytest -n 2",
    ]
    assert README.index("```bash") < README.index("```python")


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{number}" for number in range(len(BLOCKS))])
def test_readme_block_runs(block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    capsys.readouterr()
