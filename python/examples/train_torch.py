"""Data-parallel training of an MLP with PyTorch (CPU) on fastreduce, or on
DDP over gloo, and where each step's time goes.

    mpirun -np 2 python train_torch.py --mode fastreduce|hook|ddp [--compression none|fp16]
        [--hidden 1024] [--layers 4] [--batch 64] [--epochs 3] [--lr 0.05] [--bucket-mb 25]

The data is made here, the same on every rank (nothing is downloaded): 10
classes of 64-feature points, each class a Gaussian cloud around a random
centre, with noise wide enough that the classes overlap. A fixed part of it
is held out for testing. Each rank trains on its shard of the training
points (every np-th point), shuffled each epoch, --batch points a step per
rank, and tests on its shard of the held-out points.

The model is an MLP: --layers linear layers of --hidden units with ReLU
between them, 64 inputs, 10 outputs; SGD with momentum. Rank 0 makes the
parameters and broadcasts them. The three modes share the model, the data,
the optimizer and the bucket size (--bucket-mb, in MiB: DDP's bucket_cap_mb
and the DistributedOptimizer's fusion_bytes; both count the gradients'
float32 bytes, before any compression, so with fp16 the buckets hold the
same parameters in every mode):

  fastreduce  fastreduce.torch.DistributedOptimizer, no DDP: each bucket of
              gradients goes into a non-blocking grouped allreduce when
              backward has made all of it, and step() waits for them;
              parameters broadcast with fastreduce.torch.broadcast_parameters.
  hook        DDP over a gloo process group with fastreduce.torch's
              allreduce_hook in place of its allreduce (DDP broadcasts the
              parameters over gloo).
  ddp         plain DDP over gloo.

DDP copies each gradient into its bucket and, once the bucket is reduced,
back into .grad; --grad-as-bucket-view (DDP's gradient_as_bucket_view=True)
makes the gradients views of the buckets instead, in both DDP modes.

--compression fp16 sends the gradients as float16: the optimizer's
Compression.fp16, fastreduce.torch.fp16_compress_hook, or PyTorch's own
default_hooks.fp16_compress_hook in the ddp mode.

Where the time goes (per step, medians over the epoch's steps, averaged
over the ranks):

  data      slicing the step's batch out of the shard (an index_select).
  step      the distributed step: zero_grad, forward, backward, optimizer
            step, everything the mode does to average the gradients
            included (DDP's bucket copies, hooks, waits).
  compute   the same forward, backward and optimizer step on the same batch
            with no communication at all: a local copy of the model (the
            same parameters, reset to the trained model's at each epoch's
            start) with a plain optimizer of the same kind. The copy's step
            runs right beside the distributed one (one then the other, their
            order swapped every step; --calib-every N: every N-th step only),
            so both see the same machine at the same moment.
  exposed   communication not hidden behind compute: the median over steps
            of (step - compute) for the steps that have both. It holds the
            collectives' time not overlapped with backward, the hooks' and
            copies' own cost, time lost to the communication's threads
            competing for the cores, and waiting for a slower rank. It can be
            slightly negative when the two timings are within noise.
  sync      (fastreduce mode) the time step() spends in synchronize(),
            waiting for the allreduces to end (for the slowest rank's
            gradients too): the wait, without the cost of starting the
            allreduces inside backward.

Each epoch rank 0 prints the training loss (the mean over the epoch's steps
and the ranks), the accuracy on the held-out points (over all ranks' shards)
and these times. Each rank computes with --threads torch threads (default:
the node's cores shared among its ranks, at least 1), the same in every mode.

The first --warmup steps (DDP rebuilds its buckets after the first) are left
out of the summary line printed at the end, which holds the medians over all
the other steps. At the end rank 0 says whether the parameters are
bit-identical on every rank.

main(epochs=..., mode=..., out=..., **options) runs it from Python (the
options are the command line's, with underscores) and returns a dict:
losses and accuracy per epoch, timing (one dict per epoch), summary, same
(bool: the parameters bit-identical on every rank) and params (this rank's
final parameters). For modes hook and ddp it uses the default torch.distributed
process group where one is initialised, and otherwise makes one over gloo
(rank 0 picks a free port and sends it over MPI) and destroys it at the end.
"""
import argparse
import hashlib
import os
import statistics
import sys
import time

import numpy as np
import torch
from mpi4py import MPI

import fastreduce as fr
import fastreduce.torch as frt

MODES = ("fastreduce", "hook", "ddp")
FEATURES, CLASSES = 64, 10


def make_data(n_train, n_test, seed=12345, noise=2.5):
    """(x_train, y_train, x_test, y_test): Gaussian clouds around 10 random
    centres in 64 dimensions, the same on every rank."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 1.0, (CLASSES, FEATURES))
    scales = rng.uniform(0.5, 1.5, (CLASSES, FEATURES))   # each class its own spread per feature
    n = n_train + n_test
    y = rng.integers(0, CLASSES, n)
    x = centres[y] + noise * scales[y] * rng.normal(0.0, 1.0, (n, FEATURES))
    x = torch.from_numpy(x.astype(np.float32))
    y = torch.from_numpy(y.astype(np.int64))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def make_model(hidden, layers, seed=0):
    torch.manual_seed(seed)
    mods, width = [], FEATURES
    for _ in range(layers - 1):
        mods += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    mods.append(torch.nn.Linear(width, CLASSES))
    return torch.nn.Sequential(*mods)


def make_optimizer(params, lr):
    return torch.optim.SGD(params, lr=lr, momentum=0.9)


def default_threads(world):
    """Torch threads a rank: the cores this process may use, shared by the
    ranks on its node (at least 1)."""
    local = world.Split_type(MPI.COMM_TYPE_SHARED)
    n = local.Get_size()
    local.Free()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores // n)


def process_group(world, comm):
    """Make the default torch.distributed process group over gloo, unless
    there is one; returns whether it was made here (then destroy it)."""
    import torch.distributed as dist
    if dist.is_initialized():
        if dist.get_world_size() != world.Get_size() or dist.get_rank() != world.Get_rank():
            raise RuntimeError("the default process group is not this MPI communicator's ranks")
        return False
    frt.init_process_group("gloo", comm)
    return True


def params_digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def stats(world, steps):
    """Per-step medians (ms) of this rank's timings, averaged over the ranks."""
    data = [s["data"] for s in steps]
    step = [s["step"] for s in steps]
    comp = [s["compute"] for s in steps if "compute" in s]
    exp = [s["step"] - s["compute"] for s in steps if "compute" in s]
    sync = [s["sync"] for s in steps if "sync" in s]
    mine = np.array([median(data), median(comp), median(exp), median(step), median(sync) if sync else 0.0,
                     sum(step)]) * 1e3
    avg = world.allreduce(mine) / world.Get_size()
    r = dict(zip(("data_ms", "compute_ms", "exposed_ms", "step_ms", "sync_ms", "total_step_ms"), avg.tolist()))
    r["exposed_pct"] = 100.0 * r["exposed_ms"] / r["step_ms"] if r["step_ms"] else float("nan")
    r["steps"] = len(steps)
    return r


def main(epochs=3, mode="fastreduce", out=sys.stdout, hidden=1024, layers=4, batch=64, lr=0.05, bucket_mb=25.0,
         compression="none", n_train=16384, n_test=4096, threads=0, calib_every=1, warmup=2, seed=0,
         grad_as_bucket_view=False, comm=None, world=None):
    world = MPI.COMM_WORLD if world is None else world
    me, size = world.Get_rank(), world.Get_size()
    if mode not in MODES:
        raise ValueError("mode %r is not one of %s" % (mode, ", ".join(MODES)))
    if compression not in ("none", "fp16"):
        raise ValueError("compression %r is not none or fp16" % (compression,))
    threads = threads or default_threads(world)
    torch.set_num_threads(threads)

    x, y, xt, yt = make_data(n_train, n_test)
    xs, ys = x[me::size], y[me::size]                        # this rank's shards
    xts, yts = xt[me::size], yt[me::size]
    steps = min(len(x[r::size]) for r in range(size)) // batch   # the same on every rank
    if steps < 1:
        raise ValueError("--batch %d is larger than a rank's shard" % batch)

    model = make_model(hidden, layers, seed + me)            # different on every rank until the broadcast
    local = make_model(hidden, layers, seed + me)            # compute-only copy (no communication)
    local_opt = make_optimizer(local.parameters(), lr)
    nparams = sum(p.numel() for p in model.parameters())
    bucket_bytes = int(bucket_mb * (1 << 20))

    made_pg = False
    own_comm = comm is None
    comm = fr.Comm(world) if own_comm else comm
    sync_times = []
    try:
        if mode == "fastreduce":
            frt.broadcast_parameters(model.state_dict(), root_rank=0, comm=comm)
            net = model
            opt = frt.DistributedOptimizer(make_optimizer(model.parameters(), lr),
                                           named_parameters=model.named_parameters(), comm=comm,
                                           fusion_bytes=bucket_bytes,
                                           compression=getattr(frt.Compression, compression))
            frt.broadcast_optimizer_state(opt, root_rank=0, comm=comm)
            plain_sync = opt.synchronize

            def timed_sync():   # step() calls self.synchronize(): time the wait in it
                t = time.perf_counter()
                plain_sync()
                sync_times.append(time.perf_counter() - t)
            opt.synchronize = timed_sync
            buckets = len(getattr(opt, "_fr_buckets", ()))
        else:
            from torch.nn.parallel import DistributedDataParallel as DDP
            made_pg = process_group(world, comm)
            net = DDP(model, bucket_cap_mb=bucket_mb,        # broadcasts rank 0's parameters
                      gradient_as_bucket_view=grad_as_bucket_view)
            if mode == "hook":
                net.register_comm_hook(comm, frt.fp16_compress_hook if compression == "fp16"
                                       else frt.allreduce_hook)
            elif compression == "fp16":
                from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
                net.register_comm_hook(None, default_hooks.fp16_compress_hook)
            opt = make_optimizer(net.parameters(), lr)
            buckets = None
        if me == 0:
            print("mode %s, compression %s, %d ranks, %d torch thread(s) each; MLP %d x %d, %d layers: %d "
                  "parameters, %.2f MB of float32 gradients a step; bucket %g MiB%s; batch %d a rank, %d steps "
                  "an epoch" % (mode, compression, size, threads, hidden, hidden, layers, nparams, nparams * 4e-6,
                                bucket_mb, " (%d buckets)" % buckets if buckets else "", batch, steps), file=out)

        def one_step(m, o, xb, yb):
            o.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(m(xb), yb)
            loss.backward()
            o.step()
            return loss

        def real_step(xb, yb):
            return one_step(net, opt, xb, yb)

        def local_step(xb, yb):
            return one_step(local, local_opt, xb, yb)

        losses, accuracy, timing, measured = [], [], [], []
        n = 0
        for e in range(epochs):
            local.load_state_dict(model.state_dict())
            g = torch.Generator().manual_seed(1000003 * (e + 1) + me)
            perm = torch.randperm(len(xs), generator=g)
            total, epoch_steps = torch.zeros(()), []
            t_epoch = time.perf_counter()
            for s in range(steps):
                t0 = time.perf_counter()
                idx = perm[s * batch:(s + 1) * batch]
                xb, yb = xs.index_select(0, idx), ys.index_select(0, idx)
                t1 = time.perf_counter()
                rec = {"data": t1 - t0}
                calib = calib_every > 0 and s % calib_every == 0
                first = calib and (s // calib_every) % 2 == 1     # the compute-only step first, every other time
                if first:
                    t = time.perf_counter()
                    local_step(xb, yb)
                    rec["compute"] = time.perf_counter() - t
                nsync = len(sync_times)
                t = time.perf_counter()
                loss = real_step(xb, yb)
                rec["step"] = time.perf_counter() - t
                if len(sync_times) > nsync:
                    rec["sync"] = sync_times[-1]
                if calib and not first:
                    t = time.perf_counter()
                    local_step(xb, yb)
                    rec["compute"] = time.perf_counter() - t
                total += loss.detach()
                epoch_steps.append(rec)
                if n >= warmup:
                    measured.append(rec)
                n += 1
            wall = time.perf_counter() - t_epoch
            with torch.no_grad():
                model.eval()
                correct = (model(xts).argmax(1) == yts).sum().item()
                model.train()
            loss_sum, correct, tested = world.allreduce(np.array([total.item(), correct, len(yts)], np.float64))
            losses.append(loss_sum / (steps * size))
            accuracy.append(correct / tested)
            st = stats(world, epoch_steps)
            st["wall_s"] = world.allreduce(wall, op=MPI.MAX)
            timing.append(st)
            if me == 0:
                print("epoch %d: loss %.4f, test accuracy %.2f%%; per step (median ms): data %.3f, compute %.2f, "
                      "exposed communication %.2f (%.1f%% of the step), step %.2f%s; epoch %.2f s" % (
                          e + 1, losses[-1], 100 * accuracy[-1], st["data_ms"], st["compute_ms"], st["exposed_ms"],
                          st["exposed_pct"], st["step_ms"],
                          ", of it waiting in synchronize() %.2f" % st["sync_ms"] if mode == "fastreduce" else "",
                          st["wall_s"]), file=out)
                out.flush()
        summary = stats(world, measured)
        summary.update(mode=mode, np=size, compression=compression, grad_mb=nparams * 4e-6)
        digests = world.allgather(params_digest(model))
        same = all(d == digests[0] for d in digests)
        if me == 0:
            print("summary: mode %s np %d compression %s step_ms %.3f compute_ms %.3f exposed_ms %.3f exposed_pct "
                  "%.2f sync_ms %.3f data_ms %.4f steps %d" % (
                      mode, size, compression, summary["step_ms"], summary["compute_ms"], summary["exposed_ms"],
                      summary["exposed_pct"], summary["sync_ms"], summary["data_ms"], summary["steps"]), file=out)
            print("parameters bit-identical on all %d ranks: %s" % (size, "yes" if same else "NO"), file=out)
            out.flush()
        if mode != "fastreduce":
            del net   # DDP's reducer and its hook's state before the communicator goes
        return {"losses": losses, "accuracy": accuracy, "timing": timing, "summary": summary, "same": same,
                "params": [p.detach().clone() for p in model.parameters()]}
    finally:
        if made_pg:
            import torch.distributed as dist
            dist.destroy_process_group()
        if own_comm:
            comm.free()


def parse(argv=None):
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--mode", choices=MODES, default="fastreduce")
    a.add_argument("--compression", choices=("none", "fp16"), default="none")
    a.add_argument("--hidden", type=int, default=1024, help="units of each hidden layer (1024)")
    a.add_argument("--layers", type=int, default=4, help="linear layers (4)")
    a.add_argument("--batch", type=int, default=64, help="points a step on each rank (64)")
    a.add_argument("--epochs", type=int, default=3)
    a.add_argument("--lr", type=float, default=0.05)
    a.add_argument("--bucket-mb", type=float, default=25.0,
                   help="MiB a bucket: DDP's bucket_cap_mb and the DistributedOptimizer's fusion_bytes (25)")
    a.add_argument("--n-train", type=int, default=16384, help="training points over all ranks (16384)")
    a.add_argument("--n-test", type=int, default=4096, help="held-out points (4096)")
    a.add_argument("--threads", type=int, default=0,
                   help="torch threads a rank (0: the cores shared by the node's ranks, at least 1)")
    a.add_argument("--calib-every", type=int, default=1,
                   help="time the compute-only step beside every N-th step (1; 0: never, no exposed figure)")
    a.add_argument("--warmup", type=int, default=2, help="first steps left out of the summary (2)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--grad-as-bucket-view", action="store_true",
                   help="modes hook and ddp: DDP's gradient_as_bucket_view=True (the gradients are views of its "
                        "buckets: no copy into the buckets and back)")
    return a.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    main(**vars(args))
