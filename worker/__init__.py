"""The demo worker service (`tutor worker`): runs live distributed-training demos on real PyTorch.

- `api`: the FastAPI service (token-protected /v1: catalogue, runs, cancel, server-sent progress events).
- `catalogue`, `params`: the eight demos (names shared with contracts.demos) and their bounded parameters.
- `runs`: the FIFO run queue, one run at a time per device (each GPU, or the CPU), bounded (429 when full).
- `supervisor`: runs a demo in `python -m worker.child`, in its own process group, with a time limit;
  cancellation, timeouts and dying processes end the whole group (`procs`).
- `child`, `ranks`: inside the run process; multi-rank demos start real torch.distributed ranks
  (NCCL on enough GPUs, else gloo on CPU processes).
- `demos/`: the runners; `charts`: a dependency-free SVG renderer; `devices`: placement and peak tables;
  `gpu_check`: `scripts/gpu_check`.
"""
