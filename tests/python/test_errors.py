"""Errors: raised on every rank with libhvd's message, never a hang; the
engine goes on after a mismatch."""

import pytest
import torch


def test_mismatched_count(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    x = torch.ones(3 + hvd.rank())
    # the binding passes shapes: the count's mismatch is told as theirs
    with pytest.raises(hvd.HorovodInternalError,
                       match=r'mismatched shape .*\[3\] on rank 0') as e:
        hvd.allreduce(x, name='err.count')
    assert e.value.status == 'HVD_ERR_MISMATCH'
    # the stable code, on the exception and at the start of the message
    assert e.value.code == 'HVD-3020'
    assert str(e.value).startswith('HVD-3020 ')
    assert 'err.count' in str(e.value)
    # the engine goes on
    assert hvd.allreduce(torch.ones(2), name='err.after').tolist() == [1, 1]


def test_mismatched_type(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    x = torch.ones(3, dtype=torch.float32 if hvd.rank() == 0
                   else torch.float64)
    with pytest.raises(hvd.HorovodInternalError, match='mismatched'):
        hvd.allreduce(x, name='err.type')


def test_mismatched_op(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    with pytest.raises(hvd.HorovodInternalError, match='mismatched'):
        hvd.allreduce(torch.ones(3), name='err.op', op=op)


def test_mismatched_allgather_shape(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    x = torch.ones(2, 3 if hvd.rank() == 0 else 4)
    with pytest.raises(hvd.HorovodInternalError, match='Mismatched allgather'):
        hvd.allgather(x, name='err.ag')
    y = torch.ones(2, 3, dtype=torch.int32 if hvd.rank() == 0
                   else torch.int64)
    with pytest.raises(hvd.HorovodInternalError, match='types'):
        hvd.allgather(y, name='err.ag.type')


@pytest.mark.parametrize('kind', ['allreduce', 'allreduce_async',
                                  'grouped_allreduce', 'broadcast',
                                  'reducescatter'])
def test_mismatched_shape(hvd, kind):
    """The same number of elements in another shape is Horovod's error on
    every rank, also once the name is in the response cache."""
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    n = hvd.size()
    name = 'err.shape.' + kind

    def run(shape):
        x = torch.ones(shape)
        if kind == 'allreduce':
            return hvd.allreduce(x, name=name, op=hvd.Sum)
        if kind == 'allreduce_async':
            return hvd.synchronize(hvd.allreduce_async(x, name=name,
                                                       op=hvd.Sum))
        if kind == 'grouped_allreduce':
            return hvd.grouped_allreduce([x], name=name, op=hvd.Sum)[0]
        if kind == 'broadcast':
            return hvd.broadcast(x, root_rank=0, name=name)
        return hvd.reducescatter(x, name=name, op=hvd.Sum)

    good = (2 * n, 3)
    for _ in range(2):  # the second time from the response cache
        assert run(good).shape[1] == 3
    bad = (3, 2 * n) if hvd.rank() == 1 else good
    with pytest.raises(hvd.HorovodInternalError,
                       match='mismatched shape') as e:
        run(bad)
    assert '[%d, 3]' % (2 * n) in str(e.value)
    assert '[3, %d] on rank 1' % (2 * n) in str(e.value)
    assert e.value.status == 'HVD_ERR_MISMATCH'
    # the engine goes on
    assert run(good).shape[1] == 3


def test_mismatched_broadcast_root(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    with pytest.raises(hvd.HorovodInternalError, match='mismatched root'):
        hvd.broadcast(torch.ones(2), root_rank=hvd.rank(), name='err.root')


def test_bad_arguments(hvd):
    with pytest.raises(ValueError, match='not supported'):
        hvd.allreduce(torch.ones(2, dtype=torch.int16))
    with pytest.raises(ValueError, match='not supported'):
        hvd.allreduce(torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match='contiguous'):
        hvd.allreduce_(torch.ones(4, 4)[:, 1])
    with pytest.raises(ValueError, match='op must be'):
        hvd.allreduce(torch.ones(2), op=17)
    with pytest.raises(hvd.HorovodInternalError, match='root'):
        hvd.broadcast(torch.ones(2), root_rank=hvd.size())
    with pytest.raises(ValueError, match='0-dim'):
        hvd.allgather(torch.tensor(1.0))


def test_error_is_runtime_error(hvd):
    assert issubclass(hvd.HorovodInternalError, RuntimeError)


@pytest.mark.parametrize('kind', ['allreduce', 'allgather', 'broadcast'])
def test_duplicate_name(hvd, kind):
    # A name still in flight is refused when submitted, with the ValueError
    # Horovod raises there (also a HorovodInternalError); the first
    # operation completes.  Rank 0 submits first: its operation cannot
    # complete before the others submit theirs, after the barrier.
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    x = torch.ones(4)
    if kind == 'allreduce':
        def submit():
            return hvd.allreduce_async(x, name='err.dup.ar', op=hvd.Sum)
    elif kind == 'allgather':
        def submit():
            return hvd.allgather_async(x, name='err.dup.ag')
    else:
        def submit():
            return hvd.broadcast_async(x, root_rank=0, name='err.dup.bc')
    if hvd.rank() == 0:
        h = submit()
        with pytest.raises(ValueError, match='already in flight') as e:
            submit()
        assert isinstance(e.value, hvd.HorovodInternalError)
        assert e.value.status == 'HVD_ERR_DUPLICATE_NAME'
        assert e.value.code == 'HVD-3010'
    hvd.barrier()
    if hvd.rank() != 0:
        h = submit()
    out = hvd.synchronize(h)
    want = hvd.size() if kind == 'allreduce' else 1
    assert out.shape[0] == (4 * hvd.size() if kind == 'allgather' else 4)
    assert out[0].item() == want
