/*
 * pmix_late - a commit after the first is seen by direct modex, with no
 * fence between (as Open MPI's async modex reads its peers).
 *
 * Every rank puts "late.first", commits, waits 50 ms, puts "late.second"
 * and commits again. Then, with no fence, each rank reads both keys of
 * the next rank (r+1 mod N), which under -ppn 1 lives on another node:
 * its server must hand over the second commit too, and a reader that got
 * the first commit's data must not stop there.
 * Output: "ok late rank=R" per rank; a failure prints a fail line and
 * exits 1.
 */
#include <pmix.h>
#include <unistd.h>

#include "gopmi_test.h"

#define P "pmixlate"

static pmix_proc_t me;

static void put(const char *key, const char *val)
{
    pmix_value_t pv;
    pmix_status_t rc;

    PMIX_VALUE_LOAD(&pv, val, PMIX_STRING);
    if ((rc = PMIx_Put(PMIX_GLOBAL, key, &pv)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "put-%s-%s", key, PMIx_Error_string(rc));
    PMIX_VALUE_DESTRUCT(&pv);
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "commit-%s", PMIx_Error_string(rc));
}

static void get(const pmix_proc_t *peer, const char *key, const char *want)
{
    pmix_value_t *got = NULL;
    pmix_status_t rc = PMIx_Get(peer, key, NULL, 0, &got);

    if (rc != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "get-%s-of-%u-%s", key, peer->rank, PMIx_Error_string(rc));
    if (got->type != PMIX_STRING || strcmp(got->data.string, want) != 0) gt_fail(P, (int)me.rank, "get-%s-of-%u-wrong", key, peer->rank);
    PMIX_VALUE_RELEASE(got);
}

int main(void)
{
    pmix_proc_t wild, peer;
    pmix_value_t *sz = NULL;
    pmix_status_t rc;
    char want[64];
    uint32_t size;

    gt_setup(P);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, -1, "init-%s", PMIx_Error_string(rc));
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &sz)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "size-%s", PMIx_Error_string(rc));
    size = sz->data.uint32;
    PMIX_VALUE_RELEASE(sz);

    snprintf(want, sizeof(want), "first-of-%u", me.rank);
    put("late.first", want);
    usleep(50 * 1000);
    snprintf(want, sizeof(want), "second-of-%u", me.rank);
    put("late.second", want);

    PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
    snprintf(want, sizeof(want), "second-of-%u", peer.rank);
    get(&peer, "late.second", want);
    snprintf(want, sizeof(want), "first-of-%u", peer.rank);
    get(&peer, "late.first", want);

    /* Nobody leaves before everyone read. */
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "fence-%s", PMIx_Error_string(rc));
    printf("ok late rank=%u\n", me.rank);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
