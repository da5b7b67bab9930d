/*
 * The benefits desk in C: the same tool as ../guest/main.go, line for line
 * the same output. Its input says whose benefits to look up: empty for
 * everything the task may see (for an employee, their own record; for a
 * manager, their reports'), or a person's id for theirs. The tool asks;
 * the kernel decides which records that reaches.
 */
#include <unistd.h>

#include "mandate.h"

static mandate_str out = MANDATE_STR_INIT;

/* put_value appends a field's value as Go's %v prints what encoding/json
 * decoded into an any: strings unquoted, numbers, bools and null as
 * written (null and absent as <nil>). Go prints a float64, so a number
 * written as 1.50 or 1e3 would read 1.5 or 1000 there; the benefits data
 * has whole numbers only, which read the same. */
static void put_value(mandate_json fields, const char *key) {
	mandate_json v;
	if (!mandate_json_get(fields, key, &v) || mandate_json_type(v) == 'n') {
		mandate_str_puts(&out, "<nil>");
		return;
	}
	if (mandate_json_type(v) == '"') {
		mandate_json_unquote(v, &out);
		return;
	}
	mandate_str_append(&out, v.ptr, v.len);
}

/* show appends one record: "%-6s plan=%v dental=%v vision=%v deductible_left=%v\n". */
static void show(mandate_json r) {
	mandate_json owner, fields = {NULL, 0};
	size_t before = out.len;
	if (mandate_json_get(r, "owner", &owner))
		mandate_json_unquote(owner, &out);
	if (out.len - before < 6)
		mandate_str_pad(&out, ' ', 6 - (out.len - before));
	mandate_json_get(r, "fields", &fields);
	mandate_str_puts(&out, " plan=");
	put_value(fields, "plan");
	mandate_str_puts(&out, " dental=");
	put_value(fields, "dental");
	mandate_str_puts(&out, " vision=");
	put_value(fields, "vision");
	mandate_str_puts(&out, " deductible_left=");
	put_value(fields, "deductible_left");
	mandate_str_putc(&out, '\n');
}

/* denied appends "denied: WHAT: cap_call: ENAME: reason\n" for a failed call. */
static void denied(const char *what, mandate_errno e) {
	char msg[MANDATE_MAX_ERROR_LEN + 64];
	mandate_error_text(msg, sizeof msg, MANDATE_CAP_CALL, e);
	mandate_str_puts(&out, "denied: ");
	mandate_str_puts(&out, what);
	mandate_str_puts(&out, ": ");
	mandate_str_puts(&out, msg);
	mandate_str_putc(&out, '\n');
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

int main(void) {
	mandate_buf in = {NULL, 0};
	mandate_cap desk;
	mandate_blob res;
	mandate_buf b;
	mandate_errno e;
	const char *who;
	size_t wlen;

	(void)mandate_input_bytes(&in);
	who = in.ptr ? (const char *)in.ptr : "";
	wlen = in.len;
	while (wlen > 0 && is_space(who[0])) {
		who++;
		wlen--;
	}
	while (wlen > 0 && is_space(who[wlen - 1]))
		wlen--;
	char whobuf[wlen + 1];
	memcpy(whobuf, who, wlen);
	whobuf[wlen] = 0;

	if ((e = mandate_lookup("benefits", &desk)) != MANDATE_ESUCCESS) {
		char msg[MANDATE_MAX_ERROR_LEN + 64];
		size_t n = mandate_error_text(msg, sizeof msg, MANDATE_CAP_LOOKUP, e);
		write(2, "panic: ", 7);
		write(2, msg, n);
		write(2, "\n", 1);
		return 2;
	}
	if (wlen == 0) {
		e = mandate_call_str(desk, "query", "{\"where\":{},\"limit\":100}", &res);
		if (e != MANDATE_ESUCCESS) {
			denied("query", e);
		} else {
			mandate_json q, recs, r;
			size_t pos = 0, count = 0;
			b.ptr = NULL;
			b.len = 0;
			(void)mandate_blob_read_all(res, &b);
			q = mandate_json_view(b.ptr, b.len);
			if (mandate_json_get(q, "records", &recs)) {
				while (mandate_json_next(recs, &pos, &r)) {
					show(r);
					count++;
				}
			}
			mandate_str_putc(&out, '(');
			mandate_str_u64(&out, count);
			mandate_str_puts(&out, " record(s) visible to this task)\n");
			mandate_buf_free(&b);
		}
	} else {
		mandate_str arg = MANDATE_STR_INIT;
		mandate_json_open(&arg, '{');
		mandate_json_field_str(&arg, "owner", whobuf);
		mandate_json_close(&arg, '}');
		e = mandate_call(desk, "read", arg.ptr, arg.len, &res);
		mandate_str_free(&arg);
		if (e != MANDATE_ESUCCESS) {
			mandate_str what = MANDATE_STR_INIT;
			mandate_str_puts(&what, "read ");
			mandate_str_puts(&what, whobuf);
			mandate_str_puts(&what, "'s benefits");
			denied(what.ptr, e);
			mandate_str_free(&what);
		} else {
			b.ptr = NULL;
			b.len = 0;
			(void)mandate_blob_read_all(res, &b);
			show(mandate_json_view(b.ptr, b.len));
			mandate_buf_free(&b);
		}
	}
	/* The slice never includes the SSN, whatever the tool asks. */
	if (wlen > 0) {
		mandate_str arg = MANDATE_STR_INIT;
		mandate_json_open(&arg, '{');
		mandate_json_key(&arg, "fields");
		mandate_json_open(&arg, '[');
		mandate_json_elem_str(&arg, "ssn");
		mandate_json_close(&arg, ']');
		mandate_json_field_str(&arg, "owner", whobuf);
		mandate_json_close(&arg, '}');
		e = mandate_call(desk, "read", arg.ptr, arg.len, &res);
		mandate_str_free(&arg);
		if (e != MANDATE_ESUCCESS) {
			mandate_str_puts(&out, "denied: read ");
			mandate_str_puts(&out, whobuf);
			mandate_str_puts(&out, "'s ssn field: ");
			mandate_str_puts(&out, mandate_errno_name(e));
			mandate_str_putc(&out, '\n');
		}
	}
	mandate_buf_free(&in);
	if (mandate_set_result(out.ptr, out.len) != MANDATE_ESUCCESS)
		return 2;
	return 0;
}
