"""broadcast_parameters, broadcast_optimizer_state, broadcast_object,
allgather_object."""

import pytest
import torch


def test_broadcast_parameters_state_dict(hvd):
    torch.manual_seed(hvd.rank())  # a different model on every rank
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    for (k, a), (_, b) in zip(m.state_dict().items(),
                              ref.state_dict().items()):
        assert torch.equal(a, b), k


def test_broadcast_parameters_named(hvd):
    torch.manual_seed(100 + hvd.rank())
    m = torch.nn.Linear(3, 2)
    root = hvd.size() - 1
    hvd.broadcast_parameters(list(m.named_parameters()), root_rank=root)
    torch.manual_seed(100 + root)
    ref = torch.nn.Linear(3, 2)
    assert torch.equal(m.weight, ref.weight)
    assert torch.equal(m.bias, ref.bias)
    with pytest.raises(ValueError, match='invalid params'):
        hvd.broadcast_parameters(m.weight, root_rank=0)


@pytest.mark.parametrize('kind', ['sgd', 'adam'])
def test_broadcast_optimizer_state(hvd, kind):
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    lr = 0.1 * (hvd.rank() + 1)
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9) \
        if kind == 'sgd' else torch.optim.Adam(m.parameters(), lr=lr)
    # give every rank a different state
    m(torch.full((1, 3), float(hvd.rank()))).sum().backward()
    opt.step()
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    state = opt.state_dict()
    everyone = hvd.allgather_object(state, name='opt.state.' + kind)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.1)
    for other in everyone:
        assert other['param_groups'][0]['lr'] == pytest.approx(0.1)
        for pid, st in other['state'].items():
            for k, v in st.items():
                mine = state['state'][pid][k]
                if torch.is_tensor(v):
                    assert torch.equal(v, mine), k
                else:
                    assert v == mine, k


def test_broadcast_optimizer_state_fresh(hvd):
    # a new optimizer: its state is created (one zero-gradient step) first
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(m.parameters(), lr=0.01 * (hvd.rank() + 1))
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.01)
    assert len(opt.state_dict()['state']) == 2


def test_broadcast_optimizer_state_fresh_distributed(hvd):
    # a new DistributedOptimizer: the zero-gradient step is the wrapped
    # optimizer's (its own step() would wait for allreduces never started)
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    opt = hvd.DistributedOptimizer(
        torch.optim.Adam(m.parameters(), lr=0.01 * (hvd.rank() + 1)),
        named_parameters=m.named_parameters())
    w = m.weight.detach().clone()
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.01)
    assert len(opt.state_dict()['state']) == 2
    assert torch.equal(m.weight.detach(), w)  # Adam, zero gradients
    # and it trains on: one step with gradients averaged over the ranks
    opt.zero_grad()
    m(torch.full((1, 3), float(hvd.rank() + 1))).sum().backward()
    opt.step()
    assert not torch.equal(m.weight.detach(), w)
    got = hvd.allgather(m.weight.detach().reshape(1, -1))
    assert all(torch.equal(got[0], got[i]) for i in range(hvd.size()))


def test_broadcast_optimizer_state_resume(hvd):
    # Horovod's resume: only the root loads a checkpoint (here: it took a
    # step), the others start fresh.  The zero-gradient step that creates
    # their state must not decay their weights, or they would train on
    # from weights of their own.
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.5, momentum=0.9,
                          weight_decay=0.1)
    if hvd.rank() == 0:
        m(torch.ones(1, 3)).sum().backward()
        opt.step()
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    w = hvd.allgather(m.weight.detach().reshape(1, -1), name='resume.w')
    b = hvd.allgather(m.bias.detach().reshape(1, -1), name='resume.b')
    for i in range(hvd.size()):
        assert torch.equal(w[0], w[i]) and torch.equal(b[0], b[i]), i
    buf = opt.state_dict()['state'][0]['momentum_buffer'].reshape(1, -1)
    bufs = hvd.allgather(buf, name='resume.buf')
    assert all(torch.equal(bufs[0], bufs[i]) for i in range(hvd.size()))


def test_broadcast_optimizer_state_fresh_decay(hvd):
    # AdamW decays on every step, zero gradients or not: the step that
    # creates a fresh optimizer's state leaves the weights alone
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    w = m.weight.detach().clone()
    opt = torch.optim.AdamW(m.parameters(), lr=0.1, weight_decay=0.5)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert len(opt.state_dict()['state']) == 2
    assert torch.equal(m.weight.detach(), w)


def test_broadcast_object(hvd):
    obj = {'rank': hvd.rank(), 'list': list(range(hvd.rank() + 3)),
           't': torch.arange(3) * hvd.rank()}
    root = hvd.size() - 1
    got = hvd.broadcast_object(obj, root_rank=root)
    small = hvd.broadcast_object(None, root_rank=0, name='none')
    assert got['rank'] == root and got['list'] == list(range(root + 3))
    assert torch.equal(got['t'], torch.arange(3) * root)
    assert small is None


def test_allgather_object(hvd):
    got = hvd.allgather_object({'r': hvd.rank(), 'pad': 'x' * hvd.rank()})
    assert got == [{'r': r, 'pad': 'x' * r} for r in range(hvd.size())]


def test_broadcast_object_process_set(hvd):
    if hvd.size() < 2:
        pytest.skip('needs 2 ranks')
    ps = hvd._test_sets[1]  # odd ranks
    if not ps.included():
        return
    got = hvd.broadcast_object('from %d' % hvd.rank(), root_rank=ps.ranks[0],
                               process_set=ps)
    assert got == 'from %d' % ps.ranks[0]
