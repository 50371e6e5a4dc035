/*
 * mpi_node - where MPI says each rank runs: its processor name, and the
 * size of its MPI_COMM_TYPE_SHARED communicator (the ranks MPI takes for
 * its node's): "ok node rank=R name=N shared=S".
 */
#include <mpi.h>

#include "gopmi_test.h"

int main(int argc, char **argv)
{
    int rank = -1, size = 0, len = 0, shared = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    MPI_Comm node;

    gt_setup("node");
    gt_mpi_init("node", &argc, &argv, &rank, &size);
    MPI_Get_processor_name(name, &len);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &shared);
    printf("ok node rank=%d name=%s shared=%d\n", rank, name, shared);
    MPI_Comm_free(&node);
    gt_mpi_finalize("node", rank);
    return 0;
}
