"""horovod.common: the framework-independent names scripts import."""
