"""DistributedOptimizer: averaged gradients, hooks during backward,
backward_passes_per_step, groups, compression, sparse, misuse errors."""

import warnings

import pytest
import torch


def model_and_data(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(),
                                torch.nn.Linear(5, 3))
    return model


def local_batch(hvd, step=0):
    g = torch.Generator().manual_seed(1000 * step + hvd.rank())
    return torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,),
                                                         generator=g)


def all_batches(hvd, step=0):
    xs, ys = [], []
    for r in range(hvd.size()):
        g = torch.Generator().manual_seed(1000 * step + r)
        xs.append(torch.randn(8, 6, generator=g))
        ys.append(torch.randint(0, 3, (8,), generator=g))
    return xs, ys


def reference_grads(hvd, step=0):
    """The average over ranks of each rank's gradient, computed here."""
    xs, ys = all_batches(hvd, step)
    grads = None
    for x, y in zip(xs, ys):
        m = model_and_data()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        g = [p.grad.clone() for p in m.parameters()]
        grads = g if grads is None else [a + b for a, b in zip(grads, g)]
    return [g / hvd.size() for g in grads]


@pytest.mark.parametrize('compression', ['none', 'fp16'])
def test_average_gradients(hvd, compression):
    m = model_and_data()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    opt = hvd.DistributedOptimizer(
        opt, named_parameters=m.named_parameters(),
        compression=getattr(hvd.Compression, compression))
    assert isinstance(opt, torch.optim.SGD)
    assert type(opt).__name__ == 'SGD'
    x, y = local_batch(hvd)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.synchronize()
    got = [p.grad.clone() for p in m.parameters()]
    with opt.skip_synchronize():
        opt.step()
    ref = reference_grads(hvd)
    tol = 2e-3 if compression == 'fp16' else 1e-6
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, atol=tol, rtol=tol)


def test_hooks_start_during_backward(hvd):
    if hvd.size() == 1:
        pytest.skip('hooks are only registered with 2 or more ranks')
    m = model_and_data()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters())
    x, y = local_batch(hvd)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    # every gradient's allreduce was submitted by its hook, before step()
    started = [p for p, (h, _) in opt._handles.items() if h is not None]
    opt.step()
    assert len(started) == len(list(m.parameters()))


def test_training_matches_single_process(hvd):
    """Three SGD steps with momentum: parameters equal, on every rank, to
    those of one process stepping with the averaged gradients."""
    m = model_and_data()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
        named_parameters=m.named_parameters())
    ref = model_and_data()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        opt.zero_grad()
        x, y = local_batch(hvd, step)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        ref_opt.zero_grad()
        xs, ys = all_batches(hvd, step)
        loss = sum(torch.nn.functional.cross_entropy(ref(a), b)
                   for a, b in zip(xs, ys)) / hvd.size()
        loss.backward()
        ref_opt.step()
    for a, b in zip(m.parameters(), ref.parameters()):
        assert torch.allclose(a, b, atol=1e-5)


def test_backward_passes_per_step(hvd):
    m = model_and_data()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters(),
                                   backward_passes_per_step=2)
    for step in range(2):
        x, y = local_batch(hvd, step)
        torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.synchronize()
    got = [p.grad.clone() for p in m.parameters()]
    with opt.skip_synchronize():
        opt.step()
    ref = [a + b for a, b in zip(reference_grads(hvd, 0),
                                 reference_grads(hvd, 1))]
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, atol=1e-5)


def test_too_many_backward_passes(hvd):
    if hvd.size() == 1:
        pytest.skip('hooks are only registered with 2 or more ranks')
    m = model_and_data()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters())
    x, y = local_batch(hvd)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    with pytest.raises(AssertionError, match='backward_passes_per_step'):
        torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.synchronize()


@pytest.mark.parametrize('groups', ['int', 'list'])
def test_groups(hvd, groups):
    m = model_and_data()
    params = list(m.parameters())
    g = 2 if groups == 'int' else [[params[0], params[2]]]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters(),
                                   groups=g)
    x, y = local_batch(hvd)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.synchronize()
    got = [p.grad.clone() for p in m.parameters()]
    with opt.skip_synchronize():
        opt.step()
    for a, b in zip(got, reference_grads(hvd)):
        assert torch.allclose(a, b, atol=1e-6)


def test_sum_and_predivide(hvd):
    m = model_and_data()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters(),
                                   op=hvd.Sum)
    x, y = local_batch(hvd)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.synchronize()
    summed = [p.grad.clone() for p in m.parameters()]
    m2 = model_and_data()
    opt2 = hvd.DistributedOptimizer(torch.optim.SGD(m2.parameters(), lr=0.1),
                                    named_parameters=[
                                        ('pd.' + k, v)
                                        for k, v in m2.named_parameters()],
                                    gradient_predivide_factor=2.0)
    torch.nn.functional.cross_entropy(m2(x), y).backward()
    opt2.synchronize()
    avg = [p.grad.clone() for p in m2.parameters()]
    for s, a, r in zip(summed, avg, reference_grads(hvd)):
        assert torch.allclose(s, r * hvd.size(), atol=1e-5)
        assert torch.allclose(a, r, atol=1e-6)
    with pytest.raises(ValueError, match='op != Average'):
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 op=hvd.Sum, gradient_predivide_factor=2.0)


def test_sparse_gradients(hvd):
    for as_dense in (False, True):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(10, 3, sparse=True)
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(emb.parameters(), lr=1.0),
            named_parameters=[('emb.%s' % as_dense, emb.weight)],
            sparse_as_dense=as_dense)
        idx = torch.tensor([hvd.rank() % 10, (hvd.rank() + 1) % 10])
        emb(idx).sum().backward()
        before = emb.weight.detach().clone()
        opt.step()
        # every rank's rows got lr * (count of uses) / size subtracted
        counts = torch.zeros(10)
        for r in range(hvd.size()):
            counts[r % 10] += 1
            counts[(r + 1) % 10] += 1
        expect = before - (counts / hvd.size()).reshape(10, 1)
        assert torch.allclose(emb.weight.detach(), expect, atol=1e-6)


def test_misuse_errors(hvd):
    m = model_and_data()
    named = list(m.named_parameters())
    with pytest.raises(ValueError, match='must be unique'):
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 named_parameters=[named[0], named[0]] +
                                 named[1:])
    with pytest.raises(ValueError, match='were not named'):
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 named_parameters=named[1:])
    with pytest.raises(ValueError, match='sequence of tuples'):
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 named_parameters=[p for _, p in named])
    with pytest.raises(ValueError, match='backward_passes_per_step'):
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 backward_passes_per_step=0)
    if hvd.size() > 1:
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(m.parameters(), lr=0.1),
            named_parameters=[('mis.' + k, v) for k, v in named])
        x, y = local_batch(hvd)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        with pytest.raises(AssertionError, match='zero_grad'):
            opt.zero_grad()
        opt.synchronize()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            opt.step()  # after synchronize(), without skip_synchronize
        assert any('skip_synchronize' in str(x.message) for x in w)


def test_adasum_optimizer(hvd):
    n = hvd.size()
    if n & (n - 1):
        pytest.skip('Adasum needs a power-of-two number of ranks')
    m = model_and_data()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                   named_parameters=m.named_parameters(),
                                   op=hvd.Adasum)
    x, y = local_batch(hvd)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
    # every rank holds the same parameters afterwards
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    everyone = hvd.allgather(flat.reshape(1, -1))
    assert all(torch.equal(everyone[0], row) for row in everyone)
    if n == 1:
        return
    with pytest.raises(AssertionError, match='Skipping synchronization'):
        with opt.skip_synchronize():
            pass
