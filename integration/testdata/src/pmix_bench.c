/*
 * pmix_bench - the PMIx twin of pmi2_bench, over OpenPMIx's client.
 *
 * Each of N ranks puts K keys of V bytes (PMIx_Put, PMIX_GLOBAL), commits,
 * and a collecting PMIx_Fence makes them everyone's; it then reads every
 * key of G peers (ranks r+1..r+G mod N), for R rounds with fresh keys each
 * round. Phases are separated by fences that collect nothing, used as
 * barriers, so rank 0's clock sees the slowest rank of each phase.
 *
 * Args (name=value): k=8 v=64 g=16 rounds=3 collect=1. G is capped at
 * N-1; k=0 is the floor of a job: init, the fences as barriers, finalize.
 * collect=0 makes the put fence collect nothing too: then each get of a
 * peer on another node is a direct modex, answered by the peer's server.
 * Output: rank 0 prints
 *   bench n=N k=K g=G v=V rounds=R init_us=.. put_us=.. fence_us=.. get_us=.. total_us=..
 * (as pmi2_bench), and every rank prints "cpu_us=<n> rank=R" last.
 * Every value read is checked; a mismatch prints a fail line and exits 1.
 */
#include <pmix.h>

#include "gopmi_test.h"

#define P "pmixbench"

static pmix_proc_t me;

static void value_for(char *buf, int v, int round, int r, int k)
{
    int n = snprintf(buf, (size_t)v + 1, "%d.%d.%d:", round, r, k);
    for (int i = n; i < v; i++) buf[i] = (char)('A' + (i * 7 + r + k) % 26);
    buf[v] = 0;
}

static void fence(const char *why, int collect)
{
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;

    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    rc = PMIx_Fence(NULL, 0, collect ? &info : NULL, collect ? 1 : 0);
    if (rc != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "fence-%s-%s", why, PMIx_Error_string(rc));
}

int main(int argc, char **argv)
{
    int k = atoi(gt_arg(argc, argv, "k", "8"));
    int v = atoi(gt_arg(argc, argv, "v", "64"));
    int g = atoi(gt_arg(argc, argv, "g", "16"));
    int rounds = atoi(gt_arg(argc, argv, "rounds", "3"));
    int collect = atoi(gt_arg(argc, argv, "collect", "1"));
    int rank, size;
    long long t_start, t_init, t0, t1, t2, t3, put_us = 0, fence_us = 0, get_us = 0;
    char key[PMIX_MAX_KEYLEN + 1], *val, *want;
    pmix_proc_t wild, peer;
    pmix_value_t pv, *got = NULL;
    pmix_status_t rc;

    gt_setup(P);
    if (k < 0 || v < 16 || v > 1023 || g < 0 || rounds < 1)
        gt_fail(P, gt_rank_hint(), "bad-args-k-%d-v-%d-g-%d-rounds-%d", k, v, g, rounds);
    val = malloc((size_t)v + 2);
    want = malloc((size_t)v + 2);
    if (val == NULL || want == NULL) gt_fail(P, gt_rank_hint(), "malloc");

    t_start = gt_now_us();
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, gt_rank_hint(), "init-%s", PMIx_Error_string(rc));
    rank = (int)me.rank;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &got)) != PMIX_SUCCESS)
        gt_fail(P, rank, "job-size-%s", PMIx_Error_string(rc));
    size = (int)got->data.uint32;
    PMIX_VALUE_RELEASE(got);
    if (g > size - 1) g = size - 1;
    fence("init", 0);
    t_init = gt_now_us();

    for (int round = 0; round < rounds; round++) {
        t0 = gt_now_us();
        for (int i = 0; i < k; i++) {
            snprintf(key, sizeof key, "b%d-%d-%d", round, rank, i);
            value_for(val, v, round, rank, i);
            pv.type = PMIX_STRING;
            pv.data.string = val;
            if ((rc = PMIx_Put(PMIX_GLOBAL, key, &pv)) != PMIX_SUCCESS)
                gt_fail(P, rank, "put-%s-%s", key, PMIx_Error_string(rc));
        }
        if ((rc = PMIx_Commit()) != PMIX_SUCCESS) gt_fail(P, rank, "commit-%s", PMIx_Error_string(rc));
        t1 = gt_now_us();
        fence("put", collect);
        t2 = gt_now_us();
        for (int p = 1; p <= g; p++) {
            int r = (rank + p) % size;
            PMIX_LOAD_PROCID(&peer, me.nspace, (pmix_rank_t)r);
            for (int i = 0; i < k; i++) {
                snprintf(key, sizeof key, "b%d-%d-%d", round, r, i);
                if ((rc = PMIx_Get(&peer, key, NULL, 0, &got)) != PMIX_SUCCESS)
                    gt_fail(P, rank, "get-%s-%s", key, PMIx_Error_string(rc));
                value_for(want, v, round, r, i);
                if (got->type != PMIX_STRING || strcmp(got->data.string, want) != 0)
                    gt_fail(P, rank, "get-%s-mismatch", key);
                PMIX_VALUE_RELEASE(got);
            }
        }
        fence("get", 0);
        t3 = gt_now_us();
        put_us += t1 - t0;
        fence_us += t2 - t1;
        get_us += t3 - t2;
    }

    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS) gt_fail(P, rank, "finalize-%s", PMIx_Error_string(rc));
    if (rank == 0) {
        printf("bench n=%d k=%d g=%d v=%d rounds=%d init_us=%lld put_us=%lld fence_us=%lld "
               "get_us=%lld total_us=%lld\n",
               size, k, g, v, rounds, t_init - t_start, put_us, fence_us, get_us,
               gt_now_us() - t_start);
    }
    free(val);
    free(want);
    gt_print_cpu(rank);
    return 0;
}
