"""The steady call of another revision beside this checkout's, in one process: the before /
after of a change measured side by side, round by round, where separate runs of
``engine_overhead.py`` differ by more than most changes on a shared machine.

The revision (``--rev``, any git revision; default ``HEAD``) is exported from this
repository into a temporary folder as the package ``stenograph_rev`` (its absolute
references to ``stenograph.`` modules renamed), then three lanes run interleaved on the same
synthetic history at each size, as in ``engine_overhead.py``: the floor lane, the revision's
session and this checkout's session, on one preset (``--preset``: a shipped one, or
``none`` for a preset without handlers). ``--pause`` idles that many seconds after the
history is built (600: the memorized history of ``clearing_peers.py``).

Run ``python benchmarks/versus.py --rev <commit>`` (``--quick`` for a smoke run of ``HEAD``
against itself, ``--json`` for machine-readable results). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from benchlib.engines import make_engine
from benchlib.history import HistoryCache
from benchlib.lanes import FloorLane, SessionLane, interleave
from benchlib.report import Log, finish, machine, parser, warm_tokenizer
from benchlib.revision import RENAMED, export, twins
from benchlib.stats import ratio

import stenograph

SIZES, QUICK_SIZES = (100, 1_000, 3_000), (100,)
CALLS, QUICK_CALLS = 300, 20


def engine(package: ModuleType, preset: str, scratch: Path) -> Any:
    """``preset`` on ``package`` (forked-extraction offline, its notes under ``scratch``)."""
    if preset == "none":
        presets = importlib.import_module(f"{package.__name__}.engine.presets")
        empty = presets.Preset(name="none", description="", strict=True, slots=(), label="none")
        return package.Engine(empty)
    return make_engine(preset, scratch / package.__name__, package)


def run_size(rev: ModuleType, args: Any, size: int, scratch: Path, log: Log) -> dict[str, Any]:
    """The floor, the revision and this checkout at one size, interleaved."""
    histories = HistoryCache()
    ours = {"rev": rev, "this": stenograph}
    lanes = [
        FloorLane("floor", size, histories),
        *(
            SessionLane(
                name,
                size,
                histories,
                engine=engine(pkg, args.preset, scratch),
                pause=args.pause,
                hold=args.hold,
            )
            for name, pkg in ours.items()
        ),
    ]
    log(f"{size:,} entries: {args.preset}, {args.rev} beside this checkout")
    interleave(lanes, QUICK_CALLS if args.quick else CALLS)
    samples = {lane.name: lane.samples for lane in lanes}
    return {
        "samples": samples,
        "this_over_rev": ratio(samples["this"], samples["rev"]),
        "over_floor": {name: ratio(samples[name], samples["floor"]) for name in ("rev", "this")},
    }


def report(results: dict[str, Any]) -> None:
    """The medians and the ratios, per size."""
    twins = results["twins"]
    print(
        f"\n{results['preset']}{', requests held' if results['hold'] else ''}:"
        f" {results['rev']} (rev) beside this checkout (this), median / p90"
        f" (twins of the entry path: rev {twins['rev']}, this {twins['this']})"
    )
    for size, row in results["sizes"].items():
        print(f" {int(size):,} entries")
        for name, samples in row["samples"].items():
            print(f"   {name:8s} {samples.median:8.1f} µs median / {samples.p90:8.1f} µs p90")
        over = row["over_floor"]
        print(
            f"   this / rev {row['this_over_rev']['median']:.3f} (median);"
            f" over the floor: rev {over['rev']['median']:.2f}x,"
            f" this {over['this']['median']:.2f}x"
        )


def _sizes(text: str) -> tuple[int, ...]:
    """``--sizes``: entries, comma-separated, each at least 10."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 10:
        raise argparse.ArgumentTypeError(
            f"--sizes {text!r}: expected entries >= 10, e.g. 100,10000"
        )
    return sizes


def main() -> int:
    """Export the revision, run every size, print the report."""
    options = parser(__doc__)
    options.add_argument("--rev", default="HEAD", help="the git revision to compare with")
    options.add_argument("--preset", default="default", help="a shipped preset, or 'none'")
    options.add_argument("--pause", type=float, default=0.0, help="idle seconds before timing")
    options.add_argument(
        "--hold", action="store_true", help="each lane holds its request until the next pre_call"
    )
    options.add_argument(
        "--sizes", type=_sizes, default=SIZES, help="entries, comma-separated (100,1000,3000)"
    )
    args = options.parse_args()
    if args.quick:
        args.rev = "HEAD"
    log = Log()
    results: dict[str, Any] = {
        "machine": machine(),
        "rev": args.rev,
        "preset": args.preset,
        "hold": args.hold,
    }
    with tempfile.TemporaryDirectory(prefix="stenograph-versus-") as tmp:
        try:
            rev = export(args.rev, Path(tmp) / "src")
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"skipped: cannot export {args.rev!r} from git here ({exc})", file=sys.stderr)
            results["skipped"] = str(exc)
            return finish({**results, "wall_seconds": 0.0}, args.json, lambda r: None)
        results["twins"] = {"rev": twins(rev), "this": twins(stenograph)}
        results["tiktoken_load_ms"] = warm_tokenizer()
        importlib.import_module(f"{RENAMED}.engine.tokens").count_tiktoken("warm up")
        sizes = QUICK_SIZES if args.quick else args.sizes
        results["sizes"] = {str(n): run_size(rev, args, n, Path(tmp), log) for n in sizes}
    results["wall_seconds"] = round(log.elapsed(), 1)
    return finish(results, args.json, report)


if __name__ == "__main__":
    raise SystemExit(main())
