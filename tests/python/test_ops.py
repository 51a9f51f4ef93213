"""Every operation x type x in/out of place x process set, values checked."""

import time

import pytest
import torch

REDUCE_TYPES = [torch.uint8, torch.int8, torch.int32, torch.int64,
                torch.float16, torch.bfloat16, torch.float32, torch.float64]
MOVE_TYPES = REDUCE_TYPES + [torch.int16, torch.bool, torch.complex64]
SETS = ['global', 'even', 'odd']


def pset(hvd, which):
    """(process set, its world ranks) or a skip; the same on every rank."""
    if which == 'global':
        return hvd.global_process_set, list(range(hvd.size()))
    if hvd.size() < 2:
        pytest.skip('process sets need 2 ranks')
    ps = hvd._test_sets[0 if which == 'even' else 1]
    return ps, ps.ranks


def member_value(r, dtype, small=False):
    if dtype == torch.bool:
        return torch.tensor([r % 2 == 0, True, False, r % 2 == 1])
    if small:  # products of 3 ranks stay within int8
        return torch.tensor([1, 2, 1, 2], dtype=torch.float64).mul(
            r % 2 + 1).to(dtype)
    return torch.tensor([1, 2, 3, 4], dtype=torch.float64).mul(r + 1).to(dtype)


def expect_reduce(values, op, hvd, dtype):
    st = torch.stack([v.double() for v in values])
    if op == hvd.Sum:
        e = st.sum(0)
    elif op == hvd.Average:
        e = st.sum(0) / len(values)
    elif op == hvd.Min:
        e = st.min(0).values
    elif op == hvd.Max:
        e = st.max(0).values
    else:
        e = st.prod(0)
    if not dtype.is_floating_point:
        e = e.trunc()
    return e


@pytest.mark.parametrize('which', SETS)
@pytest.mark.parametrize('dtype', REDUCE_TYPES, ids=str)
@pytest.mark.parametrize('opname', ['Sum', 'Average', 'Min', 'Max',
                                    'Product'])
def test_allreduce(hvd, which, dtype, opname):
    ps, ranks = pset(hvd, which)
    op = getattr(hvd, opname)
    if hvd.rank() not in ranks:
        return
    r = hvd.rank()
    small = opname == 'Product'
    x = member_value(r, dtype, small).reshape(2, 2)
    orig = x.clone()
    name = 'ops.ar.%s.%s.%s' % (which, dtype, opname)
    out = hvd.allreduce(x, name=name, op=op, process_set=ps)
    y = x.clone()
    hvd.allreduce_(y, name=name + '.inplace', op=op, process_set=ps)
    h = hvd.allreduce_async(x, name=name + '.async', op=op, process_set=ps)
    z = x.clone()
    h2 = hvd.allreduce_async_(z, name=name + '.async_', op=op, process_set=ps)
    a = hvd.synchronize(h)
    hvd.synchronize(h2)
    e = expect_reduce([member_value(k, dtype, small) for k in ranks], op, hvd,
                      dtype).reshape(2, 2)
    tol = 0.05 if dtype in (torch.float16, torch.bfloat16) else 1e-9
    for got in (out, y, a, z):
        assert got.dtype == dtype and got.shape == (2, 2)
        assert torch.allclose(got.double(), e, rtol=tol, atol=tol), \
            (got, e)
    assert torch.equal(x, orig)  # out-of-place left the input alone


def test_allreduce_scale_factors(hvd):
    n = hvd.size()
    x = torch.full((5,), float(hvd.rank() + 1), dtype=torch.float64)
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0,
                        postscale_factor=0.5, name='ops.scale')
    avg = hvd.allreduce(x, op=hvd.Average, prescale_factor=3.0,
                        name='ops.scale.avg')
    s = n * (n + 1) / 2
    assert torch.allclose(out, torch.full((5,), s, dtype=torch.float64))
    assert torch.allclose(avg, torch.full((5,), 3.0 * s / n,
                                          dtype=torch.float64))


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_average_is_division(hvd, dtype):
    """An average is the sum divided by the size, rounded once, as torch's
    division and DDP's give it (a multiply by (float)(1/3) is an ulp off
    for some sums); through the one-tensor path, the fused one, and with
    a prescale (the engine then scales by 1/size itself)."""
    n, r = hvd.size(), hvd.rank()
    # exact sums, most of them not multiples of n
    x = torch.arange(4096, dtype=dtype) * 37 + (1 if r == 0 else 0)
    want = (torch.arange(4096, dtype=dtype) * 37 * n + 1) / n
    one = hvd.allreduce(x, op=hvd.Average, name='avgdiv.one.%s' % dtype)
    fused = hvd.grouped_allreduce([x, x[:100]], op=hvd.Average,
                                  name='avgdiv.fused.%s' % dtype)
    pre = hvd.allreduce(x, op=hvd.Average, prescale_factor=1.0,
                        postscale_factor=2.0, name='avgdiv.post.%s' % dtype)
    assert torch.equal(one, want)
    assert torch.equal(fused[0], want) and torch.equal(fused[1], want[:100])
    assert torch.allclose(pre, want * 2, rtol=1e-6)


def test_allreduce_average_compat(hvd):
    x = torch.ones(3)
    with pytest.warns(DeprecationWarning):
        s = hvd.allreduce(x, average=False, name='ops.compat.sum')
    with pytest.raises(ValueError):
        hvd.allreduce(x, average=True, op=hvd.Sum)
    assert s.tolist() == [float(hvd.size())] * 3


def test_allreduce_unnamed_and_empty(hvd):
    outs = [hvd.allreduce(torch.full((3,), float(i))) for i in range(3)]
    e = hvd.allreduce(torch.empty(0), name='ops.empty')
    assert [o.tolist() for o in outs] == [[float(i)] * 3 for i in range(3)]
    assert e.shape == (0,)


def test_allreduce_many_in_flight(hvd):
    xs = [torch.full((i + 1,), float(hvd.rank() + i)) for i in range(40)]
    hs = [hvd.allreduce_async_(x, name='ops.many.%d' % i, op=hvd.Sum)
          for i, x in enumerate(xs)]
    for h in reversed(hs):
        hvd.synchronize(h)
    n = hvd.size()
    for i, x in enumerate(xs):
        assert x.tolist() == [float(n * (n - 1) / 2 + n * i)] * (i + 1)


@pytest.mark.parametrize('which', SETS)
def test_grouped_allreduce(hvd, which):
    ps, ranks = pset(hvd, which)
    if hvd.rank() not in ranks:
        return
    r = hvd.rank()
    ts = [torch.full((k + 1, 2), float(r + k)) for k in range(4)] + \
        [torch.arange(3, dtype=torch.int64) * (r + 1)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name='ops.gar.' + which,
                                 process_set=ps)
    ins = [t.clone() for t in ts]
    h = hvd.grouped_allreduce_async_(ins, op=hvd.Average,
                                     name='ops.gar_.' + which, process_set=ps)
    res = hvd.synchronize(h)
    s = sum(k + 1 for k in ranks)
    for k in range(4):
        assert outs[k].tolist() == [[float(s - len(ranks) + len(ranks) * k)]
                                    * 2] * (k + 1)
        assert torch.allclose(ins[k], outs[k] / len(ranks))
    assert outs[4].tolist() == [0, s, 2 * s]
    assert res is ins or all(a is b for a, b in zip(res, ins))


@pytest.mark.parametrize('which', SETS)
@pytest.mark.parametrize('dtype', MOVE_TYPES, ids=str)
def test_allgather(hvd, which, dtype):
    ps, ranks = pset(hvd, which)
    if hvd.rank() not in ranks:
        return
    r = hvd.rank()

    def rows(k):  # rank k sends k+1 rows of 3
        v = torch.arange((k + 1) * 3).reshape(k + 1, 3) + 10 * k
        return v.to(dtype) if dtype != torch.bool else (v % 2 == 0)
    out = hvd.allgather(rows(r), name='ops.ag.%s.%s' % (which, dtype),
                        process_set=ps)
    h = hvd.allgather_async(rows(r)[:1], process_set=ps)
    one = hvd.synchronize(h)
    e = torch.cat([rows(k) for k in ranks])
    assert out.dtype == dtype and torch.equal(out, e)
    assert torch.equal(one, torch.cat([rows(k)[:1] for k in ranks]))


def test_allgather_shapes(hvd):
    r = hvd.rank()
    x = torch.full((r, 2, 3), float(r))  # rank 0 sends no rows
    out = hvd.allgather(x, name='ops.ag.shapes')
    n = hvd.size()
    assert out.shape == (n * (n - 1) // 2, 2, 3)
    grouped = hvd.grouped_allgather([torch.tensor([r]), torch.ones(1, 4) * r],
                                    name='ops.gag')
    assert grouped[0].tolist() == list(range(n))
    assert grouped[1].shape == (n, 4)
    assert grouped[1][:, 0].tolist() == [float(k) for k in range(n)]


@pytest.mark.parametrize('which', SETS)
@pytest.mark.parametrize('dtype', MOVE_TYPES, ids=str)
def test_broadcast(hvd, which, dtype):
    ps, ranks = pset(hvd, which)
    if hvd.rank() not in ranks:
        return
    r = hvd.rank()
    results = []
    for root in ranks:
        x = member_value(r, dtype).reshape(2, 2)
        orig = x.clone()
        out = hvd.broadcast(x, root, name='ops.bc.%s.%s.%d' % (which, dtype,
                                                               root),
                            process_set=ps)
        y = x.clone()
        hvd.broadcast_(y, root, process_set=ps)
        results.append((root, out, y, torch.equal(x, orig)))
    for root, out, y, untouched in results:
        e = member_value(root, dtype).reshape(2, 2)
        assert torch.equal(out, e) and torch.equal(y, e)
        assert untouched


@pytest.mark.parametrize('which', SETS)
@pytest.mark.parametrize('dtype', [torch.float32, torch.int64, torch.int16,
                                   torch.uint8], ids=str)
def test_alltoall(hvd, which, dtype):
    ps, ranks = pset(hvd, which)
    if hvd.rank() not in ranks:
        return
    n = len(ranks)
    me = ranks.index(hvd.rank())
    # even split: block j goes to member j
    x = (torch.arange(n * 2).reshape(n * 2, 1) + 100 * me).to(dtype)
    out = hvd.alltoall(x, name='ops.a2a.%s.%s' % (which, dtype),
                       process_set=ps)
    # uneven: member i sends i+j+1 rows to member j
    splits = [me + j + 1 for j in range(n)]
    y = (torch.arange(sum(splits)).reshape(-1, 1).repeat(1, 2) +
         100 * me).to(dtype)
    out2, rsplits = hvd.alltoall(y, splits=splits, process_set=ps)
    h = hvd.alltoall_async(y, splits=torch.tensor(splits, dtype=torch.int32),
                           process_set=ps)
    out3, rsplits3 = hvd.synchronize(h)
    e = torch.cat([(torch.arange(2 * me, 2 * me + 2).reshape(2, 1) +
                    100 * i).to(dtype) for i in range(n)])
    assert torch.equal(out, e)
    assert rsplits.tolist() == [i + me + 1 for i in range(n)]
    assert rsplits.dtype == torch.int32 and rsplits3.dtype == torch.int32
    parts = []
    for i in range(n):
        s_i = [i + j + 1 for j in range(n)]
        off = sum(s_i[:me])
        parts.append((torch.arange(off, off + s_i[me]).reshape(-1, 1)
                      .repeat(1, 2) + 100 * i).to(dtype))
    assert torch.equal(out2, torch.cat(parts))
    assert torch.equal(out3, out2)


def test_alltoall_errors(hvd):
    n = hvd.size()
    if n == 1:
        pytest.skip('needs 2 ranks')
    # Horovod's texts, and its ValueError (raised when submitted)
    with pytest.raises(ValueError, match='even multiple'):
        hvd.alltoall(torch.ones(n + 1))
    with pytest.raises(ValueError, match='equal number'):
        hvd.alltoall(torch.ones(4), splits=[1] * (n + 1))
    with pytest.raises(ValueError, match='greater than'):
        hvd.alltoall(torch.ones(2), splits=[2] * n)
    with pytest.raises(ValueError, match='32-bit integer'):
        hvd.alltoall(torch.ones(n), splits=torch.ones(n))


@pytest.mark.parametrize('which', SETS)
@pytest.mark.parametrize('rows', [0, 1, 6, 7])
def test_reducescatter(hvd, which, rows):
    ps, ranks = pset(hvd, which)
    if hvd.rank() not in ranks:
        return
    n = len(ranks)
    me = ranks.index(hvd.rank())
    r = hvd.rank()
    x = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2) * (r + 1)
    out = hvd.reducescatter(x, op=hvd.Sum, name='ops.rs.%s.%d' % (which, rows),
                            process_set=ps)
    avg = hvd.reducescatter(x, process_set=ps)
    g = hvd.grouped_reducescatter([x, x * 2], op=hvd.Sum, process_set=ps)
    s = sum(k + 1 for k in ranks)
    full = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2) * s
    mine = rows // n + (1 if me < rows % n else 0)
    off = sum(rows // n + (1 if k < rows % n else 0) for k in range(me))
    e = full[off:off + mine]
    assert out.shape == (mine, 2)
    assert torch.equal(out, e)
    assert torch.allclose(avg, e / n)
    assert torch.equal(g[0], e) and torch.equal(g[1], 2 * e)


def test_reducescatter_op_error(hvd):
    with pytest.raises(hvd.HorovodInternalError, match='AVERAGE and SUM'):
        hvd.reducescatter(torch.ones(4), op=hvd.Max)


def test_poll_synchronize(hvd):
    x = torch.ones(1000)
    h = hvd.allreduce_async(x, name='ops.poll', op=hvd.Sum)
    while not hvd.poll(h):
        pass
    assert hvd.synchronize(h)[0].item() == float(hvd.size())


def test_name_reuse_after_completion(hvd):
    for i in range(3):
        assert hvd.allreduce(torch.tensor([float(i)]),
                             name='ops.reuse').item() == float(i)


def test_barrier(hvd):
    for _ in range(3):
        hvd.barrier()
    if hvd.size() >= 2:
        ps = hvd._test_sets[0]
        if ps.included():
            hvd.barrier(process_set=ps)


def test_join(hvd):
    r, n = hvd.rank(), hvd.size()
    # rank k has k+1 batches; each batch averages a tensor of ones
    results = []
    for i in range(r + 1):
        results.append(hvd.allreduce(torch.ones(3), name='ops.join.%d' % i,
                                     op=hvd.Sum))
    last = hvd.join()
    assert last in range(n)
    for i, res in enumerate(results):
        # ranks that had joined contributed zeros
        assert res.tolist() == [float(n - i)] * 3


def test_join_unnamed(hvd):
    """Uneven data with unnamed ops: rank k makes k+1 of them, joins, and
    the unnamed ops after the join still pair up (their numbers would
    differ by rank otherwise, and each rank wait for the others)."""
    r, n = hvd.rank(), hvd.size()
    for i in range(r + 1):
        hvd.allreduce(torch.ones(2), op=hvd.Sum)
    hvd.join()
    for _ in range(2):
        h = hvd.allreduce_async(torch.full((2,), float(r)), op=hvd.Sum)
        deadline = time.monotonic() + 30
        while not hvd.poll(h) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert hvd.poll(h), 'an unnamed allreduce after join did not pair up'
        assert hvd.synchronize(h).tolist() == [float(n * (n - 1) // 2)] * 2
    hvd.join()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == float(n)
