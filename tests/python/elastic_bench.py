"""The cost of TorchState.commit() per step, as a ratio to one allreduce
of the model's gradients, in the same run (doc/elastic.md has figures):

    hvdrun --elastic -np 2 /usr/bin/python3 tests/python/elastic_bench.py [N]

The model is an MLP of 25.2 M parameters (1024-4096-4096-1024-10) under
SGD with momentum (as much optimizer state again).  Each of N rounds
(default 10) times, one after the other: a DistributedOptimizer step's
gradient allreduce (every gradient submitted, then synchronize(), as
backward's hooks and step() do), and a commit() of TorchState(model,
optimizer, epoch, batch), then of what Horovod's commit does (a deep
copy of both state_dicts, allocated anew).  Rank 0 prints the medians and
their ratios to the allreduce.
"""

import copy
import statistics
import sys
import time

import torch

import horovod.torch as hvd

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
torch.set_num_threads(1)
hvd.init()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
    torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
    torch.nn.Linear(4096, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 10))
nparams = sum(p.numel() for p in model.parameters())
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
x = torch.randn(8, 1024)
y = torch.randint(0, 10, (8,))

# One real step: gradients and momentum buffers exist.
opt.zero_grad()
torch.nn.functional.cross_entropy(model(x), y).backward()
opt.step()
state = hvd.elastic.TorchState(model, opt, epoch=0, batch=0)

t_ar, t_commit, t_deep = [], [], []
for r in range(ROUNDS + 1):
    hvd.barrier()
    t0 = time.perf_counter()
    for p in model.parameters():
        opt._handles[p] = opt._allreduce_grad_async(p)
    opt.synchronize()
    t1 = time.perf_counter()
    state.batch = r
    hvd.barrier()
    t2 = time.perf_counter()
    state.commit()
    t3 = time.perf_counter()
    # Horovod's commit: a deep copy of both state_dicts, allocated anew
    hvd.barrier()
    t4 = time.perf_counter()
    copies = (copy.deepcopy(model.state_dict()),
              copy.deepcopy(opt.state_dict()))
    t5 = time.perf_counter()
    del copies
    if r:  # the first round warms up
        t_ar.append(t1 - t0)
        t_commit.append(t3 - t2)
        t_deep.append(t5 - t4)

ar = statistics.median(t_ar)
cm = statistics.median(t_commit)
dc = statistics.median(t_deep)
if hvd.rank() == 0:
    print('elastic-bench size %d params %d rounds %d allreduce %.4f s '
          'commit %.4f s ratio %.2f deepcopy %.4f s ratio %.2f'
          % (hvd.size(), nparams, ROUNDS, ar, cm, cm / ar, dc, dc / ar),
          flush=True)
hvd.shutdown()
