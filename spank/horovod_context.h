/* horovod_context.h - per-context halves of the SPANK callbacks. */
#ifndef HOROVOD_CONTEXT_H
#define HOROVOD_CONTEXT_H

#include <slurm/spank.h>

/* srun (S_CTX_LOCAL): horovod_srun.c */
int horovod_srun_init(spank_t sp, int ac, char **av);
int horovod_srun_post_opt(spank_t sp, int ac, char **av);

/* sbatch, salloc (S_CTX_ALLOCATOR): horovod_alloc.c */
int horovod_alloc_init(spank_t sp, int ac, char **av);
int horovod_alloc_post_opt(spank_t sp, int ac, char **av);

/* slurmstepd (S_CTX_REMOTE): horovod_stepd.c */
int horovod_stepd_init(spank_t sp, int ac, char **av);
int horovod_stepd_user_init(spank_t sp, int ac, char **av);
int horovod_stepd_task_init(spank_t sp, int ac, char **av);

#endif /* HOROVOD_CONTEXT_H */
