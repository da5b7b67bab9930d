/*
 * length-overflow-c is length-overflow in C, calling the imports directly
 * with raw integers (mandate_raw_*): lengths that overflow (ptr+len
 * wrapping past 2^32), lengths of 4 GiB, ranges that end one byte past
 * memory, lengths above each call's limit, a read buffer that wraps, and
 * what C makes easy to get wrong: negative lengths and offsets (an int -1
 * or -16 cast to the ABI's u32), and a size_t computed by subtracting the
 * wrong way round. Limits are checked before ranges, and ranges in 64-bit
 * arithmetic (law 10): ELIMIT, EINVAL or EFAULT, no effect, no crash.
 */
#include "mandate.h"

static mandate_str report = MANDATE_STR_INIT;

static void rec(const char *k, uint32_t e) {
	if (report.len == 0)
		mandate_json_open(&report, '{');
	mandate_json_field_str(&report, k, mandate_errno_name(e));
}

static void note(const char *k, const char *v, size_t n) {
	char key[64] = "#";
	strncat(key, k, sizeof key - 2);
	if (report.len == 0)
		mandate_json_open(&report, '{');
	mandate_json_key(&report, key);
	mandate_json_string(&report, v, n);
}

static uint32_t out;
#define OUT mandate_addr(&out)
#define TOP 0xffffffffu
#define A(s) mandate_addr(s), (uint32_t)(sizeof(s) - 1)

/* neg is the u32 the ABI sees for a negative int. */
static uint32_t neg(int v) { return (uint32_t)v; }

int main(void) {
	mandate_buf in;
	mandate_cap webc, spc;
	uint32_t web, sp, blob, end;
	static const char name[] = "web";
	static const char fetch[] = "fetch";
	static const char get[] = "{\"method\":\"POST\",\"url\":\"/api/overflow\"}";
	static char buf[16];
	char *big;

	if (mandate_input_bytes(&in) != MANDATE_ESUCCESS || mandate_lookup("web", &webc) != MANDATE_ESUCCESS ||
	    mandate_lookup("spawner", &spc) != MANDATE_ESUCCESS)
		__builtin_trap();
	web = webc.h;
	sp = spc.h;

	rec("lookup_len_wrap", mandate_raw_cap_lookup(mandate_addr(name), TOP, OUT));
	rec("lookup_len_limit", mandate_raw_cap_lookup(mandate_addr(name), MANDATE_MAX_NAME_LEN + 1, OUT));
	rec("lookup_len_negative", mandate_raw_cap_lookup(mandate_addr(name), neg(-3), OUT));
	rec("op_len_wrap", mandate_raw_cap_call(web, mandate_addr(fetch), TOP - mandate_addr(fetch) + 2, A(get), OUT));
	rec("op_len_limit", mandate_raw_cap_call(web, mandate_addr(fetch), MANDATE_MAX_OP_LEN + 1, A(get), OUT));
	rec("op_len_negative", mandate_raw_cap_call(web, mandate_addr(fetch), neg(-1), A(get), OUT));
	rec("args_len_wrap", mandate_raw_cap_call(web, A(fetch), mandate_addr(get), TOP - mandate_addr(get) + 1, OUT));
	rec("args_len_4g", mandate_raw_cap_call(web, A(fetch), 0, TOP, OUT));
	rec("args_len_negative", mandate_raw_cap_call(web, A(fetch), mandate_addr(get), neg(-1), OUT));
	/* A length computed the wrong way round: start - end as a size_t. */
	rec("args_len_backwards", mandate_raw_cap_call(web, A(fetch), mandate_addr(get),
	                                               (uint32_t)((size_t)mandate_addr(get) - (size_t)(mandate_addr(get) + sizeof get)), OUT));
	if ((big = calloc(MANDATE_MAX_ARG_LEN + 1, 1)) == NULL)
		__builtin_trap();
	memcpy(big, get, sizeof get - 1);
	rec("args_len_limit", mandate_raw_cap_call(web, A(fetch), mandate_addr(big), MANDATE_MAX_ARG_LEN + 1, OUT));
	free(big);
	rec("derive_len_wrap", mandate_raw_cap_derive(web, 0x10, TOP - 0xf, OUT));
	rec("derive_len_negative", mandate_raw_cap_derive(web, mandate_addr(get), neg(-2), OUT));
	rec("blob_create_wrap", mandate_raw_blob_create(TOP - 10, 20, OUT));
	rec("blob_create_limit", mandate_raw_blob_create(0, MANDATE_MAX_BLOB_LEN + 1, OUT));
	rec("blob_create_negative", mandate_raw_blob_create(mandate_addr(get), neg(-1), OUT));
	/* The end of memory now (the calloc above may have grown it). */
	end = (uint32_t)(__builtin_wasm_memory_size(0) * 65536u);
	rec("blob_create_past_end", mandate_raw_blob_create(end - 0x10, 0x11, OUT));
	rec("blob_create_to_end", mandate_raw_blob_create(end - 0x10, 0x10, OUT));
	if (mandate_raw_blob_create(A("hello, world"), OUT) != MANDATE_ESUCCESS)
		__builtin_trap();
	blob = out;
	rec("read_buf_wrap", mandate_raw_blob_read(blob, 0, mandate_addr(buf), TOP - mandate_addr(buf) + 1, OUT));
	rec("read_buf_negative", mandate_raw_blob_read(blob, 0, mandate_addr(buf), neg(-16), OUT));
	rec("read_offset_past_end", mandate_raw_blob_read(blob, 13, mandate_addr(buf), 16, OUT));
	rec("read_offset_4g", mandate_raw_blob_read(blob, TOP, mandate_addr(buf), 16, OUT));
	rec("read_offset_negative", mandate_raw_blob_read(blob, neg(-1), mandate_addr(buf), 16, OUT));
	rec("last_error_wrap", mandate_raw_last_error(mandate_addr(buf), TOP, OUT));
	rec("last_error_negative", mandate_raw_last_error(mandate_addr(buf), neg(-1), OUT));
	rec("spawn_len_wrap", mandate_raw_task_spawn(sp, mandate_addr(buf), TOP - mandate_addr(buf) + 1, OUT));
	rec("spawn_len_negative", mandate_raw_task_spawn(sp, mandate_addr(buf), neg(-1), OUT));
	/* Good lengths still work. */
	rec("read_ok", mandate_raw_blob_read(blob, 7, mandate_addr(buf), 16, OUT));
	note("read", buf, out <= sizeof buf ? out : 0);
	mandate_json_close(&report, '}');
	if (report.oom || mandate_set_result(report.ptr, report.len) != MANDATE_ESUCCESS)
		return 1;
	return 0;
}
