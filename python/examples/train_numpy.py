"""A Horovod-style training loop in NumPy on fastreduce: softmax regression
on deterministic Gaussian clusters. Rank 0 initialises and broadcasts the
weights, each rank trains on its shard, the gradients are averaged with
fastreduce (op avg) every step.

    mpirun -np 2 python train_numpy.py
"""
import sys

import numpy as np
from mpi4py import MPI

import fastreduce as fr


def data(n=4096, features=8, classes=3, seed=7):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1.0, (classes, features))
    y = rng.integers(0, classes, n)
    x = centres[y] + rng.normal(0, 1.0, (n, features))
    return x.astype(np.float32), y


def main(epochs=5, lr=0.5, batch=64, comm=None, out=sys.stdout):
    world = MPI.COMM_WORLD if comm is None else comm
    me, np_ = world.Get_rank(), world.Get_size()
    x, y = data()
    xs, ys = x[me::np_], y[me::np_]                       # this rank's shard
    steps = min(len(xs) for xs in (x[r::np_] for r in range(np_))) // batch
    with fr.Comm(world) as c:
        w = np.zeros((x.shape[1] + 1, 3), np.float32)     # weights and bias
        if me == 0:
            w[:] = np.random.default_rng(1).normal(0, 0.1, w.shape)
        c.bcast(w, root=0)
        losses = []
        for e in range(epochs):
            total = np.zeros(2, np.float64)
            for s in range(steps):
                xb = np.hstack([xs[s * batch:(s + 1) * batch], np.ones((batch, 1), np.float32)])
                yb = ys[s * batch:(s + 1) * batch]
                z = xb @ w
                p = np.exp(z - z.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                total += [-np.log(p[np.arange(batch), yb]).sum(), batch]
                p[np.arange(batch), yb] -= 1
                grad = (xb.T @ p / batch).astype(np.float32)
                c.allreduce(grad, op="avg")                # the Horovod step
                w -= lr * grad
            c.allreduce(total)
            losses.append(total[0] / total[1])
            if me == 0:
                print("epoch %d: loss %.6f (%s for %d gradient bytes)" % (
                    e + 1, losses[-1], c.allreduce_algorithm(w.size), w.nbytes), file=out)
        ref = w.copy()
        c.bcast(ref, root=0)
        same = np.array([int(np.array_equal(ref, w))], np.int32)
        c.allreduce(same, op="min")
    return losses, bool(same[0])


if __name__ == "__main__":
    losses, same = main()
    if MPI.COMM_WORLD.Get_rank() == 0:
        print("weights identical on all ranks: %s" % ("yes" if same else "NO"))
