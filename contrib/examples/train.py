#!/usr/bin/env python3
"""train.py - data-parallel PyTorch training with hvd.torch and checkpoints.

A small CNN on the 8x8 handwritten digits (data/digits.csv.gz, 1797
samples, the set the C example uses): the first 1500 samples train, split
evenly between the ranks, the last 297 test.  The script is a Horovod
PyTorch script - ``import horovod.torch as hvd`` works the same - plus
hvd.torch.Checkpoint:

- DistributedOptimizer averages the gradients, each allreduce starting
  while backward still runs; the learning rate is scaled by the number of
  ranks; the initial model and optimizer state are broadcast from rank 0;
- --fp16-allreduce: gradients travel as float16 (Compression.fp16);
- the model, the optimizer, each rank's sampler position and random
  generators are checkpointed every --ckpt-every steps (default: the
  --horovod=ckpt-every setting) and when SIGTERM or SIGUSR1 announces the
  end of the allocation; the script then exits with status 85, and a
  requeued job resumes where it stopped.  A run killed at any step and
  restarted ends with weights bit-identical to an uninterrupted run (the
  "weights checksum" line).

    srun --horovod=ckpt-every=100,ckpt-dir=/var/tmp/ck -N2 -n4 python3 train.py
    hvdrun -np 2 python3 train.py --ckpt-dir /var/tmp/ck --steps 300

Exit status: 0 done, 85 stopped after a checkpoint (requeue me), 1 error.
"""

import argparse
import gzip
import hashlib
import os
import signal
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import hvd.torch as hvd
except ImportError:  # an unchanged Horovod script would say this:
    import horovod.torch as hvd

HERE = os.path.dirname(os.path.abspath(__file__))
NTRAIN = 1500


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--steps', type=int, default=400)
    p.add_argument('--batch', type=int, default=32, help='per rank')
    p.add_argument('--lr', type=float, default=0.01,
                   help='learning rate for one rank (scaled by the size)')
    p.add_argument('--seed', type=int, default=42)
    p.add_argument('--data', default=os.path.join(HERE, 'data',
                                                  'digits.csv.gz'))
    p.add_argument('--fp16-allreduce', action='store_true',
                   help='gradients travel as float16')
    p.add_argument('--ckpt-dir', default=None,
                   help='checkpoint directory (default: '
                   'HOROVOD_CHECKPOINT_DIR, from --horovod=ckpt-dir)')
    p.add_argument('--ckpt-every', type=int, default=None,
                   help='steps between checkpoints (default: '
                   'HOROVOD_CHECKPOINT_EVERY, from --horovod=ckpt-every)')
    p.add_argument('--no-ckpt', action='store_true',
                   help='no checkpoints at all')
    p.add_argument('--print-every', type=int, default=50)
    p.add_argument('--crash-at', type=int, default=-1,
                   help='tests: SIGKILL this process after that step')
    p.add_argument('--sleep-ms', type=float, default=0,
                   help='tests: slow each step down')
    return p.parse_args()


def load_digits(path):
    try:
        with gzip.open(path, 'rt') as f:
            rows = [[int(v) for v in line.split(',')] for line in f if line]
    except OSError as e:
        sys.exit('train.py: cannot read the data set %s: %s (give --data '
                 'PATH to contrib/examples/data/digits.csv.gz)' % (path, e))
    data = torch.tensor(rows, dtype=torch.float32)
    if data.shape != (1797, 65):
        sys.exit('train.py: %s: %s values, expected 1797 x 65'
                 % (path, tuple(data.shape)))
    x = (data[:, :64] / 16.0).reshape(-1, 1, 8, 8)
    return x, data[:, 64].long()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.drop(torch.flatten(x, 1))
        return self.fc2(F.relu(self.fc1(x)))


class ShardSampler:
    """This rank's shard of the training set, reshuffled every epoch; its
    position is checkpointed (state_dict), so a resumed run reads the same
    batches in the same order."""

    def __init__(self, n, rank, size, batch, seed):
        self.idx = torch.arange(rank, n - n % size, size)
        self.batch, self.seed = batch, seed
        self.epoch, self.pos = 0, 0
        self._shuffle()

    def _shuffle(self):
        g = torch.Generator().manual_seed(self.seed + 1000 * self.epoch)
        self.order = self.idx[torch.randperm(len(self.idx), generator=g)]

    def next_batch(self):
        if self.pos + self.batch > len(self.order):
            self.epoch, self.pos = self.epoch + 1, 0
            self._shuffle()
        b = self.order[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return b

    def state_dict(self):
        return {'epoch': self.epoch, 'pos': self.pos}

    def load_state_dict(self, st):
        self.epoch, self.pos = st['epoch'], st['pos']
        self._shuffle()


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def checksum(model):
    h = hashlib.sha256()
    for k, t in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    args = parse_args()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # one thread per rank (ranks share the node)
    x, y = load_digits(args.data)
    xtest, ytest = x[NTRAIN:], y[NTRAIN:]

    model = Net()
    # The learning rate grows with the number of ranks (the batch does).
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=0.9)
    compression = hvd.Compression.fp16 if args.fp16_allreduce \
        else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=compression)
    # Every rank starts from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    sampler = ShardSampler(NTRAIN, hvd.rank(), hvd.size(), args.batch,
                           args.seed + hvd.rank())
    ckpt = None
    if not args.no_ckpt:
        ckpt = hvd.Checkpoint(model=model, optimizer=optimizer,
                              every=args.ckpt_every, dir=args.ckpt_dir,
                              sampler=sampler)
    start = ckpt.restore() if ckpt else 0
    acc0 = accuracy(model, xtest, ytest)
    if hvd.rank() == 0:
        print('train.py: %d ranks, %d training samples each, batch %d, %d '
              'steps%s, test accuracy %.3f%s'
              % (hvd.size(), len(sampler.idx), args.batch, args.steps,
                 ', fp16 allreduce' if args.fp16_allreduce else '', acc0,
                 ', resuming at step %d' % start if start else ''),
              flush=True)
    loss0 = None
    t0 = time.process_time()
    stopped = False
    loss = torch.tensor(0.0)
    for step in range(start, args.steps):
        b = sampler.next_batch()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[b]), y[b])
        loss.backward()
        optimizer.step()
        if loss0 is None:
            loss0 = hvd.allreduce(loss.detach(), name='loss').item()
        if (step + 1) % args.print_every == 0:
            avg = hvd.allreduce(loss.detach(), name='loss').item()
            if hvd.rank() == 0:
                print('step %5d  loss %.4f  test accuracy %.3f'
                      % (step + 1, avg, accuracy(model, xtest, ytest)),
                      flush=True)
        if step == args.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000.0)
        if ckpt and ckpt.step(step + 1):
            stopped = True
            break
    if ckpt:
        ckpt.close()
    if stopped:
        if hvd.rank() == 0:
            print('train.py: stopped by a signal after step %d, checkpoint '
                  'written: exit %d (requeue and it resumes)'
                  % (step + 1, hvd.Checkpoint.EXIT_STATUS), flush=True)
        hvd.shutdown()
        return hvd.Checkpoint.EXIT_STATUS
    final = hvd.allreduce(loss.detach(), name='loss').item()
    acc = accuracy(model, xtest, ytest)
    if hvd.rank() == 0:
        print('train.py: done: %d steps (%d in this run, %.2f s CPU), loss '
              '%.4f -> %.4f, test accuracy %.3f -> %.3f'
              % (args.steps, args.steps - start, time.process_time() - t0,
                 loss0 if loss0 is not None else final, final, acc0, acc))
        print('train.py: weights checksum %s' % checksum(model), flush=True)
        d = args.ckpt_dir or os.environ.get('HOROVOD_CHECKPOINT_DIR')
        if ckpt and d:
            print('train.py: checkpoints in %s (hvd-ckpt list %s)' % (d, d),
                  flush=True)
    hvd.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
