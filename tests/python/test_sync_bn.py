"""SyncBatchNorm against torch's BatchNorm over the whole (all ranks')
batch: output, running statistics, gradients."""

import torch


def batch(r, c=3):
    g = torch.Generator().manual_seed(r)
    return torch.randn(2 + r, c, 4, generator=g, dtype=torch.float64) * \
        (1 + r) + r


def test_sync_batch_norm(hvd):
    r, n = hvd.rank(), hvd.size()
    torch.manual_seed(0)
    bn = hvd.SyncBatchNorm(3, momentum=0.3).double()
    bn.weight.data = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    bn.bias.data = torch.tensor([0.0, -1.0, 3.0], dtype=torch.float64)
    x = batch(r).requires_grad_()
    y = bn(x)
    w = torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape)
    (y * w.sin()).sum().backward()

    ref = torch.nn.BatchNorm1d(3, momentum=0.3).double()
    ref.weight.data = bn.weight.data.clone()
    ref.bias.data = bn.bias.data.clone()
    xs = [batch(k).requires_grad_() for k in range(n)]
    ys = ref(torch.cat(xs))
    # the reference loss is the sum of every rank's loss
    off = 0
    loss = 0
    for k, xk in enumerate(xs):
        yk = ys[off:off + xk.shape[0]]
        wk = torch.arange(yk.numel(), dtype=torch.float64).reshape(yk.shape)
        loss = loss + (yk * wk.sin()).sum()
        off += xk.shape[0]
    loss.backward()
    off = sum(batch(k).shape[0] for k in range(r))
    assert torch.allclose(y, ys[off:off + x.shape[0]], atol=1e-10)
    assert torch.allclose(bn.running_mean, ref.running_mean, atol=1e-10)
    assert torch.allclose(bn.running_var, ref.running_var, atol=1e-10)
    assert torch.allclose(x.grad, xs[r].grad, atol=1e-10)
    # weight and bias gradients stay local: their sum over ranks is the
    # reference's
    gw = hvd.allreduce(bn.weight.grad, op=hvd.Sum, name='sbn.gw')
    gb = hvd.allreduce(bn.bias.grad, op=hvd.Sum, name='sbn.gb')
    assert torch.allclose(gw, ref.weight.grad, atol=1e-9)
    assert torch.allclose(gb, ref.bias.grad, atol=1e-9)
    assert int(bn.num_batches_tracked) == 1


def test_sync_batch_norm_eval(hvd):
    bn = hvd.SyncBatchNorm(2)
    bn.eval()
    x = torch.randn(3, 2)
    assert torch.allclose(bn(x), torch.nn.functional.batch_norm(
        x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False))
