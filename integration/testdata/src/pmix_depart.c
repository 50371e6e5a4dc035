/*
 * pmix_depart - data put in a job stays readable until the job ends,
 * whichever node finishes first, on the PMIx face.
 *
 * Every rank puts "depart.k" = "value-of-<rank>", commits and fences
 * without collecting data (its peers' data is read by direct modex). The
 * upper half of the ranks (rank >= size/2: the last node's, in block
 * order) prints "ok depart rank=R step=gone pid=P", waits until the file
 * named by hold=PATH exists (when given), finalizes and exits; each lower
 * rank r waits until the file named by wait=PATH exists (the test makes
 * it once that node's ranks and server have exited) and reads depart.k
 * of rank size/2 + r % (size - size/2).
 * Output: "ok depart rank=R step=read peer=Q" per reader; a failure
 * prints a fail line and exits 1.
 */
#include <pmix.h>
#include <unistd.h>

#include "gopmi_test.h"

#define P "depart"

static pmix_proc_t me;

static void await_file(const char *path, const char *why)
{
    for (int i = 0; path[0] && access(path, F_OK) != 0; i++) {
        if (i == 6000) gt_fail(P, (int)me.rank, "%s-no-%s-in-60s", why, path);
        usleep(10000);
    }
}

int main(int argc, char **argv)
{
    const char *hold = gt_arg(argc, argv, "hold", ""), *wait = gt_arg(argc, argv, "wait", "");
    pmix_proc_t wild, peer;
    pmix_value_t pv, *got = NULL, *sz = NULL;
    pmix_status_t rc;
    char val[64], want[64];
    uint32_t size, half;

    gt_setup(P);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, -1, "init-%s", PMIx_Error_string(rc));
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &sz)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "size-%s", PMIx_Error_string(rc));
    size = sz->data.uint32;
    PMIX_VALUE_RELEASE(sz);
    half = size / 2;

    snprintf(val, sizeof(val), "value-of-%u", me.rank);
    PMIX_VALUE_LOAD(&pv, val, PMIX_STRING);
    if ((rc = PMIx_Put(PMIX_GLOBAL, "depart.k", &pv)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "put-%s", PMIx_Error_string(rc));
    PMIX_VALUE_DESTRUCT(&pv);
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "commit-%s", PMIx_Error_string(rc));
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "fence-%s", PMIx_Error_string(rc));

    if (me.rank >= half) {
        printf("ok " P " rank=%u step=gone pid=%d\n", me.rank, (int)getpid());
        await_file(hold, "hold");
        PMIx_Finalize(NULL, 0);
        return 0;
    }
    await_file(wait, "wait");
    PMIX_LOAD_PROCID(&peer, me.nspace, half + me.rank % (size - half));
    snprintf(want, sizeof(want), "value-of-%u", peer.rank);
    if ((rc = PMIx_Get(&peer, "depart.k", NULL, 0, &got)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "get-of-%u-%s", peer.rank, PMIx_Error_string(rc));
    if (got->type != PMIX_STRING || strcmp(got->data.string, want) != 0) gt_fail(P, (int)me.rank, "get-of-%u-wrong", peer.rank);
    PMIX_VALUE_RELEASE(got);
    printf("ok " P " rank=%u step=read peer=%u\n", me.rank, peer.rank);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
