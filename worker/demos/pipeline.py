"""Pipeline parallelism: GPipe and 1F1B schedules on real stage processes; measured bubble and activation memory.

Each rank is one stage. Activations go forward and gradients backward with point-to-point send/recv
(sends are non-blocking, as in Megatron, so 1F1B cannot deadlock).

Bubble: on GPUs, the wall clock (1 - compute time / step time). On CPU, where stage processes share cores
and also wait for the OS scheduler, the executed schedule is replayed on a simulated clock with each
stage's median measured op costs (thread CPU time); the wall-clock figure is reported beside it.

Activation memory is the bytes autograd saved for the micro-batches in flight (parameters excluded),
counted with saved_tensors_hooks, so it means the same on CPU and GPU.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from worker.charts import Series, line_chart
from worker.child import DemoContext
from worker.params import PipelineParams
from worker.ranks import RankEnv

Op = tuple[str, int]


def schedule(kind: str, stage: int, stages: int, m: int) -> list[Op]:
    """The op order of one stage: GPipe (all forwards, then all backwards) or 1F1B (warm-up, steady, cool-down)."""
    if kind == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warmup = min(stages - stage - 1, m)
    ops: list[Op] = [("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        ops += [("F", warmup + i), ("B", i)]
    return ops + [("B", i) for i in range(m - warmup, m)]


def theory_bubble(stages: int, m: int) -> float:
    """The bubble fraction (p-1)/(m+p-1) of GPipe and 1F1B with equal stage times."""
    return (stages - 1) / (m + stages - 1)


class _SavedBytes:
    """Counts bytes autograd saves per micro-batch (parameters excluded)."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self.params = {q.data_ptr() for q in params}
        self.current: dict[int, int] = {}

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        """Count a tensor autograd saves (once per storage), and keep it as is."""
        if t.data_ptr() not in self.params:
            self.current[t.data_ptr()] = t.numel() * t.element_size()
        return t

    def hooks(self) -> Any:
        """A context counting one micro-batch's saved tensors."""
        self.current = {}
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


class _Timer:
    """Times each op: thread CPU time on CPU (immune to other processes sharing the cores), synced wall on GPU."""

    def __init__(self, env: RankEnv) -> None:
        self.env = env
        self.costs: dict[str, list[float]] = {"F": [], "B": []}
        self.wall = 0.0
        self._cpu = env.device.type == "cpu"

    def time(self, kind: str, fn: Any, *args: Any) -> Any:
        """Call fn(*args), recording its cost under kind ("F" or "B")."""
        wall, cpu = time.perf_counter(), time.thread_time()
        value = fn(*args)
        self.env.sync()
        spent_wall = time.perf_counter() - wall
        self.costs[kind].append(time.thread_time() - cpu if self._cpu else spent_wall)
        self.wall += spent_wall
        return value


def _send(tensor: torch.Tensor, dst: int, pending: list[Any]) -> None:
    pending.append((dist.isend(tensor, dst=dst), tensor))


def _recv(env: RankEnv, shape: tuple[int, int], src: int) -> torch.Tensor:
    tensor = torch.empty(shape, device=env.device)
    dist.recv(tensor, src=src)
    env.sync()  # on GPU the receive is stream-ordered: wait for it here, not inside the next op's timer
    return tensor


def replay(stages: int, m: int, kind: str, costs: list[dict[str, float]]) -> list[float]:
    """Each stage's idle fraction when the schedule runs on a simulated clock with the given per-stage op costs.

    An op starts when its stage is free and its input is ready: F(s, i) after F(s-1, i), B(s, i) after B(s+1, i).
    """
    ops = [schedule(kind, s, stages, m) for s in range(stages)]
    done: dict[tuple[int, str, int], float] = {}
    clock, nxt = [0.0] * stages, [0] * stages
    while any(nxt[s] < len(ops[s]) for s in range(stages)):
        moved = False
        for s in range(stages):
            if nxt[s] == len(ops[s]):
                continue
            op, i = ops[s][nxt[s]]
            dep = (s - 1, "F", i) if op == "F" and s > 0 else (s + 1, "B", i) if op == "B" and s < stages - 1 else None
            if dep is not None and dep not in done:
                continue
            start = max(clock[s], done[dep] if dep else 0.0)
            clock[s] = done[(s, op, i)] = start + costs[s][op]
            nxt[s] += 1
            moved = True
        if not moved:
            raise RuntimeError(f"{kind} schedule deadlocks")
    total = max(clock)
    return [1 - m * (c["F"] + c["B"]) / total for c in costs]


def _forward(model: nn.Module, x: torch.Tensor, last: bool) -> torch.Tensor:
    y = model(x)
    return y.pow(2).mean() if last else y


def _step(env: RankEnv, model: nn.Module, kind: str, m: int, p: PipelineParams) -> dict[str, Any]:
    first, last = env.rank == 0, env.rank == env.world_size - 1
    shape = (p.micro_batch_size, p.hidden)
    batches = [torch.randn(shape, device=env.device) for _ in range(m)] if first else []
    inputs: dict[int, torch.Tensor] = {}
    outputs: dict[int, torch.Tensor] = {}
    sizes: dict[int, int] = {}
    counter, timer = _SavedBytes(list(model.parameters())), _Timer(env)
    pending: list[Any] = []
    live = peak = 0
    model.zero_grad(set_to_none=True)
    env.sync()
    dist.barrier()
    t0 = time.perf_counter()
    for op, i in schedule(kind, env.rank, env.world_size, m):
        if op == "F":
            x = batches[i] if first else _recv(env, shape, env.rank - 1).requires_grad_()
            with counter.hooks():
                y = timer.time("F", _forward, model, x, last)
            inputs[i], outputs[i], sizes[i] = x, y, sum(counter.current.values())
            live += sizes[i]
            peak = max(peak, live)
            if not last:
                _send(y.detach(), env.rank + 1, pending)
        else:
            grad = None if last else _recv(env, shape, env.rank + 1)
            timer.time("B", outputs[i].backward, grad)
            if not first:
                g = inputs[i].grad
                assert g is not None
                _send(g, env.rank - 1, pending)
            del inputs[i], outputs[i]
            live -= sizes.pop(i)
    for work, _ in pending:
        work.wait()
    dist.barrier()
    wall_total = time.perf_counter() - t0
    costs = {k: statistics.median(v) for k, v in timer.costs.items()}
    return {"total": wall_total, "wall_idle": 1 - timer.wall / wall_total, "costs": costs, "peak": peak}


def _pipeline_rank(env: RankEnv, params: dict[str, Any]) -> list[dict[str, Any]]:
    p = PipelineParams.model_validate(params)
    torch.manual_seed(env.rank)
    layers = [nn.Sequential(nn.Linear(p.hidden, p.hidden), nn.GELU()) for _ in range(p.layers_per_stage)]
    model = nn.Sequential(*layers).to(env.device)
    out = []
    configs = [(kind, m) for kind in ("gpipe", "1f1b") for m in p.micro_batches]
    for n, (kind, m) in enumerate(configs):
        steps = [_step(env, model, kind, m, p) for _ in range(p.steps + 1)][1:]  # the first step warms up
        out.append({"schedule": kind, "micro_batches": m, "steps": steps})
        env.progress(f"{kind} with {m} micro-batches done", (n + 1) / len(configs))
    return out


def _config_row(kind: str, m: int, stage_steps: list[list[dict[str, Any]]], wall: bool) -> dict[str, Any]:
    """One schedule × micro-batch count: the median step (by simulated bubble) over the measured steps."""
    stages = len(stage_steps)
    candidates = []
    for k in range(len(stage_steps[0])):
        step = [stage_steps[s][k] for s in range(stages)]
        simulated = replay(stages, m, kind, [st["costs"] for st in step])
        candidates.append((statistics.fmean(simulated), simulated, step))
    candidates.sort(key=lambda c: c[0])
    simulated_mean, simulated, step = candidates[len(candidates) // 2]
    wall_mean = statistics.fmean(st["wall_idle"] for st in step)
    return {
        "schedule": kind,
        "micro_batches": m,
        "measured_bubble": wall_mean if wall else simulated_mean,
        "bubble_method": "wall clock" if wall else "simulated clock with measured op costs",
        "theory_bubble": theory_bubble(stages, m),
        "simulated_clock_bubble": simulated_mean,
        "wall_clock_bubble": wall_mean,
        "idle_per_stage": simulated,
        "step_ms": max(st["total"] for st in step) * 1e3,
        "forward_ms": statistics.fmean(st["costs"]["F"] for st in step) * 1e3,
        "backward_ms": statistics.fmean(st["costs"]["B"] for st in step) * 1e3,
        "peak_activation_bytes_per_stage": [int(st["peak"]) for st in step],
        "peak_activation_bytes_stage0": int(step[0]["peak"]),
    }


def _summarise(per_rank: list[list[dict[str, Any]]], wall: bool) -> list[dict[str, Any]]:
    rows = []
    for k, head in enumerate(per_rank[0]):
        stage_steps = [rank_rows[k]["steps"] for rank_rows in per_rank]
        rows.append(_config_row(head["schedule"], head["micro_batches"], stage_steps, wall))
    return rows


def run(p: PipelineParams, ctx: DemoContext) -> dict[str, Any]:
    """Both schedules for each micro-batch count: bubble measured vs theory, and peak activation memory."""
    ctx.progress(f"starting {p.stages} stages ({ctx.backend})")
    rows = _summarise(ctx.run_ranks(_pipeline_rank, p.model_dump()), wall=ctx.kind == "cuda")
    ms = [float(m) for m in p.micro_batches]
    gpipe = [r for r in rows if r["schedule"] == "gpipe"]
    ofob = [r for r in rows if r["schedule"] == "1f1b"]
    bubble = line_chart(
        f"Pipeline bubble, {p.stages} stages ({ctx.backend})",
        [
            Series("GPipe measured", ms, [r["measured_bubble"] for r in gpipe]),
            Series("1F1B measured", ms, [r["measured_bubble"] for r in ofob]),
            Series("(p-1)/(m+p-1)", ms, [theory_bubble(p.stages, int(m)) for m in ms], dashed=True),
        ],
        "micro-batches m",
        "idle fraction",
    )
    mib = 1024 * 1024
    memory = line_chart(
        "Peak activation memory, stage 0",
        [
            Series("GPipe", ms, [r["peak_activation_bytes_stage0"] / mib for r in gpipe]),
            Series("1F1B", ms, [r["peak_activation_bytes_stage0"] / mib for r in ofob]),
        ],
        "micro-batches m",
        "MiB saved for backward",
    )
    worst = max(abs(r["measured_bubble"] - r["theory_bubble"]) for r in rows)
    return {
        "figures": {"stages": p.stages, "max_abs_error_vs_theory": worst, "rows": rows},
        "series": [
            {"name": f"{kind}_measured_bubble", "x": ms, "y": [r["measured_bubble"] for r in part]}
            for kind, part in (("gpipe", gpipe), ("1f1b", ofob))
        ]
        + [{"name": "theory_bubble", "x": ms, "y": [theory_bubble(p.stages, int(m)) for m in ms]}],
        "charts": [{"title": "bubble fraction", "svg": bubble}, {"title": "peak activation memory", "svg": memory}],
        "notes": [
            "The stages are real processes exchanging activations and gradients. On GPUs measured_bubble is the wall "
            "clock: 1 - (forward+backward time) / step time, averaged over stages.",
            "On CPU measured_bubble is a simulated clock: the schedule replayed with each stage's median measured "
            "forward and backward cost (thread CPU time), because CPU processes sharing cores wait for the OS "
            "scheduler as well as for each other. wall_clock_bubble (reported too) includes that waiting.",
            "Activation memory = bytes autograd saved for in-flight micro-batches (saved_tensors_hooks). "
            "1F1B keeps at most p - stage micro-batches in flight; GPipe keeps all m.",
        ],
    }
