"""The README's fenced blocks, as tests read them (kept for the tests that import it; the
reader itself, for the README and every page of docs/, is markdown.py)."""

from __future__ import annotations

from tests.docs.markdown import README, REPO, Block, blocks, section_blocks

__all__ = ["README", "REPO", "Block", "blocks", "section_blocks"]
