/* launcher.h - the launcher's (srun, sbatch, salloc) parsed options. */
#ifndef SPANK_PLUGIN_LAUNCHER_H
#define SPANK_PLUGIN_LAUNCHER_H

#include "core/elastic.h"

/*
 * Fill `l` with what `cmd` ("srun", "sbatch", "salloc": the process we are
 * in) parsed.  Returns 1 when its options were read, 0 when only the
 * SLURM_* input variables could be (the rest stays unknown, -1).
 */
int launcher_read(const char *cmd, struct elastic_launch *l);

#endif /* SPANK_PLUGIN_LAUNCHER_H */
