"""Renders stay byte-identical: real transcripts replayed through memorizing presets give
the requests the renderer gave before rendering became incremental and prepared in the
background (digests in ``tests/data/render_digests.json``)."""

from __future__ import annotations

import json

import pytest
from render_digests import DATA, GOLDEN, PRESETS, digest, transcripts

GOLDEN_DIGESTS = json.loads(GOLDEN.read_text())
pytestmark = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"real transcripts not found at {DATA} (../shared/data is absent)"
)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_requests_match_the_renderer_of_before(preset):
    memorized = 0
    for path in transcripts():
        name = str(path.relative_to(DATA))
        assert name in GOLDEN_DIGESTS, f"no recorded digest for {name}"
        found, marked = digest(path, PRESETS[preset])
        assert found == GOLDEN_DIGESTS[name][preset], f"{name} renders differently ({preset})"
        memorized += marked
    assert memorized > 100  # the replays do memorize
