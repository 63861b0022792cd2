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


def test_torch_training_step():
    pytest.importorskip("torch")
    import train_torch
    losses = train_torch.main(epochs=3, out=io.StringIO())
    assert losses[-1] < losses[0], losses
