"""Programs for failures.sh and torch_distributed.sh (one mode each).

    fail_prog.py kill      rank 1 SIGKILLs itself inside a training loop;
                           the survivors must raise HorovodInternalError
                           (and every later operation too)
    fail_prog.py stall     ranks submit different names; with a stall
                           shutdown time set, every rank raises
    fail_prog.py ddp       torch.distributed env:// allreduce (no hvd)

Each prints one line per rank that the shell test reads.
"""

import os
import signal
import sys
import time

mode = sys.argv[1]

if mode == 'ddp':
    import torch
    import torch.distributed as dist
    dist.init_process_group('gloo', init_method='env://')
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    print('ddp rank %s port %s sum %g' % (os.environ['RANK'],
                                          os.environ['MASTER_PORT'],
                                          t.item()), flush=True)
    dist.destroy_process_group()
    sys.exit(0)

import torch  # noqa: E402

import hvd.torch as hvd  # noqa: E402

# hvdrun stops the other ranks (SIGTERM) when one dies: survivors stay to
# report what they saw.
signal.signal(signal.SIGTERM, signal.SIG_IGN)
hvd.init()
r = hvd.rank()

if mode == 'kill':
    model = torch.nn.Linear(100, 100)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(),
                                                   lr=0.01),
                                   named_parameters=model.named_parameters())
    t0 = None
    try:
        for step in range(100000):
            if step == 20 and r == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            if step == 20:
                t0 = time.time()
            opt.zero_grad()
            model(torch.randn(8, 100)).sum().backward()
            opt.step()
        print('rank %d: no error' % r, flush=True)
    except hvd.HorovodInternalError as e:
        dt = time.time() - (t0 or time.time())
        try:
            hvd.allreduce(torch.ones(1), name='after')
            later = 'a later allreduce worked'
        except hvd.HorovodInternalError:
            later = 'a later allreduce raised too'
        print('rank %d: HorovodInternalError %s after %.2f s (%s): %s'
              % (r, e.status, dt, later, str(e).splitlines()[0]),
              flush=True)
    os._exit(0)

if mode == 'stall':
    t0 = time.time()
    try:
        hvd.allreduce(torch.ones(2), name='stall.rank%d' % r)
        print('rank %d: no error' % r, flush=True)
    except hvd.HorovodInternalError as e:
        print('rank %d: HorovodInternalError %s after %.1f s: %s'
              % (r, e.status, time.time() - t0, str(e).splitlines()[0]),
              flush=True)
    os._exit(0)
