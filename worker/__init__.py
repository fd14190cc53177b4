"""The demo worker service (`tutor worker`): runs live distributed-training demos on real PyTorch.

- `consumer`: takes signed jobs from the demo job queue (contracts.jobs: a SQLite file or Redis) for the
  placement classes this host can serve, oldest head first and only when it can start it; reports
  claims, events, results and heartbeats back on the queue, signed with the worker token.
- `api`: the worker's own HTTP port: /healthz, and token-protected local runs that share its devices.
- `catalogue`, `params`: the eight demos (names shared with contracts.demos) and their bounded parameters.
- `runs`: the runs on this host's devices, strictly FIFO per device set (each GPU, or the CPU ranks).
- `supervisor`: runs a demo in `python -m worker.child`, in its own process group, with a time limit;
  cancellation, timeouts and dying processes end the whole group (`procs`).
- `child`, `ranks`: inside the run process; multi-rank demos start real torch.distributed ranks
  (NCCL on enough GPUs, else gloo on CPU processes).
- `demos/`: the runners; `charts`: a dependency-free SVG renderer; `devices`: placement and peak tables;
  `gpu_check`: `scripts/gpu_check`.
"""
