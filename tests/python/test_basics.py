"""Init, ranks, probes, timeline, the compatibility package."""

import json
import os

import pytest
import torch


def test_ranks(hvd):
    r, n = hvd.rank(), hvd.size()
    got = hvd.allgather(torch.tensor([[r, hvd.local_rank(), hvd.local_size(),
                                       hvd.cross_rank(), hvd.cross_size()]]))
    assert 0 <= r < n
    assert hvd.is_initialized()
    assert got[:, 0].tolist() == list(range(n))
    # every rank knows the same layout
    for row in got.tolist():
        assert 0 <= row[1] < row[2]
        assert 0 <= row[3] < row[4]
    assert sum(1 for row in got.tolist() if row[1] == 0) == \
        max(row[4] for row in got.tolist() if row[1] == 0)


def test_rank_matches_launcher(hvd):
    for var in ('RANK', 'OMPI_COMM_WORLD_RANK', 'SLURM_PROCID'):
        if var in os.environ:
            assert int(os.environ[var]) == hvd.rank(), var
    for var in ('WORLD_SIZE', 'OMPI_COMM_WORLD_SIZE', 'SLURM_NTASKS'):
        if var in os.environ:
            assert int(os.environ[var]) == hvd.size(), var


def test_probes(hvd):
    assert hvd.mpi_built() is False
    assert hvd.mpi_enabled() is False
    assert hvd.mpi_threads_supported() is True
    assert hvd.gloo_built() is False and hvd.gloo_enabled() is False
    assert hvd.rocm_built() is False
    assert hvd.ddl_built() is False and hvd.ccl_built() is False
    assert isinstance(hvd.cuda_built(), bool)
    assert isinstance(hvd.nccl_built(), int)
    # the truth about this build: config.h of the build tree
    cfg = os.path.join(os.environ.get('top_builddir', ''), 'config.h')
    if os.path.exists(cfg):
        cuda = '#define HVD_HAVE_CUDA 1' in open(cfg).read()
        assert hvd.cuda_built() == cuda
        assert (hvd.nccl_built() > 0) == cuda
    assert hvd.is_homogeneous() in (True, False)


def test_op_values(hvd):
    # Horovod's numbering (scripts print and compare them)
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max,
            hvd.Product) == (0, 1, 2, 3, 4, 5)


def test_init_twice_is_noop(hvd):
    r = hvd.rank()
    hvd.init()
    assert hvd.rank() == r and hvd.is_initialized()


def test_init_subset_comm_refused(hvd):
    if hvd.size() == 1:
        pytest.skip('needs 2 ranks')
    # a list naming every rank is the world: accepted
    hvd.init(comm=list(range(hvd.size())))
    assert hvd.is_initialized()


def test_timeline(hvd, tmp_path_factory):
    d = os.environ['HVD_TEST_RESULTS']
    path = os.path.join(d, 'timeline.json')
    hvd.start_timeline(path)
    hvd.allreduce(torch.ones(4), name='timeline.t')
    hvd.stop_timeline()
    hvd.barrier()
    if hvd.rank() == 0:
        events = json.load(open(path))
        assert any('timeline.t' in json.dumps(e) for e in events)


def test_compat_package(hvd):
    import horovod.torch as h
    import hvd.torch as t
    assert h is t
    assert h.allreduce is t.allreduce
    from horovod.torch import DistributedOptimizer  # noqa: F401
    from horovod.common.exceptions import HorovodInternalError
    assert HorovodInternalError is t.HorovodInternalError


def test_handles_are_ints(hvd):
    h = hvd.allreduce_async(torch.ones(2), name='handles.int')
    assert isinstance(h, int)
    out = hvd.synchronize(h)
    assert out.tolist() == [1.0, 1.0]
    assert hvd.synchronize(h) is None  # as Horovod: unknown handle
    assert hvd.poll(h) is True


def test_fast_path(hvd):
    from hvd import _lib
    want = os.environ.get('HVD_FAST', '')
    if want == '0':
        assert _lib.fast is None  # the ctypes path is under test
    elif want:
        assert _lib.fast is not None, 'hvd._fast did not load from ' + want


def test_compat_never_shadows(hvd, tmp_path):
    """A Horovod the user installed wins over the compatibility package,
    wherever it is on sys.path."""
    import subprocess
    import sys
    import hvd as core
    ours = os.path.dirname(os.path.dirname(os.path.abspath(core.__file__)))
    fake = tmp_path / 'site'
    (fake / 'horovod').mkdir(parents=True)
    (fake / 'horovod' / '__init__.py').write_text('REAL = True\n')
    code = ('import warnings; warnings.simplefilter("ignore"); '
            'import horovod; print(getattr(horovod, "REAL", False))')
    env = dict(os.environ, PYTHONPATH='%s:%s' % (ours, fake))
    env.pop('HVD_HOROVOD_COMPAT', None)
    out = subprocess.run([sys.executable, '-c', code], env=env,
                         capture_output=True, text=True, timeout=60)
    forced = subprocess.run([sys.executable, '-c', code],
                            env=dict(env, HVD_HOROVOD_COMPAT='1'),
                            capture_output=True, text=True, timeout=60)
    alone = subprocess.run([sys.executable, '-c', code],
                           env=dict(env, PYTHONPATH=ours),
                           capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == 'True', out.stderr
    assert forced.stdout.strip() == 'False', forced.stderr
    assert alone.stdout.strip() == 'False', alone.stderr


def test_compat_two_copies(hvd, tmp_path):
    """Two copies of the compatibility package on sys.path (an installed
    slurm-horovod and a source tree) take each other for no Horovod: the
    first is used, without a warning, and a real Horovod behind both still
    wins.  (Each took the other for a Horovod and imported it, without
    end: RecursionError.)"""
    import shutil
    import subprocess
    import sys
    import hvd as core
    ours = os.path.dirname(os.path.dirname(os.path.abspath(core.__file__)))
    copy = tmp_path / 'copy'
    shutil.copytree(os.path.join(ours, 'horovod'), copy / 'horovod',
                    ignore=shutil.ignore_patterns('__pycache__'))
    fake = tmp_path / 'site'
    (fake / 'horovod').mkdir(parents=True)
    (fake / 'horovod' / '__init__.py').write_text('REAL = True\n')
    code = ('import horovod; '
            'print(getattr(horovod, "REAL", False), horovod.__file__)')
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE='1')
    env.pop('HVD_HOROVOD_COMPAT', None)
    runs = (([ours, copy], 'False', str(ours)),
            ([copy, ours], 'False', str(copy)),
            ([ours, copy, fake], 'True', str(fake)))
    for path, real, where in runs:
        args = [sys.executable] + ([] if real == 'True' else ['-W', 'error'])
        out = subprocess.run(
            args + ['-c', code],
            env=dict(env, PYTHONPATH=':'.join(str(p) for p in path)),
            capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        got, origin = out.stdout.split()
        assert got == real, (path, out.stdout)
        assert origin.startswith(where), (path, origin)


def test_compat_submodules(hvd):
    """horovod.torch's submodules are hvd.torch's (one handle map)."""
    import horovod.torch.mpi_ops as m
    from horovod.torch.optimizer import DistributedOptimizer
    import hvd.torch.mpi_ops as ours
    assert m is ours
    assert DistributedOptimizer is hvd.DistributedOptimizer
    h = m.allreduce_async(torch.ones(1), name='compat.sub')
    assert hvd.synchronize(h).tolist() == [1.0]


def test_elastic_there(hvd):
    # (was refused before elastic training; test_elastic_api.py has more)
    import horovod.torch.elastic as e
    assert e is hvd.elastic and isinstance(hvd.elastic.TorchState, type)
    assert callable(e.run) and callable(e.ElasticSampler)


def test_compat_common_util(hvd):
    """horovod.common.util's helpers (Horovod's test files import env from
    there) and its probes, which are hvd.torch's."""
    from horovod.common import util
    key = 'HVD_TEST_UTIL_ENV'
    os.environ.pop(key, None)
    os.environ['HVD_TEST_UTIL_KEPT'] = 'old'
    with util.env(**{key: 'x', 'HVD_TEST_UTIL_KEPT': 'new',
                     'HVD_TEST_UTIL_NONE': None}):
        inside = (os.environ.get(key), os.environ['HVD_TEST_UTIL_KEPT'],
                  'HVD_TEST_UTIL_NONE' in os.environ)
    after = (os.environ.get(key), os.environ.pop('HVD_TEST_UTIL_KEPT'))
    with pytest.raises(RuntimeError):
        with util.env(**{key: 'y'}):
            raise RuntimeError('left the block')
    assert inside == ('x', 'new', False)
    assert after == (None, 'old')
    assert key not in os.environ
    with pytest.raises(TypeError, match=key):
        with util.env(**{key: 3}):
            pass
    assert util.split_list(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert util.split_list([1], 3) == [[1], [], []]
    assert [util.num_rank_is_power_2(n) for n in (0, 1, 2, 3, 4, 6, 8)] == \
        [False, True, True, False, True, False, True]
    assert util.is_iterable([]) and not util.is_iterable(3)
    pick = util.get_average_backwards_compatibility_fun(hvd)
    assert pick(None, None) is hvd.Average
    assert pick(hvd.Sum, None) is hvd.Sum
    with pytest.warns(DeprecationWarning):
        assert pick(None, False) is hvd.Sum
    with pytest.raises(ValueError, match='supersedes'):
        pick(hvd.Sum, True)
    assert util.mpi_built() is hvd.mpi_built() is False
    assert util.nccl_built() == hvd.nccl_built()
    assert util.gloo_built() is False and util.ccl_built() is False
    assert util.extension_available('torch') is True
    assert util.extension_available('tensorflow') is False
    assert util.gpu_available('tensorflow') is False
    assert util.gpu_available('torch') == \
        (hvd.cuda_built() and torch.cuda.is_available())
    assert util.get_extension_full_path('/a/b/__init__.py', 'c', 'x') == \
        '/a/b/c/x' + util.get_ext_suffix()
    with pytest.raises(ImportError, match='torch binding only'):
        util.check_extension('Horovod', 'HOROVOD_WITH_MXNET',
                             '/nonexistent/__init__.py', 'mpi_lib')


def test_compat_timeline_from_env(hvd, tmp_path):
    """Horovod's test_timeline.py, as its users write it: HOROVOD_TIMELINE
    set with util.env() before init(), in a process of one rank (the
    launcher's variables left out, so that it runs alone)."""
    import subprocess
    import sys
    from horovod.common.util import env
    import hvd as core
    ours = os.path.dirname(os.path.dirname(os.path.abspath(core.__file__)))
    path = tmp_path / 'timeline.json'
    code = ('import torch, horovod.torch as hvd; hvd.init(); '
            'hvd.allreduce(torch.tensor([1., 2., 3.]), name="test_allreduce");'
            ' hvd.shutdown()')
    launcher = ('PMIX_', 'SLURM_', 'OMPI_', 'PMI_', 'HOROVOD_')
    child = {k: v for k, v in os.environ.items()
             if not k.startswith(launcher) and k not in ('RANK', 'WORLD_SIZE')}
    child['PYTHONPATH'] = ours
    with env(HOROVOD_TIMELINE=str(path), HOROVOD_TIMELINE_MARK_CYCLES='1'):
        child.update((k, os.environ[k]) for k in
                     ('HOROVOD_TIMELINE', 'HOROVOD_TIMELINE_MARK_CYCLES'))
        out = subprocess.run([sys.executable, '-c', code], env=child,
                             capture_output=True, text=True, timeout=120)
    assert 'HOROVOD_TIMELINE' not in os.environ
    assert out.returncode == 0, out.stderr[-2000:]
    text = path.read_text()
    for want in ('allreduce.test_allreduce', 'NEGOTIATE_ALLREDUCE',
                 '"ALLREDUCE"', 'CYCLE_START'):
        assert want in text, (want, text[-2000:])
