/*
 * mpi_attrs - prints MPI_APPNUM and MPI_UNIVERSE_SIZE of MPI_COMM_WORLD:
 * "ok attrs rank=R size=N appnum=A usize=U" where A or U is "unset" when
 * the attribute flag is false.
 */
#include <mpi.h>

#include "gopmi_test.h"

static void fmt_attr(int keyval, char *buf, size_t len)
{
    int *val = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, keyval, &val, &flag);
    if (flag && val != NULL)
        snprintf(buf, len, "%d", *val);
    else
        snprintf(buf, len, "unset");
}

int main(int argc, char **argv)
{
    int rank = -1, size = 0, rc;
    char appnum[32], usize[32];

    gt_setup("attrs");
    rc = MPI_Init(&argc, &argv);
    if (rc != MPI_SUCCESS) gt_fail("attrs", gt_rank_hint(), "MPI_Init-rc-%d", rc);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fmt_attr(MPI_APPNUM, appnum, sizeof appnum);
    fmt_attr(MPI_UNIVERSE_SIZE, usize, sizeof usize);
    printf("ok attrs rank=%d size=%d appnum=%s usize=%s\n", rank, size, appnum, usize);
    rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) gt_fail("attrs", rank, "MPI_Finalize-rc-%d", rc);
    return 0;
}
