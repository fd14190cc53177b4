"""What keeping the late judge's layer states costs the serving encoder in resident memory.

`python bench/bench_states_memory.py`: builds the int8 encoder as served (both sessions) in a fresh
process for each way, in turns, and prints the growth of its resident memory over the imports every
way shares, after a few encodes:

- `none`: no layer states (the encoder alone);
- `file`: the states model the export keeps beside it (ingest/onnx_encoder.py: states_model);
- `bytes`: the same model derived in the process and handed to onnxruntime as bytes, as an encoder
  does where the export's folder cannot be written.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
WAYS = ("none", "file", "bytes")

CHILD = """
import json, sys
sys.path.insert(0, {bench!r})
import numpy, onnxruntime, tokenizers  # shared by every way
from bench_encoder import _export
from app.config import Settings
from app.serving.encoders import judge_states_layer
import ingest.onnx_encoder as onnx_encoder

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

way = sys.argv[1]
settings = Settings()
folder, model_id = _export()
layer = judge_states_layer(settings.late_judge_dir, settings.judge_dir)
if way == "bytes":
    onnx_encoder.states_model = lambda folder, manifest, layer: onnx_encoder.with_outputs(
        folder / onnx_encoder.ONNX_FILE, [onnx_encoder.LAYER_STATES.format(layer)])
else:
    onnx_encoder.states_model(folder, onnx_encoder.read_manifest(folder), layer)  # kept beside the export
before = rss()
_, threads = settings.encoder_parallelism
encoder = onnx_encoder.OnnxEncoder(folder, model_id, threads=threads, solo_threads=settings.encoder_solo,
                                   states_layer=None if way == "none" else layer)
for _ in range(20):
    encoder.encode(["the gradients are averaged across ranks with an all-reduce"])
    encoder.encode_alone(["each rank keeps one shard of the optimizer state"])
print(json.dumps({{"way": way, "mb": rss() - before}}))
"""


def main() -> None:
    bench = str(ROOT / "bench")
    grown: dict[str, list[float]] = {w: [] for w in WAYS}
    for _ in range(ROUNDS):
        for way in WAYS:
            out = subprocess.run([sys.executable, "-c", CHILD.format(bench=bench), way], cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout
            grown[way].append(json.loads(out.strip().splitlines()[-1])["mb"])
    base = statistics.median(grown["none"])
    print(f"resident memory the encoder adds (median of {ROUNDS} fresh processes each, in turns)")
    for way in WAYS:
        mb = statistics.median(grown[way])
        print(f"  {way:<6} {mb:7.1f} MB   {mb - base:+7.1f} MB against no states   ({mb / base:.2f}x)")


if __name__ == "__main__":
    main()
