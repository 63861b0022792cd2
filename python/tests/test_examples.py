"""The training examples: the loss falls and the weights agree on every rank."""
import io
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))


def test_numpy_training_step():
    import train_numpy
    losses, same = train_numpy.main(epochs=4, out=io.StringIO())
    assert losses[-1] < losses[0] * 0.9, losses
    assert same


@pytest.fixture(scope="module")
def process_group():
    """The default torch.distributed group over gloo, for DDP: the one some
    other module made, if any, else one made here for this module and
    destroyed after it."""
    pytest.importorskip("torch")
    import torch.distributed as dist
    made = not dist.is_initialized()
    if made:
        import fastreduce.torch as frt
        frt.init_process_group("gloo", frt.default_comm())
    yield
    if made:
        dist.destroy_process_group()


TINY = dict(hidden=48, layers=3, batch=32, lr=0.05, n_train=3072, n_test=768, bucket_mb=0.01, threads=1)
_final_losses = {}


@pytest.mark.parametrize("mode", ["fastreduce", "hook", "ddp"])
@pytest.mark.parametrize("compression", ["none", "fp16"])
def test_torch_training_step(process_group, mode, compression):
    import torch
    from mpi4py import MPI
    import train_torch
    out = io.StringIO()
    r = train_torch.main(epochs=2, mode=mode, compression=compression, out=out, **TINY)
    losses, acc = r["losses"], r["accuracy"]
    assert len(losses) == len(acc) == 2
    assert losses[-1] < losses[0], (losses, out.getvalue())
    assert acc[-1] > 0.5, (acc, out.getvalue())            # 10 classes: chance is 0.1
    assert r["same"], out.getvalue()
    # the parameters bit-identical on every rank, checked here too
    blobs = MPI.COMM_WORLD.allgather(b"".join(p.contiguous().view(torch.uint8).numpy().tobytes()
                                              for p in r["params"]))
    assert all(b == blobs[0] for b in blobs)
    s = r["summary"]
    assert s["step_ms"] > 0 and s["compute_ms"] > 0 and s["steps"] > 0
    if MPI.COMM_WORLD.Get_rank() == 0:
        text = out.getvalue()
        assert "epoch 2: loss" in text and "exposed communication" in text, text
        assert "bit-identical on all %d ranks: yes" % MPI.COMM_WORLD.Get_size() in text, text
    _final_losses[mode, compression] = losses[-1]


def test_torch_modes_agree():
    """The same model, data and optimizer: the three modes train alike (the
    sums' rounding aside)."""
    got = {m: _final_losses.get((m, "none")) for m in ("fastreduce", "hook", "ddp")}
    if None in got.values():
        pytest.skip("a mode's run did not finish")
    for m, v in got.items():
        assert v == pytest.approx(got["ddp"], rel=1e-3), got
