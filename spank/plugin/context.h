/* context.h - per-context halves of the SPANK callbacks (horovod.c). */
#ifndef SPANK_PLUGIN_CONTEXT_H
#define SPANK_PLUGIN_CONTEXT_H

#include <slurm/spank.h>

/* srun (S_CTX_LOCAL): srun.c */
int srun_init(spank_t sp, int ac, char **av);
int srun_post_opt(spank_t sp, int ac, char **av);
int srun_user_init(spank_t sp, int ac, char **av);

/* sbatch, salloc (S_CTX_ALLOCATOR): alloc.c */
int alloc_init(spank_t sp, int ac, char **av);
int alloc_post_opt(spank_t sp, int ac, char **av);

/* slurmstepd (S_CTX_REMOTE): stepd.c */
int stepd_init(spank_t sp, int ac, char **av);
int stepd_user_init(spank_t sp, int ac, char **av);
int stepd_task_init(spank_t sp, int ac, char **av);

#endif /* SPANK_PLUGIN_CONTEXT_H */
