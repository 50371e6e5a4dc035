/* What moved in Slurm's MPI plugin interface between 22.05 and 25.11,
 * in one place: the rest of mpi/gopmi is written once, against the names
 * below. A release is told by SLURM_VERSION_NUMBER (slurm_version.h, made
 * by the tree's configure). */
#ifndef GOPMI_SLURM_COMPAT_H
#define GOPMI_SLURM_COMPAT_H

#include "slurm/slurm.h"

#define GOPMI_SLURM_AT_LEAST(maj, min) (SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(maj, min, 0))

/* 23.02: the interface's header moved from src/common/slurm_mpi.h to
 * src/interfaces/mpi.h, and its step and task records were renamed. */
#if GOPMI_SLURM_AT_LEAST(23, 2)
#include "src/interfaces/mpi.h"
typedef mpi_step_info_t gopmi_step_info_t;
typedef mpi_task_info_t gopmi_task_info_t;
#else
#include "src/common/slurm_mpi.h"
typedef mpi_plugin_client_info_t gopmi_step_info_t;
typedef mpi_plugin_task_info_t gopmi_task_info_t;
#endif

/* 23.11: hostlist_t became the struct, used by pointer (it was the
 * pointer); 24.11: List went, list_t stayed. The struct types underneath
 * never changed. */
typedef struct hostlist *gopmi_hostlist_t;
typedef struct xlist *gopmi_list_t;

/* 25.05: slurmd no longer writes the node's hwloc topology for a plugin
 * to hand on (conf->hwloc_xml, and conf->def_config, went): MPICH then
 * reads the topology itself (PMI_hwloc_xmlfile is not set). */
#if GOPMI_SLURM_AT_LEAST(25, 5)
#define GOPMI_HWLOC_XML() ((const char *)NULL)
#else
/* slurmstepd's configuration. srun, which loads this plugin too, has no
 * such symbol: weak, it is NULL there instead of failing the load. */
#pragma weak conf
#define GOPMI_HWLOC_XML() \
	((&conf && conf && !conf->def_config && conf->hwloc_xml && conf->hwloc_xml[0]) ? conf->hwloc_xml : NULL)
#endif

#endif
