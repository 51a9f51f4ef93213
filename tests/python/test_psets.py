"""Process sets: static (hvd.init(process_sets=...)), dynamic
(add_process_set/remove_process_set), their ranks, errors."""

import pytest
import torch


def test_static_sets(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    n = hvd.size()
    even, odd = hvd._test_sets[0], hvd._test_sets[1]
    assert even.ranks == list(range(0, n, 2))
    assert odd.ranks == list(range(1, n, 2))
    assert even.process_set_id and odd.process_set_id
    assert even.included() == (hvd.rank() % 2 == 0)
    mine = even if even.included() else odd
    assert mine.rank() == mine.ranks.index(hvd.rank())
    assert mine.size() == len(mine.ranks)
    other = odd if mine is even else even
    with pytest.raises(ValueError, match='not part'):
        other.rank()
    assert other.size() == len(other.ranks)
    assert hvd.global_process_set.ranks == list(range(n))
    assert 'ProcessSet(process_set_id=' in str(mine)


def test_non_member_submit_fails(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    even, odd = hvd._test_sets[0], hvd._test_sets[1]
    other = odd if even.included() else even
    with pytest.raises(hvd.HorovodInternalError, match='not a member'):
        hvd.allreduce(torch.ones(1), process_set=other)


def test_broadcast_root_outside_set(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    even, odd = hvd._test_sets[0], hvd._test_sets[1]
    mine = even if even.included() else odd
    outsider = (odd if mine is even else even).ranks[0]
    with pytest.raises(hvd.HorovodInternalError, match='root'):
        hvd.broadcast(torch.ones(1), root_rank=outsider, process_set=mine)


def test_unregistered_set(hvd):
    with pytest.raises(ValueError, match='registered'):
        hvd.allreduce(torch.ones(1), process_set=hvd.ProcessSet([0]))


def test_dynamic_sets(hvd):
    if hvd.size() < 3:
        pytest.skip('needs 3 ranks (every smaller set is already registered)')
    ps = hvd.add_process_set(hvd.ProcessSet([2, 1]))
    try:
        assert ps.ranks == [1, 2] and ps.process_set_id is not None
        out = None
        if ps.included():
            out = hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=ps,
                                name='psets.dyn')
            assert ps.rank() == hvd.rank() - 1
        with pytest.raises(ValueError, match='duplicate'):
            hvd.add_process_set([1, 2])
        if out is not None:
            assert out.tolist() == [2.0, 2.0]
    finally:
        assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None
    assert hvd.remove_process_set(ps) is False
    assert hvd.remove_process_set(hvd.global_process_set) is False


def test_dynamic_set_from_list(hvd):
    if hvd.size() < 3:
        pytest.skip('needs 3 ranks (every smaller set is already registered)')
    ps = hvd.add_process_set([2])
    try:
        assert isinstance(ps, hvd.ProcessSet) and ps.ranks == [2]
        if hvd.rank() == 2:
            assert ps.rank() == 0 and ps.size() == 1
            assert hvd.allreduce(torch.ones(1), process_set=ps,
                                 name='psets.two').item() == 1.0
    finally:
        hvd.remove_process_set(ps)


def test_process_set_from_bad_input(hvd):
    with pytest.raises(ValueError):
        hvd.ProcessSet(['a'])
    with pytest.raises(ValueError):
        hvd.ProcessSet(3)


def test_same_name_in_two_sets(hvd):
    # as in Horovod, each set has its own names: the even and the odd ranks
    # run the same code at the same time
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    even, odd = hvd._test_sets[0], hvd._test_sets[1]
    mine = even if even.included() else odd
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name='psets.same',
                        process_set=mine)
    assert out.tolist() == [float(mine.size())] * 2
