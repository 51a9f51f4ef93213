#!/bin/bash
# The plugin exports its SPANK entry points and nothing else
# (spank/plugin/horovod.lds).  Who may include and call whom in spank/ is
# tests/unit/layers.sh's.
bld=${top_builddir:-../..}/spank
echo "1..1"
so=$bld/.libs/horovod.so
if [[ ! -f $so ]]; then
	echo "ok 1 # SKIP no $so (built without Slurm)"
	exit 0
fi
got=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort | tr '\n' ' ')
want="plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_init_post_opt slurm_spank_local_user_init slurm_spank_task_init slurm_spank_user_init spank_plugin_version "
if [[ $got == "$want" ]]; then
	echo "ok 1 - horovod.so exports only its SPANK entry points"
else
	echo "not ok 1 - horovod.so exports only its SPANK entry points"
	echo "# exports: $got"
	exit 1
fi
