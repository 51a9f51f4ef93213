"""horovod.common.util: the helpers Horovod scripts and test files import
from here (``from horovod.common.util import env``), answered for this
build. The probes ask slurm-horovod's torch binding, the only framework
it has; Horovod's answer for a framework that is not built is None, and
so is ours."""

import contextlib
import importlib
import os
import sysconfig

__all__ = ['env', 'is_iterable', 'split_list', 'num_rank_is_power_2',
           'get_average_backwards_compatibility_fun', 'get_ext_suffix',
           'get_extension_full_path', 'check_extension',
           'extension_available', 'gpu_available', 'mpi_built',
           'gloo_built', 'nccl_built', 'ddl_built', 'ccl_built']

_FRAMEWORKS = ('torch',)   # the binding this package has (Horovod: 3)


@contextlib.contextmanager
def env(**values):
    """Set environment variables for the length of a with block, and put
    back what was there (unset where nothing was) however it ends. A value
    of None leaves that variable alone."""
    values = {k: v for k, v in values.items() if v is not None}
    for k, v in values.items():
        if not isinstance(v, str):
            raise TypeError('env(): %s must be a str, not %s'
                            % (k, type(v).__name__))
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def is_iterable(x):
    """Whether iter(x) works."""
    try:
        iter(x)
    except TypeError:
        return False
    return True


def split_list(items, n):
    """items cut into n consecutive parts whose lengths differ by at most
    one, the longer ones first."""
    if n < 1:
        raise ValueError('split_list(): n must be at least 1, not %r' % (n,))
    q, extra = divmod(len(items), n)
    parts, start = [], 0
    for i in range(n):
        end = start + q + (1 if i < extra else 0)
        parts.append(items[start:end])
        start = end
    return parts


def num_rank_is_power_2(num_rank):
    """Whether num_rank is a power of two (Adasum's condition)."""
    return num_rank > 0 and num_rank & (num_rank - 1) == 0


def get_average_backwards_compatibility_fun(reduce_ops):
    """A function (op, average) -> op that reads Horovod's old average=
    argument: reduce_ops is the module (or object) with Average and Sum."""
    import hvd
    return hvd._average_compat(reduce_ops)


def get_ext_suffix():
    """The file name ending of this Python's extension modules."""
    return sysconfig.get_config_var('EXT_SUFFIX') or '.so'


def get_extension_full_path(pkg_path, *args):
    """The path of extension module args[-1], in the directories args[:-1]
    beside the file pkg_path."""
    if not args:
        raise TypeError('get_extension_full_path() needs a module name')
    where = os.path.join(os.path.dirname(pkg_path), *args[:-1])
    return os.path.join(where, args[-1] + get_ext_suffix())


def check_extension(ext_name, ext_env_var, pkg_path, *args):
    """ImportError unless the extension module named by pkg_path and args
    exists. slurm-horovod's binding needs no extension module of its own
    (it loads libhvd), so a check on it names that."""
    full_path = get_extension_full_path(pkg_path, *args)
    if not os.path.exists(full_path):
        raise ImportError(
            '%s: %s not found: slurm-horovod provides the torch binding only, '
            'through libhvd (import horovod.torch); %s does not apply to it'
            % (ext_name, full_path, ext_env_var))


def _binding(ext_base_name):
    if ext_base_name not in _FRAMEWORKS:
        return None
    try:
        return importlib.import_module('hvd.' + ext_base_name)
    except ImportError:
        return None


def extension_available(ext_base_name, verbose=False):
    """Whether horovod.<ext_base_name> can be imported here."""
    ok = _binding(ext_base_name) is not None
    if verbose:
        print('Extension %s was%s built.' % (ext_base_name,
                                              '' if ok else ' NOT'))
    return ok


def gpu_available(ext_base_name, verbose=False):
    """Whether the binding has the GPU path (libhvd built with CUDA and
    NCCL) and this process sees a GPU."""
    mod = _binding(ext_base_name)
    ok = False
    if mod is not None and mod.cuda_built():
        import torch
        ok = torch.cuda.is_available()
    if verbose:
        print('Extension %s was%s running with GPU.'
              % (ext_base_name, '' if ok else ' NOT'))
    return ok


def _probe(name):
    def probe(verbose=False):
        for fw in _FRAMEWORKS:
            mod = _binding(fw)
            if mod is not None:
                return getattr(mod, name)()
        return None
    probe.__name__ = name
    probe.__doc__ = ('hvd.torch.%s() where the binding imports, else None.'
                     % name)
    return probe


mpi_built = _probe('mpi_built')
gloo_built = _probe('gloo_built')
nccl_built = _probe('nccl_built')
ddl_built = _probe('ddl_built')
ccl_built = _probe('ccl_built')
