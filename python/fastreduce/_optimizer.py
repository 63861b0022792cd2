"""fastreduce.torch's DistributedOptimizer (Horovod's): gradients reduced
in buckets while backward runs, the optimizer's step waiting for them.
Imported by fastreduce.torch, which is where programs find it."""
import contextlib
import weakref

import torch
import torch.utils.weak

import fastreduce as _fr
from fastreduce import AVG, SUM
from fastreduce.torch import _comm, empty

class Compression:
    """How gradients travel: Compression.none (as they are), .fp16 or .bf16."""

    class _To:
        def __init__(self, dtype):
            self.dtype = dtype

        def __repr__(self):
            return "Compression(%s)" % self.dtype

    none = _To(None)
    fp16 = _To(torch.float16)
    bf16 = _To(torch.bfloat16)


class _Bucket:
    __slots__ = ("params", "pending", "ready", "work", "wire", "flags", "made", "flat", "views")

    def __init__(self, params):
        self.params, self.pending, self.ready, self.work, self.wire = params, len(params), False, None, None
        # each parameter's flag, reduced with the bucket (1 where a rank made
        # a gradient), and this rank's own (see _fr_start)
        self.flags, self.made = None, None
        self.flat, self.views = None, None   # a CPU bucket's shared buffer, and each parameter's view of it

    def share(self, wire_dtype):
        """Give a CPU bucket one flat buffer in shared memory (fastreduce.torch.empty)
        of its gradients' type on the wire, the flags after them, and each
        parameter a view of it; without compression the views become the
        gradients, so backward accumulates into the buffer that the zero-copy
        allreduce reads. Returns the parameters given a zero view for None."""
        p0 = self.params[0]
        if p0.device.type != "cpu":
            return []
        n = sum(p.numel() for p in self.params)
        self.flat = empty(n + len(self.params), dtype=wire_dtype or p0.dtype)
        self.views, off = [], 0
        for p in self.params:
            self.views.append(self.flat[off:off + p.numel()].view_as(p))
            off += p.numel()
        self.flags = self.flat[n:]
        return self.attach() if wire_dtype is None else []

    def attach(self):
        """Make the views the gradients again (their values kept, or zeros
        for None); returns the parameters whose gradient was None."""
        none = []
        for p, v in zip(self.params, self.views):
            if p.grad is None:
                v.zero_()
                none.append(p)
            elif p.grad.data_ptr() != v.data_ptr():
                v.copy_(p.grad)
            p.grad = v
        return none


def _buckets(params, fusion_bytes):
    """Parameters in reverse order (backward makes the last layers' gradients
    first), cut into buckets of one device and type of at most
    @p fusion_bytes of gradients (as DDP's bucket_cap_mb counts them, before
    any compression); 0: one parameter a bucket."""
    out, cur, size, key = [], [], 0, None
    for p in reversed(params):
        k = (p.device, p.dtype)
        nbytes = p.numel() * p.element_size()
        if cur and (k != key or fusion_bytes <= 0 or size + nbytes > fusion_bytes):
            out.append(_Bucket(cur))
            cur, size = [], 0
        cur.append(p)
        size += nbytes
        key = k
    if cur:
        out.append(_Bucket(cur))
    return out


# Each parameter's DistributedOptimizer (a weak reference): the one whose
# hooks it has, which a newer one on the same parameter closes.
_owners = torch.utils.weak.WeakIdKeyDictionary()


def _remove_hooks(handles):
    for h in handles:
        h.remove()
    handles.clear()


class _DistributedOptimizer:
    """The methods a DistributedOptimizer adds to the wrapped optimizer's
    class (see DistributedOptimizer()); _fr_base is that class."""

    def _fr_setup(self, named_parameters, comm, fusion_bytes, compression, backward_passes_per_step, op,
                  average_aggregated_gradients, shared_buckets):
        if backward_passes_per_step < 1:
            raise _fr.ArgumentError(1, "backward_passes_per_step must be at least 1")
        if op not in (AVG, SUM):
            raise _fr.ArgumentError(1, "op must be fastreduce.AVG or SUM, not %r" % (op,))
        params = self._fr_trainable()
        self._fr_names = {}
        if named_parameters is not None:
            self._fr_names = {id(p): name for name, p in named_parameters}
            unnamed = [p for p in params if id(p) not in self._fr_names]
            if unnamed:
                raise _fr.ArgumentError(1, "named_parameters lacks %d of the optimizer's parameters" % len(unnamed))
        self._fr_closed = None
        self._fr_comm = _comm(comm)
        self._fr_wire = compression.dtype
        self._fr_op = op
        self._fr_passes_per_step = backward_passes_per_step
        self._fr_average_passes = average_aggregated_gradients
        self._fr_fusion, self._fr_shared = fusion_bytes, shared_buckets
        self._fr_old = {}   # id(p): (weak reference to a .grad this optimizer left, whether a stand-in)
        # whether the gradients are reduced since the last step() or zero_grad()
        # (synchronize() then step() reduces once), and inside skip_synchronize()
        self._fr_synchronized = self._fr_skip = False
        # The hooks hold the optimizer weakly, so that one the program drops
        # is collected (its finalizer removes them) rather than kept by its
        # parameters and still counting their gradients.
        ref = weakref.ref(self)

        def ready(p):
            opt = ref()
            if opt is not None:
                opt._fr_ready(p)
        self._fr_hook, self._fr_hooks = ready, []
        weakref.finalize(self, _remove_hooks, self._fr_hooks).atexit = False
        self._fr_layout(params, True)

    def _fr_trainable(self):
        """The parameters of the param groups that require gradients, in order."""
        return [p for g in self.param_groups for p in g["params"] if p.requires_grad]

    def _fr_layout(self, params, at_setup):
        """Bucket and hook @p params (the trainable ones, _fr_trainable()),
        at setup or after a step's reduction; the .grad of each keeps what it
        stood for (reduced before, or a stand-in for None)."""
        left = {id(p): self._fr_left(p) for p in params}
        self._fr_take(params)   # (first: it may refuse)
        _remove_hooks(self._fr_hooks)
        self._fr_ids = [id(p) for p in params]
        self._fr_buckets = _buckets(params, self._fr_fusion)
        for b in self._fr_buckets if self._fr_shared else ():
            for p in b.share(self._fr_wire):
                if at_setup:
                    left[id(p)] = "stand-in"   # the views are the gradients from the start
                else:
                    p.grad = None   # as the reduction left it: the step must see None
        for p in params:
            if left[id(p)] is not None:
                self._fr_mark(p, left[id(p)] == "stand-in")
        self._fr_bucket_of = {id(p): b for b in self._fr_buckets for p in b.params}
        self._fr_passes = {id(p): 0 for p in params}
        self._fr_next = 0   # the first bucket not started: buckets start in order on every rank
        self._fr_hooks.extend(p.register_post_accumulate_grad_hook(self._fr_hook) for p in params)

    def _fr_take(self, params):
        """Become @p params' DistributedOptimizer: the ones they had are
        closed (a parameter's gradient is counted by one optimizer only), after
        refusing if they have gradients not reduced."""
        olds = {id(o): o for o in (_owners[p]() if p in _owners else None for p in params)
                if o is not None and o is not self}
        for o in olds.values():
            if o._fr_closed is None and o._fr_pending():
                raise _fr.ArgumentError(1, "these parameters' DistributedOptimizer has gradients not reduced: call "
                                        "its step() or synchronize() before wrapping them in another")
        for o in olds.values():
            o._fr_close("its parameters were wrapped by a newer DistributedOptimizer: use that one")
        ref = weakref.ref(self)
        for p in params:
            _owners[p] = ref

    def _fr_close(self, why):
        _remove_hooks(self._fr_hooks)
        self._fr_buckets, self._fr_bucket_of, self._fr_passes = [], {}, {}
        self._fr_closed = why

    def _fr_usable(self):
        if self._fr_closed is not None:
            raise _fr.FastReduceError(6, "this DistributedOptimizer is closed: " + self._fr_closed)

    def _fr_name(self, p):
        return self._fr_names.get(id(p), "a parameter of shape %s" % tuple(p.shape))

    def _fr_ready(self, p):
        """After backward accumulated @p p's gradient: count the pass, and
        start its bucket's allreduce (and the next ready ones') when full."""
        self._fr_synchronized = False   # (a gradient after synchronize(): step() reduces again)
        n = self._fr_passes[id(p)] = self._fr_passes[id(p)] + 1
        if n > self._fr_passes_per_step:
            raise _fr.FastReduceError(16, "%s got a gradient %d times before step(); backward_passes_per_step is %d"
                                      % (self._fr_name(p), n, self._fr_passes_per_step))
        if n < self._fr_passes_per_step:
            return
        b = self._fr_bucket_of[id(p)]
        b.pending -= 1
        if b.pending == 0:
            b.ready = True
            self._fr_start_ready()

    def _fr_start_ready(self):
        while self._fr_next < len(self._fr_buckets) and self._fr_buckets[self._fr_next].ready:
            self._fr_start(self._fr_buckets[self._fr_next])
            self._fr_next += 1

    def _fr_mark(self, p, stand_in):
        """Record @p p's .grad as one this optimizer left: the reduced
        gradient, or (@p stand_in) a zero view standing for None."""
        if p.grad is None:
            self._fr_old.pop(id(p), None)
        else:
            self._fr_old[id(p)] = (weakref.ref(p.grad), stand_in)

    def _fr_left(self, p):
        """"stand-in" or "reduced" while @p p's .grad is what this optimizer
        left there, else None."""
        old = self._fr_old.get(id(p))
        if old is None or p.grad is None or old[0]() is not p.grad:
            return None
        return "stand-in" if old[1] else "reduced"

    def _fr_made(self, p):
        """Whether this rank has a gradient for @p p made since the last
        reduction: backward made it (its hook), or the program put it in
        .grad (and did not set .grad to None since)."""
        return p.grad is not None and (self._fr_passes.get(id(p), 0) > 0 or self._fr_left(p) is None)

    def _fr_start(self, b):
        """Start @p b's allreduce, with each parameter's flag: 1 where this
        rank made a gradient, else 0 and zeros in its place (a gradient
        reduced before, or a stand-in, must not be summed again), so that
        the reduction tells which parameters no rank gave a gradient."""
        b.made = [self._fr_made(p) for p in b.params]
        for p, made in zip(b.params, b.made):
            if made and p.grad.layout != torch.strided:
                p.grad = p.grad.to_dense()   # (reduced as a dense one: see DistributedOptimizer)
        if b.flat is not None:
            self._fr_start_flat(b)
            return
        op, comm, wire = self._fr_op, self._fr_comm, self._fr_wire
        dtype = wire or b.params[0].dtype
        # (.to().contiguous() is the gradient itself where it can travel as it is)
        b.wire = [p.grad.to(dtype).contiguous() if made else torch.zeros(p.shape, dtype=dtype, device=p.device)
                  for p, made in zip(b.params, b.made)]
        b.flags = torch.tensor(b.made, dtype=dtype, device=b.params[0].device)
        bufs = b.wire + [b.flags]
        if wire is not None and op == AVG:
            for w in bufs:   # (divided first: a narrow type's sum could overflow)
                w.div_(comm.size)
            op = SUM
        b.work = comm.allreduce_group(bufs, op=op, async_op=True)

    def _fr_start_flat(self, b):
        """A shared bucket: its gradients are its views already (without
        compression; one the program replaced is copied back in), or are
        converted into them; one in-place allreduce of the whole buffer."""
        op, comm = self._fr_op, self._fr_comm
        for p, v, made in zip(b.params, b.views, b.made):
            if not made:
                if p.grad is v and self._fr_left(p) == "reduced":
                    p.grad = v.clone()   # kept, should no rank make a new one
                v.zero_()
            elif p.grad is not v:
                v.copy_(p.grad)
                if self._fr_wire is None:
                    p.grad = v
        b.flags.copy_(torch.tensor(b.made))
        if self._fr_wire is not None and op == AVG:
            b.flat.div_(comm.size)
            op = SUM
        b.wire = b.views
        b.work = comm.allreduce(b.flat, op=op, async_op=True)

    def _fr_finish(self, b):
        """Wait for @p b and leave each parameter's result in .grad: the
        reduced gradient where some rank made one; where none did, the
        gradient it had (None for a stand-in), as a plain optimizer's, which
        then leaves the parameter as it is."""
        b.work.wait()
        k = self._fr_passes_per_step if self._fr_average_passes else 1
        for p, w, made, flag in zip(b.params, b.wire, b.made, b.flags.tolist()):
            if flag <= 0:
                if self._fr_left(p) == "stand-in":
                    p.grad = None
            else:
                if p.grad is w:
                    pass
                elif made:
                    p.grad.copy_(w)
                else:
                    p.grad = w.to(p.dtype)   # (w itself where the type is the same)
                if k > 1:
                    p.grad.div_(k)
            self._fr_mark(p, False)
        b.work, b.wire, b.made, b.ready, b.pending = None, None, None, False, len(b.params)
        if b.flat is None:
            b.flags = None

    def _fr_pending(self):
        """Whether gradients were made since the last reduction (some may be reducing)."""
        return any(self._fr_passes.values())

    def synchronize(self):
        """Finish every gradient's allreduce (starting those whose gradients
        did not come, as zeros) and leave the averages in .grad; the next
        step() applies them without reducing again (collective: every rank
        calls it at the same point)."""
        self._fr_usable()
        for b in self._fr_buckets:
            b.ready = True
        self._fr_start_ready()
        for b in self._fr_buckets:
            self._fr_finish(b)
        for k in self._fr_passes:
            self._fr_passes[k] = 0
        self._fr_next = 0
        trainable = self._fr_trainable()
        if [id(p) for p in trainable] != self._fr_ids:
            # requires_grad changed, or a param group came: the parameters
            # that had no bucket are reduced now (those with gradients), and
            # the buckets made again for the next steps (as every rank does:
            # each changes its parameters as the others do)
            for b in _buckets([p for p in trainable if id(p) not in self._fr_bucket_of], self._fr_fusion):
                self._fr_start(b)
                self._fr_finish(b)
            self._fr_layout(trainable, False)
        self._fr_synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """A block in which step() applies the gradients as they are, as
        Horovod's: opt.synchronize(); clip them; with opt.skip_synchronize():
        opt.step(). (step() after synchronize() reduces nothing again anyway.)"""
        self._fr_skip = True
        try:
            yield
        finally:
            self._fr_skip = False

    def step(self, closure=None):
        """Reduce the gradients unless synchronize() did since the last
        step() or zero_grad(), then the optimizer's step; the gradients of
        each call of @p closure in it (LBFGS calls it several times) are
        reduced before the optimizer reads them."""
        self._fr_usable()
        if self._fr_skip:
            if self._fr_pending():   # (the optimizer would read gradients the library is writing)
                raise _fr.FastReduceError(18, "step() inside skip_synchronize() with gradients not reduced: call "
                                          "synchronize() before it")
        elif not self._fr_synchronized:
            self.synchronize()
        if closure is None:
            self._fr_synchronized = False
            return self._fr_base.step(self)

        def reduced():
            loss = closure()
            self.synchronize()
            return loss
        try:
            return self._fr_base.step(self, reduced)
        finally:
            self._fr_synchronized = False

    def zero_grad(self, set_to_none=True):
        """As the optimizer's, but a shared bucket's gradients stay its views,
        zeroed (as DDP's gradient_as_bucket_view keeps them)."""
        self._fr_usable()
        if self._fr_pending():
            raise _fr.FastReduceError(18, "zero_grad() while gradients' allreduces are pending: call step() or "
                                      "synchronize() first (with a GradScaler: synchronize() before "
                                      "scaler.unscale_() or scaler.step())")
        self._fr_synchronized = False
        self._fr_base.zero_grad(self, set_to_none)
        if not set_to_none:   # zeros in place: gradients, as the plain optimizer's (not ones reduced before)
            self._fr_old = {k: v for k, v in self._fr_old.items() if v[1]}
        for b in self._fr_buckets:
            if b.flat is not None and self._fr_wire is None:
                b.flat.zero_()
                for p in b.attach():
                    self._fr_mark(p, True)


def DistributedOptimizer(optimizer, named_parameters=None, comm=None, fusion_bytes=25 << 20,
                         compression=Compression.none, backward_passes_per_step=1, op=AVG,
                         average_aggregated_gradients=False, shared_buckets=True):
    """Wrap @p optimizer so that each gradient is averaged over the ranks as
    soon as backward has made it: gradients go into buckets of at most
    @p fusion_bytes (0: one a bucket; counted in the parameters' own type,
    before compression, as DDP's bucket_cap_mb), each reduced by a non-blocking grouped
    allreduce when all its gradients are ready, and step() waits for them
    (or applies what synchronize() reduced, without reducing again: clip or
    unscale in between; skip_synchronize() as Horovod's).
    With backward_passes_per_step=k, gradients accumulate over k backward
    passes before they are reduced (divided by k too with
    average_aggregated_gradients). With shared_buckets (the default) each
    bucket of CPU parameters is one buffer in memory the node's ranks share,
    reduced in place by one zero-copy allreduce; without compression the
    gradients are views of it (backward accumulates there, and zero_grad
    zeroes them in place rather than dropping them). A sparse gradient
    (nn.Embedding(sparse=True)) is reduced as a dense one, as Horovod's
    sparse_as_dense=True does: .grad is dense after step(), so an optimizer
    that takes sparse gradients only (SparseAdam) fails at its step(). The
    result is an
    instance of the optimizer's own class, with its param_groups and state.
    Wrapping parameters that a DistributedOptimizer has (a new optimizer
    for them, or this one wrapped again) closes that one: its step() and
    zero_grad() raise from then on."""
    # (a DistributedOptimizer wrapped again: a subclass of the same optimizer
    # class, so that its methods call that class's, never themselves)
    base = getattr(optimizer, "_fr_base", optimizer.__class__)
    methods = {k: v for k, v in vars(_DistributedOptimizer).items() if k not in ("__dict__", "__weakref__")}
    cls = type(base.__name__, (base,), dict(methods, _fr_base=base))
    opt = cls.__new__(cls)
    # the same param_groups, state, defaults and hooks (not the wrapper's own state)
    opt.__dict__.update({k: v for k, v in optimizer.__dict__.items() if not k.startswith("_fr_")})
    opt._fr_setup(named_parameters, comm, fusion_bytes, compression, backward_passes_per_step, op,
                  average_aggregated_gradients, shared_buckets)
    return opt
