"""Adasum against a reference written from the algorithm's definition."""

import math
import sys

import numpy as np
import pytest
import torch


def ref_combine(a, b):
    dot = float(np.dot(a, b))
    na, nb = float(np.dot(a, a)), float(np.dot(b, b))
    tiny = math.sqrt(sys.float_info.min)
    ca = 1.0 - dot / na / 2 if na >= tiny else 1.0
    cb = 1.0 - dot / nb / 2 if nb >= tiny else 1.0
    return ca * a + cb * b


def ref_adasum(vectors):
    level = [np.asarray(v, dtype=np.float64) for v in vectors]
    while len(level) > 1:
        level = [ref_combine(level[i], level[i + 1])
                 for i in range(0, len(level), 2)]
    return level[0]


def power_of_two(hvd):
    n = hvd.size()
    if n & (n - 1):
        pytest.skip('Adasum needs a power-of-two number of ranks')


def vec(r, k=16):
    g = torch.Generator().manual_seed(r)
    return torch.randn(k, generator=g, dtype=torch.float64)


@pytest.mark.parametrize('dtype', [torch.float16, torch.float32,
                                   torch.float64], ids=str)
def test_adasum_allreduce(hvd, dtype):
    power_of_two(hvd)
    x = vec(hvd.rank()).to(dtype).reshape(4, 4)
    out = hvd.allreduce(x, op=hvd.Adasum, name='adasum.%s' % dtype)
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Adasum, name='adasum_.%s' % dtype)
    ref = ref_adasum([vec(r).to(dtype).double().numpy()
                      for r in range(hvd.size())])
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    assert out.dtype == dtype
    assert np.allclose(out.double().reshape(-1).numpy(), ref, rtol=tol,
                       atol=tol)
    assert torch.equal(out, y)
    every = hvd.allgather(out.reshape(1, -1))
    assert all(torch.equal(every[0], row) for row in every)


@pytest.mark.parametrize('count', [1, 2, 7, 1001, 40000])
def test_adasum_sizes(hvd, count):
    """Odd lengths split unevenly at every halving; 40000 floats cross the
    transport's segment sizes."""
    power_of_two(hvd)
    x = vec(hvd.rank(), count).float()
    out = hvd.allreduce(x, op=hvd.Adasum, name='adasum.n%d' % count)
    ref = ref_adasum([vec(r, count).float().double().numpy()
                      for r in range(hvd.size())])
    every = hvd.allgather(out.reshape(1, -1), name='adasum.n%d.g' % count)
    assert np.allclose(out.double().numpy(), ref, rtol=1e-5, atol=1e-5)
    assert all(torch.equal(every[0], row) for row in every)


def test_adasum_scale_factors(hvd):
    power_of_two(hvd)
    x = vec(hvd.rank(), 9)
    out = hvd.allreduce(x, op=hvd.Adasum, prescale_factor=2.0,
                        postscale_factor=0.25, name='adasum.scale')
    ref = ref_adasum([2.0 * vec(r, 9).numpy() for r in range(hvd.size())])
    assert np.allclose(out.numpy(), 0.25 * ref, atol=1e-9)


def test_adasum_identical_and_orthogonal(hvd):
    power_of_two(hvd)
    # identical gradients: Adasum gives the gradient itself (not the sum)
    x = torch.tensor([1.0, 2.0, -3.0])
    same = hvd.allreduce(x, op=hvd.Adasum, name='adasum.same')
    # orthogonal gradients: Adasum gives their sum
    e = torch.zeros(hvd.size() * 2)
    e[hvd.rank() * 2] = 1.0 + hvd.rank()
    orth = hvd.allreduce(e, op=hvd.Adasum, name='adasum.orth')
    assert torch.allclose(same, x)
    assert torch.allclose(orth, torch.tensor(
        [(1.0 + i // 2) if i % 2 == 0 else 0.0
         for i in range(hvd.size() * 2)]))


def test_adasum_grouped_and_zero(hvd):
    power_of_two(hvd)
    ts = [vec(hvd.rank(), 5).float(), torch.zeros(3)]
    out = hvd.grouped_allreduce(ts, op=hvd.Adasum, name='adasum.group')
    ref = ref_adasum([vec(r, 5).float().double().numpy()
                      for r in range(hvd.size())])
    assert np.allclose(out[0].double().numpy(), ref, atol=1e-5)
    assert torch.equal(out[1], torch.zeros(3))


def test_adasum_errors(hvd):
    n = hvd.size()
    if n & (n - 1):
        with pytest.raises(NotImplementedError, match='power of 2'):
            hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    else:
        with pytest.raises(ValueError, match='float16, bfloat16'):
            hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum)
