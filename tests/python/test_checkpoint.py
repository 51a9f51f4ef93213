"""hvd.torch.Checkpoint: what it saves and restores, its errors (the
kill/restart and SIGTERM runs are in checkpoint.sh)."""

import os
import random

import pytest
import torch


class Counter:
    def __init__(self):
        self.n = 0

    def state_dict(self):
        return {'n': self.n}

    def load_state_dict(self, st):
        self.n = st['n']


def ckpt_dir(hvd, name):
    d = os.path.join(os.environ['HVD_TEST_RESULTS'], 'ckpt.' + name)
    return d


def make(hvd, name, **kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    opt = hvd.DistributedOptimizer(
        torch.optim.Adam(model.parameters(), lr=0.01),
        named_parameters=[(name + k, v) for k, v in model.named_parameters()])
    counter = Counter()
    extra = torch.zeros(5)
    ck = hvd.Checkpoint(model=model, optimizer=opt, dir=ckpt_dir(hvd, name),
                        counter=counter, extra=extra, **kw)
    return ck, model, opt, counter, extra


def train(model, opt, counter, extra, hvd, steps):
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(6, 3)).pow(2).mean().backward()
        opt.step()
        counter.n += 1 + hvd.rank()
        extra += 1


def test_save_and_restore(hvd):
    ck, model, opt, counter, extra = make(hvd, 'a')
    assert ck.restore() == 0
    # the optimizer's state exists, zeroed: a first step as without it
    assert all(float(v.abs().sum()) == 0 for st in opt.state.values()
               for v in st.values() if torch.is_tensor(v))
    torch.manual_seed(1 + hvd.rank())
    train(model, opt, counter, extra, hvd, 3)
    opt.param_groups[0]['lr'] = 0.005
    ck.save(3)
    # replicated: rank 0's values come back on every rank (BatchNorm's
    # running statistics differ between ranks)
    want = {k: hvd.broadcast(v.clone(), 0, name='ck.want.' + k)
            for k, v in model.state_dict().items()}
    want_opt = [v.clone() for st in opt.state.values() for v in st.values()
                if torch.is_tensor(v)]
    rng = torch.get_rng_state()
    pyrng = random.random()
    train(model, opt, counter, extra, hvd, 2)
    ck.close()

    ck2, model2, opt2, counter2, extra2 = make(hvd, 'a')
    step = ck2.restore()
    got_rng = torch.get_rng_state()
    got_py = random.random()
    ck2.close()
    assert step == 3
    for k, v in model2.state_dict().items():
        assert torch.equal(v, want[k]), k
    got_opt = [v for st in opt2.state.values() for v in st.values()
               if torch.is_tensor(v)]
    assert all(torch.equal(a, b) for a, b in zip(got_opt, want_opt))
    assert opt2.param_groups[0]['lr'] == 0.005
    assert counter2.n == 3 * (1 + hvd.rank())  # per rank
    assert torch.equal(extra2, torch.full((5,), 3.0))
    assert torch.equal(got_rng, rng)
    del pyrng, got_py


def test_step_every(hvd):
    ck, model, opt, counter, extra = make(hvd, 'b', every=2)
    ck.restore()
    stops = [ck.step(s) for s in range(1, 6)]
    ck.close()
    ck2 = make(hvd, 'b', every=2)[0]
    step = ck2.restore()
    ck2.close()
    assert stops == [False] * 5
    assert step == 4
    assert hvd.Checkpoint.EXIT_STATUS == 85
    assert hvd.Checkpoint.stop_requested() is False


def test_errors(hvd):
    with pytest.raises(TypeError, match='state_dict'):
        hvd.Checkpoint(dir=ckpt_dir(hvd, 'c'), epoch=3)
    ck = hvd.Checkpoint(dir=ckpt_dir(hvd, 'd'), state_bytes=16,
                        counter=Counter())
    try:
        with pytest.raises(ValueError, match='state_bytes'):
            ck.step(1)
    finally:
        ck.close()
    with pytest.raises(hvd.HorovodInternalError, match='HOROVOD_CHECKPOINT_DIR'):
        saved = os.environ.pop('HOROVOD_CHECKPOINT_DIR', None)
        try:
            hvd.Checkpoint(counter=Counter())
        finally:
            if saved is not None:
                os.environ['HOROVOD_CHECKPOINT_DIR'] = saved


def test_global_sampler_positions(hvd):
    """The sampler's arithmetic over 4 -> 3 -> 2 ranks (every rank
    simulated here): every sample of the epoch taken once, the same
    positions as libhvd's hvd_ckpt_sampler_batch."""
    import ctypes
    from hvd import _lib
    for n, batch in ((101, 4), (7, 3), (64, 8), (1, 5)):
        s = hvd.GlobalSampler(n, batch, seed=3)
        s.set_epoch(2)
        order = s.order()
        assert sorted(order) == list(range(n))
        seen = []
        for size, steps in ((4, 2), (3, 3), (2, None)):
            left = s.steps_left(size=size)
            for _ in range(left if steps is None else min(steps, left)):
                for r in range(size):
                    mine = s.positions(rank=r, size=size)[:batch]
                    pos = (ctypes.c_uint64 * batch)()
                    k = _lib.hvd_ckpt_sampler_batch(n, s.consumed, r, size,
                                                    batch, pos)
                    assert mine == list(pos[:k])
                    seen += [order[p] for p in mine]
                want = _lib.hvd_ckpt_sampler_advance(n, s.consumed, size,
                                                     batch)
                s.record_step(size=size)
                assert s.consumed == want
            # a checkpoint here: the state is global
            st = s.state_dict()
            s = hvd.GlobalSampler(n, batch, seed=3)
            s.load_state_dict(st)
            s.set_epoch(2)  # the restored epoch: its position is kept
        assert s.consumed == n and s.steps_left(size=2) == 0
        assert sorted(seen) == list(range(n)), (n, batch)
    s.set_epoch(3)
    assert s.consumed == 0
    with pytest.raises(ValueError, match='epoch of 1 samples'):
        hvd.GlobalSampler(5, 1).load_state_dict(st)


def test_global_sampler_checkpoint(hvd):
    """rng=False and a GlobalSampler: no per-rank buffer (the checkpoint
    restores on any number of ranks), the position in the metadata."""
    d = ckpt_dir(hvd, 'g')
    w = torch.zeros(4)
    s = hvd.GlobalSampler(50, 2)
    ck = hvd.Checkpoint(dir=d, rng=False, sampler=s, w=w)
    assert ck.restore() == 0
    s.set_epoch(1)
    for _ in range(3):
        s.record_step()
        w += 1
    ck.save(3)
    ck.close()
    s2 = hvd.GlobalSampler(50, 2)
    w2 = torch.zeros(4)
    ck2 = hvd.Checkpoint(dir=d, rng=False, sampler=s2, w=w2)
    step = ck2.restore()
    ck2.close()
    files = sorted(os.listdir(os.path.join(d, 'step-00000003')))
    assert step == 3
    assert (s2.epoch, s2.consumed) == (1, 3 * 2 * hvd.size())
    assert torch.equal(w2, torch.full((4,), 3.0))
    assert not [f for f in files if f.startswith('rank-')], files
