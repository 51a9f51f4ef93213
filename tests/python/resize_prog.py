"""A torch training loop that resumes on another number of ranks
(tests/python/resize.sh): hvd.Checkpoint with rng=False and a
GlobalSampler; every rank logs the samples it trains on.

    resize_prog.py DIR OUT RUN STOP [--rng-dir RDIR]

STOP > 0: after STOP steps, save and exit 85.  --rng-dir: first, a
Checkpoint in RDIR with per-rank RNG state (rng=True, which restores on
the same number of ranks only): restore it (printing the error if it
fails), save it, close it.
"""

import os
import sys

import torch

import hvd.torch as hvd

EPOCHS, N, BATCH = 2, 101, 4


def checksum(model):
    return float(sum(p.double().sum() * (i + 1)
                     for i, p in enumerate(model.parameters())))


def main():
    d, out, run, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4])
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(),
                                                   lr=0.01, momentum=0.9),
                                   named_parameters=model.named_parameters())
    x = torch.arange(N * 3, dtype=torch.float32).reshape(N, 3) / (N * 3)
    y = x.sum(1, keepdim=True).sin()
    data = torch.utils.data.TensorDataset(torch.arange(N), x, y)
    sampler = hvd.GlobalSampler(N, BATCH, seed=5)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH,
                                         sampler=sampler)
    if '--rng-dir' in sys.argv:
        w = torch.zeros(3)
        rc = hvd.Checkpoint(dir=sys.argv[sys.argv.index('--rng-dir') + 1],
                            rng=True, w=w)
        try:
            rc.restore()
        except hvd.HorovodInternalError as e:
            print('rng restore failed: %s' % e, flush=True)
        rc.save(1)
        rc.close()
    ck = hvd.Checkpoint(model=model, optimizer=opt, dir=d, rng=False,
                        sampler=sampler)
    try:
        step = ck.restore()
    except hvd.HorovodInternalError as e:
        print('restore failed: %s' % e, flush=True)
        return 3
    if step:
        print('restored step %d: epoch %d consumed %d (rank %d of %d) '
              'checksum %r' % (step, sampler.epoch, sampler.consumed,
                               hvd.rank(), hvd.size(), checksum(model)),
              flush=True)
    seen = open(os.path.join(out, 'seen.%d.%d' % (run, hvd.rank())), 'w')
    done = 0
    while sampler.epoch < EPOCHS:
        sampler.set_epoch(sampler.epoch)
        it = iter(loader)
        for _ in range(sampler.steps_left()):
            # a rank may have no batch in the last step of an epoch: it
            # still takes part, with zero gradients
            idx, xb, yb = next(it, (torch.zeros(0, dtype=torch.long),
                                    torch.zeros(0, 3), torch.zeros(0, 1)))
            for i in idx.tolist():
                seen.write('%d %d\n' % (sampler.epoch, i))
            opt.zero_grad()
            ((model(xb) - yb) ** 2).sum().backward()
            opt.step()
            sampler.record_step()
            step += 1
            done += 1
            if stop and done == stop:
                seen.close()
                ck.save(step)
                print('stopped at step %d: epoch %d consumed %d (rank %d '
                      'of %d) checksum %r' % (step, sampler.epoch,
                                              sampler.consumed, hvd.rank(),
                                              hvd.size(), checksum(model)),
                      flush=True)
                ck.close()
                return ck.EXIT_STATUS
            ck.step(step)
        sampler.set_epoch(sampler.epoch + 1)
    seen.close()
    ck.close()
    print('finished at step %d (rank %d of %d) checksum %r'
          % (step, hvd.rank(), hvd.size(), checksum(model)), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
