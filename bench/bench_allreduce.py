"""All-reduce bus bandwidth per message size for several world sizes, as the `allreduce` demo measures it.

Usage: .venv/bin/python bench/bench_allreduce.py [world sizes...]   (default: 2 4; prints figures, asserts nothing)
"""

from __future__ import annotations

import sys

from worker.catalogue import CATALOGUE
from worker.devices import all_slots, detect, place
from worker.runs import Run
from worker.supervisor import execute


def main(worlds: list[int]) -> None:
    """Run the sweep for each world size and print algbw and busbw per size."""
    info = detect("auto")
    demo = CATALOGUE["allreduce"]
    for world in worlds:
        params = demo.params.model_validate({"world_size": world, "max_bytes": 16 * 1024 * 1024, "iterations": 10})
        placement = place(info, world, all_slots(info))
        assert placement is not None
        run = Run(f"bench-{world}", "allreduce", params.model_dump(), world, params.time_limit_s, placement=placement)
        status, result, error = execute(run, lambda event: None)
        if result is None:
            print(f"world {world}: {status}: {error}")
            continue
        print(f"world {world} ({result['backend']}, bus factor {result['figures']['bus_factor']:.2f})")
        for row in result["figures"]["rows"]:
            print(f"  {row['bytes']:>10} B  algbw {row['algbw_GBps']:8.3f}  busbw {row['busbw_GBps']:8.3f} GB/s")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2, 4])
