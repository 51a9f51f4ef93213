"""Gradients of the differentiable operations (Horovod's definitions)."""

import torch


def test_allreduce_grad(hvd):
    n = hvd.size()
    x = torch.full((3,), float(hvd.rank() + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, name='grad.ar')
    (y * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    # d/dx of sum_k w . allreduce_sum(x) is allreduce_sum(w) = n w
    assert torch.allclose(x.grad, n * torch.tensor([1.0, 2.0, 3.0]))
    z = torch.ones(2, requires_grad=True)
    hvd.allreduce(z, name='grad.ar.avg').sum().backward()
    assert torch.allclose(z.grad, torch.ones(2))


def test_grouped_allreduce_grad(hvd):
    n = hvd.size()
    xs = [torch.ones(k + 1, requires_grad=True) for k in range(3)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum, name='grad.gar')
    sum(y.sum() * (k + 1) for k, y in enumerate(ys)).backward()
    for k, x in enumerate(xs):
        assert torch.allclose(x.grad, torch.full((k + 1,), float(n * (k + 1))))


def test_allgather_grad(hvd):
    r, n = hvd.rank(), hvd.size()
    x = torch.ones(r + 1, 2, requires_grad=True)
    y = hvd.allgather(x, name='grad.ag')
    w = torch.arange(y.shape[0], dtype=torch.float32).reshape(-1, 1)
    (y * w).sum().backward()
    # the gradient is the average over ranks of dL/dy, rows of this rank
    off = r * (r + 1) // 2
    e = torch.arange(off, off + r + 1, dtype=torch.float32).reshape(-1, 1) \
        .repeat(1, 2)
    assert torch.allclose(x.grad, e)
    del n


def test_grouped_allgather_grad(hvd):
    r = hvd.rank()
    xs = [torch.ones(r + 1, requires_grad=True),
          torch.ones(1, 3, requires_grad=True)]
    ys = hvd.grouped_allgather(xs, name='grad.gag')
    (ys[0].sum() * 2 + ys[1].sum() * 3).backward()
    assert torch.allclose(xs[0].grad, torch.full((r + 1,), 2.0))
    assert torch.allclose(xs[1].grad, torch.full((1, 3), 3.0))


def test_broadcast_grad(hvd):
    r = hvd.rank()
    x = torch.full((4,), float(r), requires_grad=True)
    y = hvd.broadcast(x, 0, name='grad.bc')
    (y * 2).sum().backward()
    e = torch.full((4,), 2.0) if r == 0 else torch.zeros(4)
    assert torch.allclose(x.grad, e)
    assert torch.allclose(y.detach(), torch.zeros(4))


def test_alltoall_grad(hvd):
    n = hvd.size()
    x = torch.ones(2 * n, 2, requires_grad=True)
    y = hvd.alltoall(x, name='grad.a2a')
    (y * 3).sum().backward()
    assert torch.allclose(x.grad, torch.full((2 * n, 2), 3.0))
    splits = [1] * n
    z = torch.ones(n, requires_grad=True)
    out, rs = hvd.alltoall(z, splits=splits, name='grad.a2a.splits')
    (out * 5).sum().backward()
    assert rs.tolist() == splits
    assert torch.allclose(z.grad, torch.full((n,), 5.0))


def test_reducescatter_grad(hvd):
    n = hvd.size()
    x = torch.ones(2 * n, 3, requires_grad=True)
    y = hvd.reducescatter(x, op=hvd.Sum, name='grad.rs')
    (y * 2).sum().backward()
    # Horovod: grad = allgather(grad_out * size) for Sum
    assert torch.allclose(x.grad, torch.full((2 * n, 3), 2.0 * n))
    x2 = torch.ones(2 * n, requires_grad=True)
    hvd.reducescatter(x2, name='grad.rs.avg').sum().backward()
    assert torch.allclose(x2.grad, torch.ones(2 * n))


def test_grouped_reducescatter_grad(hvd):
    n = hvd.size()
    xs = [torch.ones(n, requires_grad=True), torch.ones(2 * n, 2,
                                                         requires_grad=True)]
    ys = hvd.grouped_reducescatter(xs, op=hvd.Sum, name='grad.grs')
    (ys[0].sum() + ys[1].sum()).backward()
    assert torch.allclose(xs[0].grad, torch.full((n,), float(n)))
    assert torch.allclose(xs[1].grad, torch.full((2 * n, 2), float(n)))
