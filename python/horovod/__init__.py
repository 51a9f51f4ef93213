"""horovod: slurm-horovod's compatibility package, so that an unchanged
Horovod script (``import horovod.torch as hvd``) runs on slurm-horovod:
horovod.torch *is* hvd.torch.

It lives in a directory of its own ($(pkgdatadir)/python) that only
``module load horovod`` or an explicit PYTHONPATH puts on the path, and it
never shadows a Horovod the user installed: when another ``horovod``
package is found on sys.path, that one is imported in its place (set
HVD_HOROVOD_COMPAT=1 to use this one anyway).
"""

import importlib.machinery
import importlib.util
import os
import sys
import warnings

__version__ = '0.28.1'  # the Horovod API this package provides

_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_MARK = "horovod: slurm-horovod's compatibility package"


def _is_compat(origin):
    """Whether the package at origin is another copy of this one (an
    installed slurm-horovod and a source tree, both on the path): it would
    look for a Horovod in turn and find this one."""
    try:
        with open(origin, encoding='utf-8', errors='replace') as f:
            return _MARK in f.read(256)
    except OSError:
        return False


def _installed_horovod():
    def key(p):
        return os.path.abspath(p or os.getcwd())
    paths = [p for p in sys.path if key(p) != _here]
    while True:
        try:
            spec = importlib.machinery.PathFinder.find_spec('horovod',
                                                            paths)
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.origin or not _is_compat(spec.origin):
            return spec
        where = os.path.dirname(os.path.dirname(os.path.abspath(
            spec.origin)))
        left = [p for p in paths if key(p) != where]
        if len(left) == len(paths):
            return None
        paths = left


if os.environ.get('HVD_HOROVOD_COMPAT') != '1':
    _spec = _installed_horovod()
    if _spec is not None and _spec.loader is not None:
        warnings.warn(
            'slurm-horovod: a Horovod is installed (%s) and is used for '
            '"import horovod"; "import hvd.torch as hvd" gives '
            "slurm-horovod's (or set HVD_HOROVOD_COMPAT=1)"
            % os.path.dirname(_spec.origin or '?'), stacklevel=2)
        _mod = importlib.util.module_from_spec(_spec)
        sys.modules[__name__] = _mod
        _spec.loader.exec_module(_mod)
