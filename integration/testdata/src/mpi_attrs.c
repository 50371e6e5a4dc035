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
    int rank = -1, size = 0;
    char appnum[32], usize[32];

    gt_setup("attrs");
    gt_mpi_init("attrs", &argc, &argv, &rank, &size);
    fmt_attr(MPI_APPNUM, appnum, sizeof appnum);
    fmt_attr(MPI_UNIVERSE_SIZE, usize, sizeof usize);
    printf("ok attrs rank=%d size=%d appnum=%s usize=%s\n", rank, size, appnum, usize);
    gt_mpi_finalize("attrs", rank);
    return 0;
}
