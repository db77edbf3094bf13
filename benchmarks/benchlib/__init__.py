"""The benchmarks' shared parts (not a benchmark): the synthetic history (``history``), timings
(``stats``), engines (``engines``), lanes and the interleaved runner (``lanes``), real
transcripts (``transcripts``), the command line and output (``report``), another git revision
beside this checkout (``revision``).

Importing it puts this checkout first on ``sys.path``, so the scripts measure it however
stenograph is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if (REPO / "stenograph" / "__init__.py").is_file() and str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
