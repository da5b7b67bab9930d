/*
 * oob-pointers-c is oob-pointers in C: it hands every host call pointers
 * outside its linear memory, calling the imports directly with raw
 * integers (mandate_raw_*, no wrapper in the way): names, ops, arguments,
 * buffers and, above all, out pointers on calls that would have an effect
 * (a fetch, a charge, a derive, a spawn). Every range is checked before
 * anything happens (law 10, EFAULT): the servers see no request, the
 * provider no charge, the graph no new capability or task.
 *
 * What C adds: out pointers measured against the real end of memory (the
 * last whole word is writable, one byte further is EFAULT), out pointers
 * at address 0 and into string literals (WebAssembly has no read-only
 * memory: both are the guest's own memory, written as asked, and no other
 * task's), and the header's wrappers refusing NULL themselves.
 */
#include "mandate.h"

static mandate_str report = MANDATE_STR_INIT;

/* rec records attempt k's errno in the report, a JSON object. */
static void rec(const char *k, uint32_t e) {
	if (report.len == 0)
		mandate_json_open(&report, '{');
	mandate_json_field_str(&report, k, mandate_errno_name(e));
}

/* note records a detail under "#"+k. */
static void note(const char *k, const char *v) {
	char key[64] = "#";
	strncat(key, k, sizeof key - 2);
	if (report.len == 0)
		mandate_json_open(&report, '{');
	mandate_json_field_str(&report, key, v);
}

static uint32_t out;
#define OUT mandate_addr(&out)
#define TOP 0xffffffffu
#define A(s) mandate_addr(s), (uint32_t)(sizeof(s) - 1)

static mandate_cap must_lookup(const char *name) {
	mandate_cap c;
	if (mandate_lookup(name, &c) != MANDATE_ESUCCESS)
		__builtin_trap();
	return c;
}

int main(void) {
	mandate_buf in;
	mandate_json self;
	mandate_str spawn = MANDATE_STR_INIT;
	uint32_t web, card, sp, blob, end;
	static char name[] = "web";
	static const char fetch[] = "fetch";
	static const char get[] = "{\"method\":\"POST\",\"url\":\"/api/oob-effect\"}";
	static const char charge[] = "{\"payee\":\"airline.example\",\"amount\":\"10.00\",\"currency\":\"USD\",\"idempotency_key\":\"oob\"}";
	static const char charge_op[] = "charge";
	static const char derive[] = "{\"paths\":[\"/api/oob\"]}";

	if (mandate_input_bytes(&in) != MANDATE_ESUCCESS || !mandate_json_get(mandate_json_view(in.ptr, in.len), "self", &self))
		__builtin_trap();
	mandate_json_open(&spawn, '{');
	mandate_json_key(&spawn, "module");
	mandate_str_append(&spawn, self.ptr, self.len);
	mandate_json_field_str(&spawn, "timeout", "1s");
	mandate_json_close(&spawn, '}');
	web = must_lookup("web").h;
	card = must_lookup("card").h;
	sp = must_lookup("spawner").h;

	rec("lookup_name_oob", mandate_raw_cap_lookup(0x7ffffff0u, 3, OUT));
	rec("lookup_out_oob", mandate_raw_cap_lookup(A(name), TOP - 1));
	rec("call_op_oob", mandate_raw_cap_call(web, TOP - 4, 5, A(get), OUT));
	rec("call_args_oob", mandate_raw_cap_call(web, A(fetch), 0x70000000u, 64, OUT));
	/* Effects whose result cannot be written: refused before they happen. */
	rec("fetch_out_oob", mandate_raw_cap_call(web, A(fetch), A(get), TOP - 2));
	rec("fetch_out_unaligned_end", mandate_raw_cap_call(web, A(fetch), A(get), 0x7ffffffeu));
	rec("charge_out_oob", mandate_raw_cap_call(card, A(charge_op), A(charge), TOP));
	rec("derive_out_oob", mandate_raw_cap_derive(web, A(derive), TOP - 3));
	rec("spawn_out_oob", mandate_raw_task_spawn(sp, mandate_addr(spawn.ptr), (uint32_t)spawn.len, TOP - 3));
	rec("spawn_req_oob", mandate_raw_task_spawn(sp, 0x7fff0000u, 100, OUT));
	rec("describe_out_oob", mandate_raw_cap_describe(web, TOP));
	rec("input_out_oob", mandate_raw_task_input(TOP - 1));
	rec("blob_create_oob", mandate_raw_blob_create(0x7fffff00u, 0x200, OUT));
	if (mandate_raw_blob_create(A("hello"), OUT) != MANDATE_ESUCCESS)
		__builtin_trap();
	blob = out;
	rec("blob_read_buf_oob", mandate_raw_blob_read(blob, 0, 0x7ffffff0u, 16, OUT));
	rec("blob_read_out_oob", mandate_raw_blob_read(blob, 0, A(name), TOP));
	rec("blob_len_out_oob", mandate_raw_blob_len(blob, TOP - 2));
	rec("last_error_oob", mandate_raw_last_error(TOP - 5, 100, OUT));
	rec("wait_out_oob", mandate_raw_task_wait(blob, TOP));

	/* The real end of memory: a page nobody uses, grown for the test. */
	if (__builtin_wasm_memory_grow(0, 1) == (size_t)-1)
		__builtin_trap();
	end = (uint32_t)(__builtin_wasm_memory_size(0) * 65536u);
	rec("fetch_out_straddles_end", mandate_raw_cap_call(web, A(fetch), A(get), end - 3));
	rec("fetch_out_at_end", mandate_raw_cap_call(web, A(fetch), A(get), end));
	rec("derive_req_straddles_end", mandate_raw_cap_derive(web, end - 4, 8, OUT));
	rec("blob_read_buf_straddles_end", mandate_raw_blob_read(blob, 0, end - 4, 5, OUT));
	rec("lookup_out_last_word", mandate_raw_cap_lookup(A(name), end - 4));
	note("last_word_is_web", *(volatile uint32_t *)(uintptr_t)(end - 4) == web ? "true" : "false");
	rec("blob_len_out_last_byte", mandate_raw_blob_len(blob, end - 1));

	/* No read-only memory: a literal and address 0 are the guest's own. */
	{
		static const char literal[] = "read-only?";
		/* Read back through volatile: the compiler would fold a const. */
		const volatile uint32_t *lp = (const volatile uint32_t *)(const void *)literal;
		rec("blob_len_out_literal", mandate_raw_blob_len(blob, mandate_addr(literal)));
		note("literal_overwritten", *lp == 5 ? "true" : "false"); /* len("hello") */
		rec("blob_len_out_null", mandate_raw_blob_len(blob, 0));
	}
	/* The header's wrappers refuse NULL before the kernel sees it. */
	{
		mandate_blob b;
		mandate_cap c;
		rec("wrapper_null_out", mandate_lookup("web", NULL));
		rec("wrapper_null_args", mandate_call((mandate_cap){web}, "fetch", NULL, 5, &b));
		rec("wrapper_null_op", mandate_call((mandate_cap){web}, NULL, get, sizeof get - 1, &b));
		rec("wrapper_null_req", mandate_derive((mandate_cap){web}, NULL, 3, &c));
	}
	/* The same calls with good pointers work. */
	rec("fetch_ok", mandate_raw_cap_call(web, A(fetch), A(get), OUT));
	mandate_json_close(&report, '}');
	if (report.oom || mandate_set_result(report.ptr, report.len) != MANDATE_ESUCCESS)
		return 1;
	return 0;
}
