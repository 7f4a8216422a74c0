"""How markdown.py reads a page's blocks: languages, sections, test markers, titles, indented
fences (admonitions, lists, content tabs), and what the page runner makes of a titled file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.markdown import Block, blocks
from tests.docs.runner import PageRun, _uses

PAGE = """# Title

Intro.

<!-- test: tests/x.py::test_a -->
```bash
echo a   # a comment
```

## Second

<!-- test: tests/x.py::test_b -->

```yaml title="dir/f.yaml"
a: 1
```

<!-- test: tests/x.py::test_c -->
Some prose between the marker and the fence.

```python
print(1)
```

```
output, no language
```

!!! note
    ```json
    {"indented": true}
    ```

    after

1. a step:

    ```toml
    [t]
    ```

```bash
# 1. a heading-like comment inside a fence is no heading
cat <<EOF
  kept indentation
EOF
```
"""


@pytest.fixture
def page(tmp_path: Path) -> list[Block]:
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    return blocks(path)


def test_languages_sections_and_lines(page: list[Block]) -> None:
    assert [(b.lang, b.section, b.line) for b in page] == [
        ("bash", "Title", 6), ("yaml", "Second", 14), ("python", "Second", 21),
        ("", "Second", 25), ("json", "Second", 30), ("toml", "Second", 38),
        ("bash", "Second", 42)]


@pytest.mark.parametrize(("index", "marker"), [
    (0, "tests/x.py::test_a"),  # right above the fence
    (1, "tests/x.py::test_b"),  # blank lines between are allowed
    (2, None),  # prose between: the marker is for no block
    (3, None), (4, None), (5, None), (6, None),
])
def test_a_marker_names_the_fence_right_below_it(
        page: list[Block], index: int, marker: str | None) -> None:
    assert page[index].tested_by == marker


def test_titles_bodies_and_indented_fences(page: list[Block]) -> None:
    assert page[1].title == "dir/f.yaml" and page[0].title is None
    assert page[0].commands() == ["echo a"]
    assert page[4].text == '{"indented": true}\n'
    assert page[5].text == "[t]\n"
    assert page[6].text.splitlines()[2] == "  kept indentation"


@pytest.mark.parametrize(("text", "title", "used"), [
    ("kubectl apply -f pg.yaml", "pg.yaml", True),
    ("kubectl apply -f other.yaml", "pg.yaml", False),
    ("kubectl apply -k my-scheduler/", "my-scheduler/kustomization.yaml", True),
    ("kubectl apply -k my-scheduler\n", "my-scheduler/kustomization.yaml", True),
    ("kubectl apply -k my-scheduler-2/", "my-scheduler/kustomization.yaml", False),
])
def test_a_titled_file_is_used_by_a_block_that_names_it_or_its_directory(
        text: str, title: str, used: bool) -> None:
    assert _uses(text, title) is used


def test_an_unused_titled_yaml_block_is_checked_at_the_end(tmp_path: Path) -> None:
    run = PageRun("page.md", tmp_path)
    try:
        run.run(Block("yaml", "a: 1\n", 1, "S", page="page.md", title="x.yaml"))
        assert (run.work / "x.yaml").read_text() == "a: 1\n"  # written, not checked yet
        with pytest.raises(AssertionError, match="neither a KubeSchedulerConfiguration"):
            run.finish()
    finally:
        run.close()
