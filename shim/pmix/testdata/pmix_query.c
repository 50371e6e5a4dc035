/*
 * pmix_query - a PMIx client of gopmi's tests: PMIx_Init, then
 * PMIx_Query_info for the namespaces and for its job's proc table, then
 * PMIx_Log of a line to stderr, then PMIx_Finalize. Prints
 * "ok query <key>=<value>" per answer and "ok log", or
 * "fail <step> <status>".
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

int main(void)
{
    pmix_proc_t me;
    pmix_query_t *q;
    pmix_info_t *results = NULL, data;
    size_t nresults = 0;
    pmix_status_t rc;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) return fail("init", rc);
    PMIX_QUERY_CREATE(q, 2);
    for (int i = 0; i < 2; i++) q[i].keys = calloc(2, sizeof(char *));
    q[0].keys[0] = strdup(PMIX_QUERY_NAMESPACES);
    q[1].keys[0] = strdup(PMIX_QUERY_PROC_TABLE);
    PMIX_INFO_CREATE(q[1].qualifiers, 1);
    q[1].nqual = 1;
    PMIx_Info_load(&q[1].qualifiers[0], PMIX_NSPACE, me.nspace, PMIX_STRING);
    if ((rc = PMIx_Query_info(q, 2, &results, &nresults)) != PMIX_SUCCESS) return fail("query", rc);
    for (size_t i = 0; i < nresults; i++) {
        if (results[i].value.type == PMIX_STRING) printf("ok query %s=%s\n", results[i].key, results[i].value.data.string);
    }
    PMIx_Info_load(&data, PMIX_LOG_STDERR, "a line from a PMIx client", PMIX_STRING);
    if ((rc = PMIx_Log(&data, 1, NULL, 0)) != PMIX_SUCCESS) return fail("log", rc);
    printf("ok log\n");
    fflush(stdout);
    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS) return fail("finalize", rc);
    return 0;
}
