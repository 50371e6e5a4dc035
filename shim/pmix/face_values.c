//go:build pmix

/* Values between libpmix and the contract: the directives of a call (its
 * range, persistence, wait and time-out), and a value of any type as the
 * text the contract carries, both ways. */

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "face.h"
#include "face_private.h"


/* gopmi_as_int reads a range, a persistence, a wait count or a time-out,
 * which clients send typed (PMIX_DATA_RANGE, PMIX_PERSIST) or as plain
 * integers (Open MPI's MPI_Publish_name sends PMIX_INT); -2 for a type
 * that is none of these. */
int gopmi_as_int(const pmix_value_t *v)
{
    switch (v->type) {
    case PMIX_DATA_RANGE: return v->data.range;
    case PMIX_PERSIST:    return v->data.persist;
    case PMIX_INT:        return v->data.integer;
    case PMIX_UINT32:     return (int)v->data.uint32;
    case PMIX_UINT8:      return v->data.uint8;
    case PMIX_INT8:       return v->data.int8;
    case PMIX_BOOL:       return v->data.flag ? 1 : 0;
    default:              return -2;
    }
}

/* gopmi_directives reads the directives of a name-service call: the range,
 * the persistence, whether and how long to wait; -1 where absent. The
 * caller's identity (PMIX_USERID, PMIX_GRPID, added by libpmix) is the
 * server's own business: the backend knows whose job it serves. */
void gopmi_directives(const pmix_info_t info[], size_t ninfo, int *range, int *persist,
                      int *wait, int *timeout)
{
    *range = *persist = *wait = *timeout = -1;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_RANGE)) {
            *range = gopmi_as_int(&info[i].value);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_PERSISTENCE)) {
            *persist = gopmi_as_int(&info[i].value);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_WAIT)) {
            /* A bool, or how many values to wait for (0: all). */
            if (info[i].value.type == PMIX_BOOL) {
                *wait = info[i].value.data.flag ? 0 : -1;
            } else {
                *wait = gopmi_as_int(&info[i].value);
            }
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT)) {
            *timeout = gopmi_as_int(&info[i].value);
        }
    }
}

int gopmi_is_directive(const pmix_info_t *in)
{
    return PMIX_CHECK_KEY(in, PMIX_RANGE) || PMIX_CHECK_KEY(in, PMIX_PERSISTENCE) ||
           PMIX_CHECK_KEY(in, PMIX_WAIT) || PMIX_CHECK_KEY(in, PMIX_TIMEOUT) ||
           PMIX_CHECK_KEY(in, PMIX_USERID) || PMIX_CHECK_KEY(in, PMIX_GRPID);
}

static char *encode_hex(const char *prefix, const char *bytes, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    size_t p = strlen(prefix);
    char *out = malloc(p + 2 * size + 1);
    if (out == NULL) {
        return NULL;
    }
    memcpy(out, prefix, p);
    for (size_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)bytes[i];
        out[p + 2 * i] = hex[c >> 4];
        out[p + 2 * i + 1] = hex[c & 15];
    }
    out[p + 2 * size] = '\0';
    return out;
}

/* gopmi_encode_value packs a value of any type but a string into text; NULL if
 * libpmix cannot pack it. */
char *gopmi_encode_value(const pmix_value_t *v)
{
    if (v->type == PMIX_BYTE_OBJECT) {
        return encode_hex(BYTES_PREFIX, v->data.bo.bytes, v->data.bo.size);
    }
    pmix_data_buffer_t buf;
    PMIX_DATA_BUFFER_CONSTRUCT(&buf);
    char *out = NULL;
    if (PMIx_Data_pack(NULL, &buf, (void *)v, 1, PMIX_VALUE) == PMIX_SUCCESS) {
        pmix_byte_object_t bo = PMIX_BYTE_OBJECT_STATIC_INIT;
        PMIx_Data_unload(&buf, &bo);
        out = encode_hex(VALUE_PREFIX, bo.bytes, bo.size);
        PMIX_BYTE_OBJECT_DESTRUCT(&bo);
    }
    PMIX_DATA_BUFFER_DESTRUCT(&buf);
    return out;
}

static int unhex(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* decode_hex reads the hex after prefix in s into bo; 0 if s is not so. */
static int decode_hex(const char *s, const char *prefix, pmix_byte_object_t *bo)
{
    size_t p = strlen(prefix), n = strlen(s);
    if (n < p || strncmp(s, prefix, p) != 0 || (n - p) % 2 != 0) {
        return 0;
    }
    bo->size = (n - p) / 2;
    if ((bo->bytes = malloc(bo->size + 1)) == NULL) {
        return 0;
    }
    for (size_t i = 0; i < bo->size; i++) {
        int hi = unhex(s[p + 2 * i]), lo = unhex(s[p + 2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(bo->bytes);
            bo->bytes = NULL;
            return 0;
        }
        bo->bytes[i] = (char)(hi << 4 | lo);
    }
    return 1;
}

/* gopmi_load_value loads a published value for a lookup's answer: the byte
 * object or packed value it encodes, or else the string itself. */
void gopmi_load_value(pmix_value_t *v, const char *s)
{
    pmix_byte_object_t bo = PMIX_BYTE_OBJECT_STATIC_INIT;
    if (decode_hex(s, BYTES_PREFIX, &bo)) {
        PMIx_Value_load(v, &bo, PMIX_BYTE_OBJECT);
        free(bo.bytes);
        return;
    }
    if (decode_hex(s, VALUE_PREFIX, &bo)) {
        pmix_data_buffer_t buf;
        PMIX_DATA_BUFFER_CONSTRUCT(&buf);
        PMIx_Data_load(&buf, &bo); /* the buffer owns bo's bytes now */
        pmix_value_t got;
        PMIX_VALUE_CONSTRUCT(&got);
        int32_t cnt = 1;
        pmix_status_t rc = PMIx_Data_unpack(NULL, &buf, &got, &cnt, PMIX_VALUE);
        PMIX_DATA_BUFFER_DESTRUCT(&buf);
        if (rc == PMIX_SUCCESS && cnt == 1 && PMIx_Value_xfer(v, &got) == PMIX_SUCCESS) {
            PMIX_VALUE_DESTRUCT(&got);
            return;
        }
        PMIX_VALUE_DESTRUCT(&got);
    }
    PMIx_Value_load(v, s, PMIX_STRING);
}

/* gopmi_text formats a value the contract can carry as text into buf: a
 * string, or a number; NULL for other types. */
const char *gopmi_text(const pmix_value_t *v, char *buf, size_t n)
{
    switch (v->type) {
    case PMIX_STRING:    return v->data.string;
    case PMIX_UINT32:    snprintf(buf, n, "%u", v->data.uint32); return buf;
    case PMIX_PROC_RANK: snprintf(buf, n, "%u", v->data.rank); return buf;
    case PMIX_INT:       snprintf(buf, n, "%d", v->data.integer); return buf;
    case PMIX_UINT16:    snprintf(buf, n, "%u", v->data.uint16); return buf;
    case PMIX_BOOL:      return v->data.flag ? "true" : "false";
    default:             return NULL;
    }
}

/* gopmi_flatten_info turns infos into key and text arrays (a value with no text
 * form is "?"), tagging each with tag in idx. */
size_t gopmi_flatten_info(const pmix_info_t *in, size_t n, int tag, char **keys, char **vals, int *idx,
                          char (*nums)[32], size_t at)
{
    for (size_t i = 0; i < n; i++, at++) {
        const char *t = gopmi_text(&in[i].value, nums[at], sizeof nums[at]);
        keys[at] = (char *)in[i].key;
        vals[at] = (char *)(t != NULL ? t : "?");
        idx[at] = tag;
    }
    return at;
}

void gopmi_collective_directives(const pmix_info_t info[], size_t ninfo, int *timeout)
{
    *timeout = 0;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT)) {
            *timeout = gopmi_as_int(&info[i].value);
        }
    }
}
