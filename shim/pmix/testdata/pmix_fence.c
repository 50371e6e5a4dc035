/*
 * pmix_fence - a PMIx client of gopmi's tests: PMIx_Init, put a key,
 * commit, a collecting fence over the whole job, read the key of the next
 * local rank, a fence that collects nothing, PMIx_Finalize. Prints
 * "ok fence rank=R got=V" or "fail <step> <status>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pmix.h>

static int fail(const char *step, pmix_status_t rc)
{
    printf("fail %s %s\n", step, PMIx_Error_string(rc));
    return 1;
}

int main(int argc, char **argv)
{
    pmix_proc_t me, peer;
    pmix_value_t val, *got = NULL;
    pmix_info_t collect;
    bool yes = true;
    char buf[64];
    pmix_status_t rc;
    int peer_rank = argc > 1 ? atoi(argv[1]) : -1;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) return fail("init", rc);
    snprintf(buf, sizeof buf, "value-of-%u", me.rank);
    val.type = PMIX_STRING;
    val.data.string = buf;
    if ((rc = PMIx_Put(PMIX_GLOBAL, "gopmi.test", &val)) != PMIX_SUCCESS) return fail("put", rc);
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS) return fail("commit", rc);
    PMIx_Info_load(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    if ((rc = PMIx_Fence(NULL, 0, &collect, 1)) != PMIX_SUCCESS) return fail("fence", rc);
    PMIX_LOAD_PROCID(&peer, me.nspace, (pmix_rank_t)peer_rank);
    if ((rc = PMIx_Get(&peer, "gopmi.test", NULL, 0, &got)) != PMIX_SUCCESS) return fail("get", rc);
    printf("ok fence rank=%u got=%s\n", me.rank, got->data.string);
    fflush(stdout);
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) return fail("barrier", rc);
    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS) return fail("finalize", rc);
    return 0;
}
