"""hvd.elastic's API in a world that does not change (every launch of the
collective suites, without HOROVOD_ELASTIC): TorchState / ObjectState
commit, restore and sync, ElasticSampler's split from a global position,
the run loop, reset callbacks, and Horovod's import paths.  Failures and
joins are test_elastic.py's (elastic.sh)."""

import random

import pytest
import torch

from hvd import elastic
from hvd.exceptions import HorovodInternalError


def _model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(),
                               torch.nn.Linear(5, 2))


def _step(model, opt):
    opt.zero_grad()
    model(torch.ones(4, 6)).sum().backward()
    opt.step()


def _flat(model, opt):
    ts = [t.detach().clone().reshape(-1) for t in model.state_dict().values()]
    for s in opt.state_dict()['state'].values():
        ts.extend(t.clone().reshape(-1) for t in s.values()
                  if torch.is_tensor(t))
    return torch.cat(ts)


def test_imports_as_horovod(hvd):
    import horovod.torch as htorch
    from horovod.torch.elastic import ElasticSampler, TorchState, run
    from horovod.common.elastic import ObjectState, State, run_fn
    from horovod.common.exceptions import (HorovodInternalError as E1,
                                           HostsUpdatedInterrupt as E2)
    assert htorch.elastic.TorchState is TorchState
    assert callable(run) and callable(run_fn)
    assert htorch.elastic.ElasticSampler is ElasticSampler
    assert E1 is HorovodInternalError and issubclass(E2, RuntimeError)
    assert issubclass(TorchState, ObjectState) and \
        issubclass(ObjectState, State)


def test_commit_restore(hvd):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _step(model, opt)
    state = hvd.elastic.TorchState(model, opt, epoch=2, batch=5)
    state.commit()  # no HostsUpdatedInterrupt: nobody joins
    before = _flat(model, opt)
    _step(model, opt)
    state.epoch, state.batch = 3, 0
    assert not torch.equal(_flat(model, opt), before)
    state.restore()
    assert torch.equal(_flat(model, opt), before)
    assert (state.epoch, state.batch) == (2, 5)
    # the saved copy is a copy: steps after the commit do not reach it
    _step(model, opt)
    state.restore()
    assert torch.equal(_flat(model, opt), before)
    # assigning a new model to the state keeps it (and saves it)
    other = _model()
    state.model = other
    assert state.model is other


def test_sync_from_rank0(hvd):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                          weight_decay=0.01)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(hvd.rank())
    if hvd.rank() == 0:
        _step(model, opt)  # only rank 0 has momentum buffers
    state = hvd.elastic.TorchState(model, opt, epoch=hvd.rank(),
                                   tag='r%d' % hvd.rank())
    state.sync()
    mine = _flat(model, opt)
    every = hvd.allgather_object(mine)
    epochs = hvd.allgather_object((state.epoch, state.tag))
    assert all(torch.equal(t, every[0]) for t in every)
    assert epochs == [(0, 'r0')] * hvd.size()


def test_sampler_global_position(hvd):
    n, size = 97, hvd.size()
    data = list(range(n))
    s = hvd.elastic.ElasticSampler(data, shuffle=True, seed=5)
    mine = list(s)
    every = hvd.allgather_object(mine)
    assert len(s) == -(-n // size) and all(len(x) == len(s) for x in every)
    flat = [i for x in every for i in x]
    assert set(flat) == set(data)  # padding repeats, never skips
    assert len(flat) - n == (-n) % size
    # Two batches of 4 per rank done: the rest of the epoch, from the same
    # permutation, split over the ranks.
    first = [x[:8] for x in every]
    s.record_batch(0, 4)
    s.record_batch(1, 4)
    assert s.state_dict() == {'epoch': 0, 'processed_num': 8 * size}
    s2 = hvd.elastic.ElasticSampler(data, shuffle=True, seed=5)
    s2.load_state_dict(s.state_dict())
    rest = hvd.allgather_object(list(s2))
    done = {i for x in first for i in x}
    assert set(i for x in rest for i in x) == set(data) - done
    assert not done & set(i for x in rest for i in x[:len(x) - 1])
    # the order is Horovod's: random.Random(seed + epoch).shuffle
    order = list(range(n))
    random.Random(5).shuffle(order)
    assert hvd.elastic.ElasticSampler(data, seed=5).remaining_indices == order
    s.set_epoch(1)
    assert s.state_dict() == {'epoch': 1, 'processed_num': 0}
    assert len(list(s)) == len(s)


def test_run_without_elastic(hvd):
    calls = []
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank,
                                    x=hvd.rank())

    @hvd.elastic.run
    def train(st, k):
        calls.append(st.x)
        return k + 1

    assert train(state, 41) == 42
    assert calls == [0]  # synced from rank 0, run once

    @hvd.elastic.run
    def fails(st):
        raise HorovodInternalError('boom')

    # without elastic training there is no recovery: the error propagates
    with pytest.raises(HorovodInternalError):
        fails(state)


def test_reset_callbacks(hvd):
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, x=1)
    got = []
    state.register_reset_callbacks([lambda: got.append(1)])
    state.register_reset_callbacks([lambda: got.append(2)])
    state.on_reset()
    assert got == [1, 2]
    # no processes are waiting to join: commit returns
    state.x = 5
    state.commit()
    state.x = 6
    state.restore()
    assert state.x == 5
    assert elastic.elastic_enabled() is False and elastic.epoch() == 0


def test_commit_reuses_its_copy(hvd):
    # A commit writes into the previous commit's tensors (no new copy of
    # the state each step) and never into the live ones; a module's
    # metadata (BatchNorm's version) survives.
    model = torch.nn.Sequential(torch.nn.Linear(6, 4),
                                torch.nn.BatchNorm1d(4))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    _step(model, opt)
    state = hvd.elastic.TorchState(model, opt)
    saved = state._handlers['model']._saved
    ptrs = [t.data_ptr() for t in saved.values()]
    _step(model, opt)
    state.commit()
    again = state._handlers['model']._saved
    assert [t.data_ptr() for t in again.values()] == ptrs
    assert again._metadata == model.state_dict()._metadata
    live = {t.data_ptr() for t in model.state_dict().values()}
    assert not live & set(ptrs)
    before = _flat(model, opt)
    _step(model, opt)
    state.restore()
    assert torch.equal(_flat(model, opt), before)
    state.commit()
    _step(model, opt)
    state.restore()
    assert torch.equal(_flat(model, opt), before)


def test_run_loop(hvd, monkeypatch):
    # The loop's decisions, with the re-forming replaced by a counter (the
    # world does not change here; test_elastic.py has real failures).
    monkeypatch.setattr(elastic, 'elastic_enabled', lambda: True)
    log = []

    def reform():
        log.append('reset')
        if log.count('reset') == 2:  # a peer died during the re-forming
            e = HorovodInternalError('peer')
            e.status = 'HVD_ERR_PEER_FAILED'
            raise e

    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, x=0)
    state.register_reset_callbacks([lambda: log.append('callback')])
    calls = []

    def train(st):
        calls.append(st.x)
        st.x = len(calls) * 10
        if len(calls) == 1:
            raise HorovodInternalError('peer died')  # restore, re-form
        if len(calls) == 2:
            raise hvd.elastic.HostsUpdatedInterrupt()  # keep the state
        return 'done'

    assert elastic.run_fn(train, reform)(state) == 'done'
    # 1st: x=0; restored to 0; 2nd: x=0 again, set to 20 and kept; the
    # re-forming failed once (restore: back to the commit, 0) and ran again
    assert calls == [0, 0, 0]
    assert log == ['reset', 'callback', 'reset', 'reset', 'callback']

    def mismatch(st):
        calls.append('m')
        e = HorovodInternalError('mismatch')
        e.status = 'HVD_ERR_MISMATCH'
        raise e

    # the program's own error: no re-forming, it propagates
    del log[:]
    with pytest.raises(HorovodInternalError):
        elastic.run_fn(mismatch, reform)(state)
    assert log == [] and calls[-1] == 'm' and calls.count('m') == 1
