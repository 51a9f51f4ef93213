"""An elastic PyTorch training script written for Horovod (its API only:
``import horovod.torch as hvd``, hvd.elastic.run, TorchState,
ElasticSampler, reset callbacks), for test_elastic.py.

A small MLP classifies a synthetic, deterministic data set (every rank
makes the same one).  Each step commits; every step also adds which
samples each rank used (an allreduce) to a replicated count per sample,
kept in the state, so that each epoch's end can say how many samples were
seen exactly once.

Output, one line each (stdout):
  start rank R size S pid P                every rank, after hvd.init()
  enter rank R size S hash H               every rank, each time train()
                                           starts (after each sync): H is
                                           a SHA-256 of the model's and the
                                           optimizer's state
  step N epoch E size S t=T                rank 0, every step
  reset rank R size S t=T                  every rank, in the reset callback
  epoch E size S once K of N extra X missed M
                                           rank 0, each epoch end: K samples
                                           seen once, X more than once (the
                                           last round's padding), M never
  done rank R size S steps N resets K acc A   every rank, at the end

Arguments: epochs (default 3).  Environment: ELASTIC_STEP_MS (sleep per
step, default 0); ELASTIC_GROW_TO=N: from step 10 on, while the world is
smaller than N, wait (committing, so that a newcomer can join) up to
ELASTIC_GROW_WAIT seconds (default 120, rank 0's clock): a test of growing
must not depend on the newcomer's Python and torch starting before the
training ends, which on a loaded machine they sometimes did not.
"""

import hashlib
import os
import sys
import time

import torch
import torch.nn.functional as F

import horovod.torch as hvd

EPOCHS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
STEP_S = int(os.environ.get('ELASTIC_STEP_MS', '0')) / 1000.0
GROW_TO = int(os.environ.get('ELASTIC_GROW_TO', '0'))
GROW_WAIT = float(os.environ.get('ELASTIC_GROW_WAIT', '120'))
NTRAIN, NTEST, DIM, CLASSES, BATCH = 1920, 960, 20, 4, 16
torch.set_num_threads(1)


def make_data():
    g = torch.Generator().manual_seed(1234)
    teacher = torch.randn(DIM, CLASSES, generator=g)
    x = torch.randn(NTRAIN + NTEST, DIM, generator=g)
    y = (x @ teacher + 0.1 * torch.randn(NTRAIN + NTEST, CLASSES,
                                         generator=g)).argmax(1)
    return x[:NTRAIN], y[:NTRAIN], x[NTRAIN:], y[NTRAIN:]


xtr, ytr, xte, yte = make_data()


class Indexed(torch.utils.data.Dataset):
    def __len__(self):
        return NTRAIN

    def __getitem__(self, i):
        return i, xtr[i], ytr[i]


hvd.init()
print('start rank %d size %d pid %d' % (hvd.rank(), hvd.size(), os.getpid()),
      flush=True)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(DIM, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, CLASSES))
LR = 0.05
optimizer = torch.optim.SGD(model.parameters(), lr=LR * hvd.size(),
                            momentum=0.9, weight_decay=1e-4)
optimizer = hvd.DistributedOptimizer(
    optimizer, named_parameters=model.named_parameters())

dataset = Indexed()
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=7)
loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH,
                                     sampler=sampler)
resets = 0
steps = 0


def state_hash():
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.detach().numpy().tobytes())
    for s in optimizer.state_dict()['state'].values():
        for t in s.values():
            if torch.is_tensor(t):
                h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


def on_reset():
    global resets
    resets += 1
    for group in optimizer.param_groups:
        group['lr'] = LR * hvd.size()
    print('reset rank %d size %d t=%.6f' % (hvd.rank(), hvd.size(),
                                           time.time()), flush=True)


def wait_for_newcomers(state):
    # rank 0's clock decides, for all (a broadcast), so that every rank
    # makes the same number of collective calls
    t0 = time.time()
    while hvd.size() < GROW_TO:
        more = torch.tensor([int(time.time() - t0 < GROW_WAIT)])
        if not int(hvd.broadcast(more, 0, name='grow.wait')):
            break
        time.sleep(0.05)
        state.check_host_updates()


@hvd.elastic.run
def train(state):
    global steps
    print('enter rank %d size %d hash %s' % (hvd.rank(), hvd.size(),
                                            state_hash()), flush=True)
    for state.epoch in range(state.epoch, EPOCHS):
        for state.batch, (idx, x, y) in enumerate(loader, state.batch):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            mine = torch.zeros(NTRAIN, dtype=torch.int32)
            mine[idx] = 1
            used = hvd.allreduce(mine, op=hvd.Sum, name='used')
            state.seen = state.seen + used
            steps += 1
            if hvd.rank() == 0:
                print('step %d epoch %d size %d t=%.6f'
                      % (steps, state.epoch, hvd.size(), time.time()),
                      flush=True)
            if STEP_S:
                time.sleep(STEP_S)
            state.sampler.record_batch(state.batch, BATCH)
            state.commit()
            if steps >= 10:
                wait_for_newcomers(state)
        if hvd.rank() == 0:
            print('epoch %d size %d once %d of %d extra %d missed %d'
                  % (state.epoch, hvd.size(), int((state.seen == 1).sum()),
                     NTRAIN, int((state.seen > 1).sum()),
                     int((state.seen == 0).sum())), flush=True)
        state.seen = torch.zeros(NTRAIN, dtype=torch.int32)
        state.batch = 0
        state.sampler.set_epoch(state.epoch + 1)
        state.commit()


state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0,
                               batch=0,
                               seen=torch.zeros(NTRAIN, dtype=torch.int32))
state.register_reset_callbacks([on_reset])
train(state)

with torch.no_grad():
    acc = (model(xte).argmax(1) == yte).float().mean().item()
print('done rank %d size %d steps %d resets %d acc %.4f'
      % (hvd.rank(), hvd.size(), steps, resets, acc), flush=True)
hvd.shutdown()
