"""PyTorch (CPU) on fastreduce: after backward(), each parameter's gradient
is averaged over the ranks through fastreduce, in one fusion buffer, the
way Horovod's DistributedOptimizer does it.

    mpirun -np 2 python train_torch.py
"""
import sys

import numpy as np
import torch
from mpi4py import MPI

import fastreduce as fr


def average_gradients(model, comm):
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads]).contiguous()
    comm.allreduce(flat.numpy(), op="avg")             # the tensor's memory, in place
    off = 0
    for g in grads:
        g.copy_(flat[off:off + g.numel()].view_as(g))
        off += g.numel()


def main(epochs=3, comm=None, out=sys.stdout):
    world = MPI.COMM_WORLD if comm is None else comm
    me, np_ = world.Get_rank(), world.Get_size()
    torch.manual_seed(0)
    gen = np.random.default_rng(3)
    x = torch.tensor(gen.normal(size=(2048, 8)), dtype=torch.float32)
    y = (x[:, :4].sum(dim=1) > 0).long()
    xs, ys = x[me::np_], y[me::np_]
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    with fr.Comm(world) as c:
        with torch.no_grad():
            for p in model.parameters():
                c.bcast(p.data.numpy(), root=0)
        steps = min(len(x[r::np_]) for r in range(np_)) // 64
        for e in range(epochs):
            total = np.zeros(2)
            for s in range(steps):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xs[s * 64:(s + 1) * 64]), ys[s * 64:(s + 1) * 64])
                loss.backward()
                average_gradients(model, c)
                opt.step()
                total += [loss.item(), 1]
            c.allreduce(total)
            losses.append(total[0] / total[1])
            if me == 0:
                print("epoch %d: loss %.6f" % (e + 1, losses[-1]), file=out)
    return losses


if __name__ == "__main__":
    main()
