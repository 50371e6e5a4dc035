/*
 * pmix_hold - a PMIx fence that one rank never joins.
 *
 * Every rank but H calls PMIx_Fence over the whole job (one that collects
 * nothing; with collect=1, data); rank H prints "holding rank=H" and sleeps, so the
 * fence can only end by the server's time-out or by the job's end.
 * Args (name=value): hold=H (default: the last rank), collect=0, ignore=0.
 * Output: a fencing rank prints "fence-error rank=R status=<PMIx status>"
 * and exits 1 when its fence fails (with ignore=1 it goes on and hangs
 * for 30 s first), or "fence-done rank=R" and exits 0 if it completes
 * (which it must not).
 */
#include <pmix.h>

#include "gopmi_test.h"

#define P "pmixhold"

int main(int argc, char **argv)
{
    int collect = atoi(gt_arg(argc, argv, "collect", "0"));
    pmix_proc_t me, wild;
    pmix_value_t *got = NULL;
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;
    int size, hold;

    gt_setup(P);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, gt_rank_hint(), "init-%s", PMIx_Error_string(rc));
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &got)) != PMIX_SUCCESS)
        gt_fail(P, (int)me.rank, "job-size-%s", PMIx_Error_string(rc));
    size = (int)got->data.uint32;
    PMIX_VALUE_RELEASE(got);
    hold = atoi(gt_arg(argc, argv, "hold", "-1"));
    if (hold < 0) hold = size - 1;

    if ((int)me.rank == hold) {
        printf("holding rank=%u\n", me.rank);
        for (;;) pause();
    }
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    rc = PMIx_Fence(NULL, 0, collect ? &info : NULL, collect ? 1 : 0);
    if (rc != PMIX_SUCCESS) {
        printf("fence-error rank=%u status=%s\n", me.rank, PMIx_Error_string(rc));
        fflush(stdout);
        if (atoi(gt_arg(argc, argv, "ignore", "0"))) sleep(30);
        return 1;
    }
    printf("fence-done rank=%u\n", me.rank);
    PMIx_Finalize(NULL, 0);
    return 0;
}
