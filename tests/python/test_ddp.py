"""torch.distributed with init_method="env://" and no torchrun: the
launcher (hvdrun, srun --horovod) sets RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT; DDP's gloo results agree with hvd's."""

import datetime
import os
import socket

import pytest
import torch


def test_env_vars(hvd):
    if 'MASTER_ADDR' not in os.environ:
        pytest.skip('the launcher sets no MASTER_ADDR (mpirun)')
    assert int(os.environ['RANK']) == hvd.rank()
    assert int(os.environ['WORLD_SIZE']) == hvd.size()
    assert int(os.environ['LOCAL_RANK']) == hvd.local_rank()
    assert int(os.environ['LOCAL_WORLD_SIZE']) == hvd.local_size()
    assert 0 < int(os.environ['MASTER_PORT']) < 65536


def test_init_process_group_env(hvd):
    if 'MASTER_ADDR' not in os.environ:
        pytest.skip('the launcher sets no MASTER_ADDR (mpirun)')
    addr = os.environ['MASTER_ADDR']
    try:
        socket.getaddrinfo(addr, None)
    except socket.gaierror:
        pytest.skip('MASTER_ADDR=%s does not resolve (the SPANK plugin must '
                    'give an address)' % addr)
    import torch.distributed as dist
    dist.init_process_group('gloo', init_method='env://',
                            timeout=datetime.timedelta(seconds=60))
    try:
        t = torch.full((4,), float(hvd.rank() + 1))
        dist.all_reduce(t)
        model = torch.nn.Linear(3, 2)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        torch.manual_seed(hvd.rank())
        ddp(torch.randn(5, 3)).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
    finally:
        dist.destroy_process_group()
    ours = hvd.allreduce(torch.full((4,), float(hvd.rank() + 1)), op=hvd.Sum,
                         name='ddp.check')
    assert torch.equal(t, ours)
    for g in grads:  # DDP averaged them: the same on every rank
        every = hvd.allgather(g.reshape(1, -1), name='ddp.g.%d' % g.numel())
        assert all(torch.allclose(every[0], row) for row in every)
