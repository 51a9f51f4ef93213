"""SyncBatchNorm: batch normalization with statistics over every process.

In training, each forward pass reduces the batch statistics of all
processes (per channel: the element count, sum and sum of squares, in
float64, with one allreduce), normalizes with the global mean and variance
and updates the running statistics with them; backward reduces the two
per-channel sums the input gradient needs.  The weight and bias gradients
stay local, as with Horovod: DistributedOptimizer averages them.

Horovod's SyncBatchNorm only takes GPU input (it calls torch's CUDA batch
norm kernels); this one computes with plain tensor operations, so CPU
input works as well (Debian's torch has no CUDA).
"""

import torch
import torch.nn.functional as F
from torch.autograd.function import Function
from torch.nn.modules.batchnorm import _BatchNorm

from hvd.torch.mpi_ops import Sum, allreduce, size


class SyncBatchNorm(_BatchNorm):
    """Batch normalization synchronized over all processes (see torch's
    BatchNorm2d for the arguments): useful when each process holds only a
    few examples."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine,
                         track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError('expected at least 2D input (got {}D input)'
                             .format(input.dim()))

    def _run_bn(self, input):
        return F.batch_norm(
            input, self.running_mean, self.running_var, self.weight,
            self.bias, self.training or not self.track_running_stats,
            self.momentum, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked = self.num_batches_tracked + 1
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        if not self.training and self.track_running_stats:
            return self._run_bn(input)
        if size() == 1:
            return self._run_bn(input)
        return _SyncBatchNorm.apply(
            input, self.weight, self.bias,
            self.running_mean if self.track_running_stats else None,
            self.running_var if self.track_running_stats else None,
            self.eps, factor)


def _bshape(t, ndim):
    return t.view((1, -1) + (1,) * (ndim - 2))


class _SyncBatchNorm(Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps,
                momentum):
        input = input.contiguous()
        c = input.size(1)
        dims = [0] + list(range(2, input.dim()))
        x64 = input.double()
        local = torch.empty(2 * c + 1, dtype=torch.float64)
        local[0] = input.numel() // c
        local[1:c + 1] = x64.sum(dims).cpu()
        local[c + 1:] = (x64 * x64).sum(dims).cpu()
        total = allreduce(local, op=Sum, name='sync_batch_norm.stats')
        count = total[0].item()
        mean64 = total[1:c + 1] / count
        var64 = (total[c + 1:] / count - mean64 * mean64).clamp_(min=0)
        if running_mean is not None:
            unbiased = var64 * (count / max(count - 1, 1))
            running_mean.mul_(1 - momentum).add_(
                momentum * mean64.to(running_mean))
            running_var.mul_(1 - momentum).add_(
                momentum * unbiased.to(running_var))
        invstd64 = 1.0 / torch.sqrt(var64 + eps)
        mean = mean64.to(device=input.device, dtype=input.dtype)
        invstd = invstd64.to(device=input.device, dtype=input.dtype)
        out = (input - _bshape(mean, input.dim())) * \
            _bshape(invstd, input.dim())
        if weight is not None:
            out = out * _bshape(weight, input.dim())
        if bias is not None:
            out = out + _bshape(bias, input.dim())
        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.count = count
        return out

    @staticmethod
    def backward(ctx, grad_output):
        grad_output = grad_output.contiguous()
        input, weight, mean, invstd = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[0:3]
        nd = input.dim()
        c = input.size(1)
        dims = [0] + list(range(2, nd))
        xmu = input - _bshape(mean, nd)
        sum_dy = grad_output.sum(dims)
        sum_dy_xmu = (grad_output * xmu).sum(dims)
        grad_weight = sum_dy_xmu * invstd if need_weight else None
        grad_bias = sum_dy if need_bias else None
        grad_input = None
        if need_input:
            sums = torch.cat([sum_dy, sum_dy_xmu]).double().cpu()
            sums = allreduce(sums, op=Sum, name='sync_batch_norm.grad')
            g_dy = (sums[:c] / ctx.count).to(grad_output)
            g_dy_xmu = (sums[c:] / ctx.count).to(grad_output)
            scale = invstd if weight is None else invstd * weight
            grad_input = (grad_output - _bshape(g_dy, nd) -
                          xmu * _bshape(invstd * invstd * g_dy_xmu, nd)) * \
                _bshape(scale, nd)
        return grad_input, grad_weight, grad_bias, None, None, None, None
