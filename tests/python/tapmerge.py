"""Merge the per-rank pytest results of one launch into one TAP stream.

    tapmerge.py RESULTS_DIR NP LABEL EXIT_STATUS

RESULTS_DIR holds rank<R>.jsonl written by conftest.py: a plan line (the
collected test ids, in order) and one line per finished test.  A test is
"ok" when every rank passed it, "ok # SKIP" when rank 0 skipped it (skips
are collective), and "not ok" when any rank failed it or has no result
for it (a rank that crashed or hung); the failing ranks' messages follow
as TAP diagnostics.  One more test says whether the launch itself ended
with status 0 (a crash or hang at shutdown fails it).
"""

import json
import os
import sys


def load(path):
    plan, res = None, {}
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a crash
                if 'plan' in d:
                    plan = d['plan']
                else:
                    res[d['id']] = d
    except OSError:
        pass
    return plan, res


def main():
    d, np_ = sys.argv[1], int(sys.argv[2])
    label = sys.argv[3]
    status = int(sys.argv[4])
    ranks = [load(os.path.join(d, 'rank%d.jsonl' % r)) for r in range(np_)]
    plan = next((p for p, _ in ranks if p is not None), None)
    if plan is None:
        print('1..1')
        print('not ok 1 - %s: no rank collected the tests (pytest did not '
              'start; exit status %d; see the log)' % (label, status))
        return 0
    print('1..%d' % (len(plan) + 1))
    for i, tid in enumerate(plan, 1):
        name = '%s: %s' % (label, tid)
        outs = [res.get(tid) for _, res in ranks]
        bad = [(r, o) for r, o in enumerate(outs)
               if o is None or o['outcome'] == 'failed']
        if not bad and outs[0]['outcome'] == 'skipped':
            print('ok %d - %s # SKIP %s' % (i, name,
                                            outs[0]['msg'].strip()[:200]))
        elif not bad:
            print('ok %d - %s' % (i, name))
        else:
            print('not ok %d - %s' % (i, name))
            for r, o in bad:
                if o is None:
                    print('# rank %d: no result (the rank died or hung)' % r)
                    continue
                for line in o['msg'].strip().splitlines()[-25:]:
                    print('# rank %d: %s' % (r, line))
    n = len(plan) + 1
    if status == 0:
        print('ok %d - %s: every rank exited with status 0' % (n, label))
    else:
        print('not ok %d - %s: the launch exited with status %d%s'
              % (n, label, status, ' (timeout)' if status in (124, 137)
                 else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
