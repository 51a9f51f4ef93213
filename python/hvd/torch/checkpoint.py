"""hvd.torch.Checkpoint: libhvd's checkpointer for a torch training loop.

    ckpt = hvd.Checkpoint(model=model, optimizer=opt, sampler=sampler)
    start = ckpt.restore()                 # 0 on a fresh start
    for step in range(start, total):
        train_one_step(step)
        if ckpt.step(step + 1):            # every N steps, and on SIGTERM
            sys.exit(ckpt.EXIT_STATUS)     # 85: requeue me
    ckpt.close()

What is saved, and how (doc/python.md, "Checkpoints"):

- the model's and the optimizer's state_dict tensors, and tensors given as
  keyword arguments, are libhvd *replicated* buffers registered in place (no
  copy in Python: libhvd reads and writes their memory; rank 0 writes them
  once);
- the optimizer's other state (param_groups options such as the learning
  rate, non-tensor state) goes in the checkpoint's metadata blob;
- each rank's random number generators (torch, and when loaded, Python's
  random and numpy's) and the state_dict() of every other keyword argument
  (a sampler's position, an lr scheduler) are pickled into a *per-rank*
  buffer of ``state_bytes`` bytes;
- except objects whose state is global (an attribute ``hvd_global_state``
  true, as GlobalSampler's): the same on every rank, their state_dict()
  goes in the metadata, replicated.

A checkpoint restores on another number of ranks (a job requeued with
``sbatch -N 2-4``) when it has no per-rank buffer: make the Checkpoint with
``rng=False`` (seed from the epoch and rank instead) and a GlobalSampler,
whose position is the number of samples of the epoch all ranks took, so
that every sample of the epoch is seen once across the change.  With
per-rank state a restore on another size is an error saying so.

Everything is registered once, by address, when the Checkpoint is made: an
optimizer's state is created then (one step with zero gradients whose
effects are undone, the parameters restored and the state zeroed, so that
the first real step is the same as without a checkpoint), and the tensors
must not be replaced afterwards (``p.data = ...``).  Restoring with the
same steps, data order and seeds gives parameters bit-identical to an
uninterrupted run.
"""

import ctypes
import io
import os
import pickle
import re
import sys

import torch

from hvd import _lib

_NAME_OK = re.compile(r'[^A-Za-z0-9_.:/+\-]')


class Checkpoint:
    """Checkpoints of a torch training job (see the module documentation).

    model, optimizer: saved in place (their state_dict tensors).
    every: write every that many steps (default: --horovod=ckpt-every, i.e.
    HOROVOD_CHECKPOINT_EVERY; 0 writes only on SIGTERM/SIGUSR1).
    dir: the checkpoint directory (default HOROVOD_CHECKPOINT_DIR).
    keep: checkpoints kept (default HOROVOD_CHECKPOINT_KEEP, 3).
    async_write: write in the background (default HOROVOD_CHECKPOINT_ASYNC).
    rng: save and restore each rank's random generators (default True).
    state_bytes: room for each rank's pickled state (default 1 MiB).
    **state: tensors (replicated, in place) or objects with state_dict() and
    load_state_dict() (per rank).
    """

    EXIT_STATUS = _lib.CKPT_EXIT_STATUS

    def __init__(self, model=None, optimizer=None, every=None, dir=None,
                 keep=None, async_write=None, rng=True, state_bytes=1 << 20,
                 **state):
        self.model = model
        self.optimizer = optimizer
        self.rng = rng
        self._tensors = []   # (name, tensor) registered replicated
        self._objects = {}   # name -> object with state_dict(), per rank
        self._global = {}    # name -> object whose state is global
        self._closed = False
        for k, v in state.items():
            if torch.is_tensor(v):
                self._tensors.append(('state/' + k, v))
            elif (hasattr(v, 'state_dict') and hasattr(v, 'load_state_dict')
                  and getattr(v, 'hvd_global_state', False)):
                self._global[k] = v
            elif hasattr(v, 'state_dict') and hasattr(v, 'load_state_dict'):
                self._objects[k] = v
            else:
                raise TypeError(
                    'hvd.Checkpoint(%s=...): expected a tensor or an object '
                    'with state_dict() and load_state_dict(), got %s; keep '
                    'plain values in such an object (or in a tensor)'
                    % (k, type(v).__name__))
        if model is not None:
            for k, t in model.state_dict().items():
                self._tensors.append(('model/' + k, t))
        if optimizer is not None:
            _create_optimizer_state(optimizer)
            for pid, st in self._optimizer_tensors():
                self._tensors.append(('optim/%s/%s' % (pid, st[0]), st[1]))
        self._blob = torch.zeros(int(state_bytes) + 8, dtype=torch.uint8)

        cfg = _lib.CkptConfig()
        cfg.dir = os.fsencode(dir) if dir is not None else None
        cfg.every = int(every) if every else 0
        cfg.keep = int(keep) if keep else 0
        cfg.async_ = 1 if async_write else 0
        if async_write is None:
            cfg.async_ = 1 if os.environ.get('HOROVOD_CHECKPOINT_ASYNC',
                                              '').lower() in (
                                                  '1', 'true', 'yes',
                                                  'on') else 0
        handle = ctypes.c_void_p()
        _lib.check(_lib.hvd_ckpt_open(ctypes.byref(cfg), ctypes.byref(handle)),
                   'hvd.Checkpoint')
        self._h = handle
        try:
            used = set()
            for name, t in self._tensors:
                self._register(_unique(name, used), t, 0)
            # per-rank state only when there is some: without it the
            # checkpoint restores on any number of ranks
            self._per_rank = bool(self.rng or self._objects)
            if self._per_rank:
                self._register('rank/state', self._blob, 1)
        except BaseException:
            _lib.hvd_ckpt_close(self._h)
            self._h = None
            raise
        from hvd import _shutdown_hooks
        _shutdown_hooks.insert(0, self.close)

    # ------------------------------------------------------------ setup

    def _optimizer_tensors(self):
        """(param id, (state key, tensor)) of every state tensor, in the
        optimizer's order (the same on every rank)."""
        sd = self.optimizer.state_dict()
        out = []
        for group in sd['param_groups']:
            for pid in group['params']:
                for key, v in sd['state'].get(pid, {}).items():
                    if torch.is_tensor(v):
                        out.append((pid, (key, v)))
        return out

    def _register(self, name, t, kind):
        if not t.is_contiguous():
            raise ValueError('hvd.Checkpoint: %s is not contiguous; libhvd '
                             'saves tensors in place' % name)
        if t.is_cuda and not _lib.hvd_cuda_built:
            raise ValueError('hvd.Checkpoint: %s is on the GPU but libhvd '
                             'has no GPU path' % name)
        nbytes = t.numel() * t.element_size()
        ptr = t.data_ptr() if nbytes else self._blob.data_ptr()
        _lib.check(_lib.hvd_ckpt_register(self._h, name.encode(), ptr, nbytes,
                                          kind), 'hvd.Checkpoint')

    # -------------------------------------------------------- per step

    def _flat_params(self):
        return [p for g in self.optimizer.param_groups for p in g['params']]

    def _meta(self):
        meta = {'version': 1}
        if self._global:
            meta['global'] = {k: o.state_dict()
                              for k, o in self._global.items()}
        if self.optimizer is not None:
            state = self.optimizer.state
            meta['param_groups'] = [
                {k: v for k, v in g.items() if k != 'params'}
                for g in self.optimizer.param_groups]
            meta['scalars'] = {
                (i, k): v
                for i, p in enumerate(self._flat_params())
                for k, v in state.get(p, {}).items()
                if not torch.is_tensor(v)}
        return pickle.dumps(meta)

    def _fill_rank_state(self):
        st = {'objects': {k: o.state_dict() for k, o in self._objects.items()}}
        if self.rng:
            st['torch'] = torch.get_rng_state()
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                st['cuda'] = torch.cuda.get_rng_state_all()
            if 'random' in sys.modules:
                st['random'] = sys.modules['random'].getstate()
            if 'numpy' in sys.modules:
                st['numpy'] = sys.modules['numpy'].random.get_state()
        b = io.BytesIO()
        pickle.dump(st, b)
        data = b.getvalue()
        room = self._blob.numel() - 8
        if len(data) > room:
            raise ValueError(
                'hvd.Checkpoint: the per-rank state (%d bytes: RNG and %s) '
                'does not fit in state_bytes=%d; make the Checkpoint with a '
                'larger state_bytes' % (len(data), ', '.join(self._objects)
                                        or 'no objects', room))
        self._blob[:8] = torch.tensor(list(len(data).to_bytes(8, 'little')),
                                      dtype=torch.uint8)
        self._blob[8:8 + len(data)] = torch.frombuffer(bytearray(data),
                                                       dtype=torch.uint8)

    def _prepare(self):
        if self._h is None:
            raise ValueError('hvd.Checkpoint: closed')
        meta = self._meta()
        _lib.check(_lib.hvd_ckpt_set_meta(self._h, meta, len(meta)),
                   'hvd.Checkpoint')
        if self._per_rank:
            self._fill_rank_state()

    def step(self, step):
        """End of training step `step` (the number of steps done): writes a
        checkpoint when step is a multiple of `every` or a stop (SIGTERM,
        SIGUSR1) was requested on any rank.  Returns True when the program
        should exit now, with Checkpoint.EXIT_STATUS (85), so that the
        requeued job resumes.  Collective."""
        self._prepare()
        stop = ctypes.c_int(0)
        _lib.check(_lib.hvd_ckpt_step(self._h, int(step), ctypes.byref(stop)),
                   'hvd.Checkpoint.step')
        return bool(stop.value)

    def save(self, step):
        """Write a checkpoint now, whatever the step.  Collective."""
        self._prepare()
        _lib.check(_lib.hvd_ckpt_save(self._h, int(step)),
                   'hvd.Checkpoint.save')

    def wait(self):
        """Wait for a background write."""
        _lib.check(_lib.hvd_ckpt_wait(self._h), 'hvd.Checkpoint.wait')

    @staticmethod
    def stop_requested():
        """True once SIGTERM or SIGUSR1 arrived on this rank."""
        return bool(_lib.hvd_ckpt_stop_requested())

    # --------------------------------------------------------- restore

    def restore(self):
        """Load the newest checkpoint that verifies on every rank into the
        model, optimizer and state; returns its step (the step to resume
        from), 0 when there is none.  Collective."""
        if self._h is None:
            raise ValueError('hvd.Checkpoint: closed')
        step = ctypes.c_long(0)
        st = _lib.hvd_ckpt_restore(self._h, ctypes.byref(step))
        if st != _lib.OK:
            e = _lib.error(st, 'hvd.Checkpoint.restore')
            if self._per_rank and 'per-rank buffer "rank/state"' in str(e):
                e = type(e)(
                    '%s; hvd.Checkpoint: the per-rank state (%s) was saved '
                    'by another number of ranks; to resume on any number, '
                    'make the Checkpoint with rng=False and keep the '
                    'sampler position global (hvd.torch.GlobalSampler)'
                    % (e, ', '.join((['RNG'] if self.rng else []) +
                                    sorted(self._objects))))
                e.status = _lib.status_name(st)
                e.code = _lib.status_code(st)
            raise e
        if step.value == 0:
            return 0
        meta = self._get_meta()
        for k, o in self._global.items():
            if k in meta.get('global', {}):
                o.load_state_dict(meta['global'][k])
        if self.optimizer is not None and meta.get('param_groups'):
            for g, saved in zip(self.optimizer.param_groups,
                                meta['param_groups']):
                g.update(saved)
            params = self._flat_params()
            for (i, k), v in meta.get('scalars', {}).items():
                if i < len(params):
                    self.optimizer.state[params[i]][k] = v
        n = int.from_bytes(bytes(self._blob[:8].tolist()), 'little')
        if n and self._per_rank:
            st = pickle.loads(self._blob[8:8 + n].numpy().tobytes())
            for k, o in self._objects.items():
                if k in st['objects']:
                    o.load_state_dict(st['objects'][k])
            if self.rng:
                if 'torch' in st:
                    torch.set_rng_state(st['torch'])
                if 'cuda' in st and torch.cuda.is_available():
                    torch.cuda.set_rng_state_all(st['cuda'])
                if 'random' in st:
                    import random
                    random.setstate(st['random'])
                if 'numpy' in st and 'numpy' in sys.modules:
                    sys.modules['numpy'].random.set_state(st['numpy'])
        return step.value

    def _get_meta(self):
        buf = ctypes.create_string_buffer(1 << 20)
        n = ctypes.c_size_t(0)
        _lib.check(_lib.hvd_ckpt_get_meta(self._h, buf, len(buf),
                                          ctypes.byref(n)),
                   'hvd.Checkpoint.restore')
        if not n.value:
            return {}
        return pickle.loads(buf.raw[:n.value])

    # ----------------------------------------------------------- close

    def close(self):
        """Flush a background write and close.  Collective."""
        if self._h is None:
            return
        h, self._h = self._h, None
        from hvd import _shutdown_hooks
        if self.close in _shutdown_hooks:
            _shutdown_hooks.remove(self.close)
        _lib.check(_lib.hvd_ckpt_close(h), 'hvd.Checkpoint.close')

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _unique(name, used):
    n = _NAME_OK.sub('_', name)
    if len(n) > 128:
        n = n[:100] + '~%x' % (hash(name) & 0xffffffff)
    base, i = n, 1
    while n in used:
        i += 1
        n = '%s~%d' % (base[:120], i)
    used.add(n)
    return n


def _create_optimizer_state(optimizer):
    """Give every parameter its optimizer state now (libhvd registers
    buffers once, before the first restore): one step of the wrapped
    optimizer with zero gradients, after which the parameters, gradients
    and the state are put back as if no step had been taken."""
    params = [p for g in optimizer.param_groups for p in g['params']
              if p.requires_grad]
    if not params or all(p in optimizer.state and optimizer.state[p]
                         for p in params):
        return
    saved = [(p, p.detach().clone(), p.grad) for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
    with torch.no_grad():
        cls = type(optimizer)
        if getattr(cls, '__module__', '') == 'hvd.torch.optimizer' or \
                hasattr(optimizer, '_handles'):
            # a DistributedOptimizer: its step would allreduce
            super(cls, optimizer).step()
        else:
            optimizer.step()
        for p, data, grad in saved:
            p.copy_(data)
            p.grad = grad
        for st in optimizer.state.values():
            for v in st.values():
                if torch.is_tensor(v):
                    v.zero_()


class GlobalSampler(torch.utils.data.Sampler):
    """A distributed sampler whose position is global, so that it resumes
    on another number of ranks with every sample of the epoch seen once.

        sampler = hvd.GlobalSampler(len(dataset), batch_size=32, seed=0)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        ckpt = hvd.Checkpoint(model=model, optimizer=opt, rng=False,
                              sampler=sampler)
        ckpt.restore()
        while sampler.epoch < epochs:
            sampler.set_epoch(sampler.epoch)  # keeps a restored position
            it = iter(loader)
            for _ in range(sampler.steps_left()):
                batch = next(it, None)        # None: none for this rank
                train_step(batch)             # zero gradients when None
                sampler.record_step()
                ckpt.step(...)
            sampler.set_epoch(sampler.epoch + 1)

    The epoch's order is a permutation of range(n) drawn from seed + epoch
    (the same on every rank).  ``consumed`` counts the samples of the
    epoch all ranks took; each step the ranks take the next size *
    batch_size positions of the order, rank r those at consumed + r,
    consumed + r + size, ... (hvd_ckpt_sampler_batch in C, hvd(3)).  So
    the ranks' last batches of an epoch may be short, and a rank may have
    one batch fewer than the others: steps_left() is the number of steps
    every rank makes.  Call record_step() after each optimizer step; the
    Checkpoint saves epoch and consumed in its metadata (replicated).
    """

    hvd_global_state = True

    def __init__(self, n, batch_size, shuffle=True, seed=0):
        self.n = int(n)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.epoch = 0
        self.consumed = 0
        if self.n < 0 or self.batch_size < 1:
            raise ValueError('hvd.GlobalSampler: n must be >= 0 and '
                             'batch_size >= 1, got %d and %d'
                             % (self.n, self.batch_size))

    @staticmethod
    def _world(rank, size):
        import hvd as _hvd
        return (_hvd.rank() if rank is None else rank,
                _hvd.size() if size is None else size)

    def set_epoch(self, epoch):
        """Start epoch `epoch` (its position is kept when it is the epoch
        the sampler is in, e.g. after a restore)."""
        if int(epoch) != self.epoch:
            self.epoch = int(epoch)
            self.consumed = 0

    def order(self):
        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.n, generator=g).tolist()

    def positions(self, rank=None, size=None):
        """This rank's positions in the epoch's order, from consumed to the
        end of the epoch, in the order they are taken."""
        rank, size = self._world(rank, size)
        return list(range(self.consumed + rank, self.n, size))

    def steps_left(self, size=None):
        """Steps to the end of the epoch (the same on every rank)."""
        _, size = self._world(0, size)
        per_step = size * self.batch_size
        return (self.n - self.consumed + per_step - 1) // per_step

    def record_step(self, size=None):
        """One step done: every rank took its batch."""
        _, size = self._world(0, size)
        self.consumed = min(self.n, self.consumed + size * self.batch_size)

    def __iter__(self):
        order = self.order()
        return iter([order[p] for p in self.positions()])

    def __len__(self):
        return len(self.positions())

    def state_dict(self):
        return {'epoch': self.epoch, 'consumed': self.consumed,
                'n': self.n, 'seed': self.seed}

    def load_state_dict(self, st):
        if st.get('n', self.n) != self.n:
            raise ValueError('hvd.GlobalSampler: the checkpoint is of an '
                             'epoch of %d samples, this sampler has %d'
                             % (st['n'], self.n))
        self.epoch = int(st['epoch'])
        self.consumed = int(st['consumed'])
