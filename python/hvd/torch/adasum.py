"""Adasum (op=hvd.Adasum): the checks Horovod makes before it runs it.

The reduction itself is libhvd's (HVD_ADASUM, runtime/coll/coll_adasum.c):
Horovod's vector-halving, distance-doubling algorithm, which combines two
gradients a and b as

    a' = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

pairwise up a binary tree of a power-of-two number of ranks, each rank
computing a slice with the dot products and norms of the whole vectors;
every rank gets bit-identical results.  libhvd runs it on host tensors
(float16, bfloat16, float32, float64) and on any process set; each
tensor is reduced on its own (Adasum tensors are never fused).
"""

import torch

_TYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check(tensors, set_size):
    """Horovod's errors: a power-of-two number of ranks, floating-point
    types; libhvd's own: host memory."""
    if set_size & (set_size - 1):
        raise NotImplementedError('Running Adasum with non-power of 2 ranks '
                                  'is not supported yet.')
    for t in tensors:
        if t.dtype not in _TYPES:
            raise ValueError('Adasum reduction supports float16, bfloat16, '
                             'float32 and float64 tensors, not %s'
                             % t.type())
        if t.is_cuda:
            raise ValueError('Adasum on device tensors is not supported: '
                             'libhvd has Adasum for host tensors only; '
                             'move the tensor to the CPU')
