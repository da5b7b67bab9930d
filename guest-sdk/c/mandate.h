/*
 * mandate.h: the C SDK for Mandate guests (header only).
 *
 * A Mandate guest is a WebAssembly module (wasm32-wasi) that imports its
 * host functions from the module "mandate". This header declares them
 * (mandate_raw_*: exactly the ABI, every parameter a u32) and wraps them in
 * calls that are hard to misuse: distinct types for capabilities, blobs and
 * child tasks, lengths carried with every buffer, outputs written only on
 * success, and an errno (MANDATE_E*) returned by every call. See
 * guest-sdk/ABI.md for what each host call does and when it fails.
 *
 *	#include "mandate.h"
 *
 *	int main(void) {
 *		mandate_cap desk;
 *		mandate_blob res;
 *		mandate_buf b;
 *		if (mandate_lookup("benefits", &desk) != MANDATE_ESUCCESS)
 *			return 1;
 *		if (mandate_call_str(desk, "read", "{\"owner\":\"alice\"}", &res) == MANDATE_ESUCCESS &&
 *		    mandate_blob_read_all(res, &b) == MANDATE_ESUCCESS) {
 *			(void)mandate_set_result(b.ptr, b.len);
 *			mandate_buf_free(&b);
 *		}
 *		return 0;
 *	}
 *
 * Build with `mandate build DIR`, which runs
 *
 *	clang --target=wasm32-wasi -O2 -I<guest-sdk>/c -o OUT *.c
 *
 * (see guest-sdk/c/README.md). Everything here is static inline: a program
 * pays only for what it uses. The JSON and HTTP helpers need malloc only
 * where they say so.
 *
 * Logging: the ABI has no log call. A guest's stdout and stderr (WASI fd 1
 * and 2) are captured by the kernel, bounded, and shown by `mandate run`;
 * write to them as usual.
 *
 * No ambient network or files: a guest has no preopened directories, so
 * fopen and open of any path fail with errno ENOTCAPABLE ("Capabilities
 * insufficient"), whatever the manifest grants; and wasi-libc for
 * wasm32-wasi has no socket or connect at all (a guest calling them does
 * not link: "undefined symbol: socket"). Use the capabilities instead: HTTP
 * through a net capability (mandate_fetch), records through a data
 * capability (mandate_call_str with "read", "query" or "write"), a file of
 * the person's as the task's input (mandate_input_bytes: mandate run
 * --input FILE).
 */
#ifndef MANDATE_H
#define MANDATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MANDATE_MUST_USE __attribute__((warn_unused_result))
/* Outside WebAssembly (a host build of a guest's own unit tests) the
 * imports are plain extern declarations: the helpers below work, the host
 * calls do not link. */
#ifdef __wasm__
#define MANDATE_IMPORT(name) __attribute__((import_module("mandate"), import_name(name)))
#else
#define MANDATE_IMPORT(name)
#endif

/*
 * Errno values (guest-sdk/abi/errno.go, ABI.md "Errno values"): the result
 * of every host call, zero on success. They carry the prefix MANDATE_
 * because <errno.h> defines EFAULT, EINVAL and others with other values.
 */
typedef uint32_t mandate_errno;

enum {
	MANDATE_ESUCCESS = 0,    /* success */
	MANDATE_EBADHANDLE = 1,  /* the handle is not in the caller's table: invented, stale or foreign */
	MANDATE_EDENIED = 2,     /* the capability does not allow this (scope, op, widening) */
	MANDATE_EREVOKED = 3,    /* the capability or one of its ancestors was revoked */
	MANDATE_EEXPIRED = 4,    /* the capability has expired */
	MANDATE_EFLOW = 5,       /* the data's label may not flow to this sink */
	MANDATE_ELIMIT = 6,      /* a size, count or budget limit was reached */
	MANDATE_EFAULT = 7,      /* a pointer or length lies outside the guest's memory */
	MANDATE_EINVAL = 8,      /* a malformed argument (bad encoding, bad name) */
	MANDATE_EAPPROVAL = 9,   /* a required approval was refused */
	MANDATE_ENOTFOUND = 10,  /* no such capability name, or no input */
	MANDATE_ENOTSUP = 11,    /* the capability's kind has no such operation */
	MANDATE_EIO = 12,        /* the effect failed outside the kernel (upstream error) */
	MANDATE_ETIMEDOUT = 13,  /* the effect did not finish within its timeout */
	MANDATE_EWRONGTYPE = 14, /* a blob handle where a capability was expected, or the reverse */
	MANDATE_EINTERNAL = 15,  /* the kernel failed; the call was denied (fail closed) */
	MANDATE_ECHILD = 16,     /* the child task did not finish normally (failed, killed, out of limits) */
};

/* Limits the kernel applies (guest-sdk/abi/abi.go); a value over one is refused. */
#define MANDATE_MAX_OP_LEN 64u
#define MANDATE_MAX_NAME_LEN 256u
#define MANDATE_MAX_ARG_LEN (1u << 20)
#define MANDATE_MAX_BLOB_LEN (64u << 20)
#define MANDATE_MAX_ERROR_LEN 1024u

/* Host-call names, for messages (mandate_error_text). */
#define MANDATE_CAP_LOOKUP "cap_lookup"
#define MANDATE_CAP_CALL "cap_call"
#define MANDATE_CAP_DERIVE "cap_derive"
#define MANDATE_CAP_REVOKE "cap_revoke"
#define MANDATE_CAP_DESCRIBE "cap_describe"
#define MANDATE_HANDLE_DROP "handle_drop"
#define MANDATE_BLOB_CREATE "blob_create"
#define MANDATE_BLOB_LEN "blob_len"
#define MANDATE_BLOB_READ "blob_read"
#define MANDATE_TASK_INPUT "task_input"
#define MANDATE_TASK_RESULT "task_result"
#define MANDATE_LAST_ERROR "last_error"
#define MANDATE_TASK_SPAWN "task_spawn"
#define MANDATE_TASK_WAIT "task_wait"
#define MANDATE_TASK_KILL "task_kill"
#define MANDATE_PLAN_SUBMIT "plan_submit"
#define MANDATE_BLOB_PART "blob_part"

/*
 * Raw host calls: the ABI as it is, every pointer an offset into linear
 * memory. Prefer the wrappers below; these are for code that must hand the
 * kernel values no wrapper would (tests of the kernel itself).
 */
MANDATE_IMPORT("cap_lookup") uint32_t mandate_raw_cap_lookup(uint32_t name_ptr, uint32_t name_len, uint32_t out_handle_ptr);
MANDATE_IMPORT("cap_call") uint32_t mandate_raw_cap_call(uint32_t h, uint32_t op_ptr, uint32_t op_len, uint32_t arg_ptr, uint32_t arg_len, uint32_t out_handle_ptr);
MANDATE_IMPORT("cap_derive") uint32_t mandate_raw_cap_derive(uint32_t h, uint32_t req_ptr, uint32_t req_len, uint32_t out_handle_ptr);
MANDATE_IMPORT("cap_revoke") uint32_t mandate_raw_cap_revoke(uint32_t h);
MANDATE_IMPORT("cap_describe") uint32_t mandate_raw_cap_describe(uint32_t h, uint32_t out_handle_ptr);
MANDATE_IMPORT("handle_drop") uint32_t mandate_raw_handle_drop(uint32_t h);
MANDATE_IMPORT("blob_create") uint32_t mandate_raw_blob_create(uint32_t ptr, uint32_t len, uint32_t out_handle_ptr);
MANDATE_IMPORT("blob_len") uint32_t mandate_raw_blob_len(uint32_t h, uint32_t out_len_ptr);
MANDATE_IMPORT("blob_read") uint32_t mandate_raw_blob_read(uint32_t h, uint32_t offset, uint32_t buf_ptr, uint32_t buf_len, uint32_t out_n_ptr);
MANDATE_IMPORT("task_input") uint32_t mandate_raw_task_input(uint32_t out_handle_ptr);
MANDATE_IMPORT("task_result") uint32_t mandate_raw_task_result(uint32_t h);
MANDATE_IMPORT("last_error") uint32_t mandate_raw_last_error(uint32_t buf_ptr, uint32_t buf_len, uint32_t out_n_ptr);
MANDATE_IMPORT("task_spawn") uint32_t mandate_raw_task_spawn(uint32_t spawn_h, uint32_t req_ptr, uint32_t req_len, uint32_t out_task_ptr);
MANDATE_IMPORT("task_wait") uint32_t mandate_raw_task_wait(uint32_t task_h, uint32_t out_handle_ptr);
MANDATE_IMPORT("task_kill") uint32_t mandate_raw_task_kill(uint32_t task_h);
MANDATE_IMPORT("plan_submit") uint32_t mandate_raw_plan_submit(uint32_t req_ptr, uint32_t req_len);
MANDATE_IMPORT("blob_part") uint32_t mandate_raw_blob_part(uint32_t h, uint32_t path_ptr, uint32_t path_len, uint32_t pattern_ptr, uint32_t pattern_len, uint32_t out_handle_ptr);

/* mandate_addr is the linear-memory offset of p, as the raw calls take it. */
static inline uint32_t mandate_addr(const void *p) { return (uint32_t)(uintptr_t)p; }

/*
 * Handles. A handle names an entry in this task's own table; 0 is never a
 * handle. Capabilities, blobs and child tasks have distinct types, so
 * passing one where another is expected does not compile (the kernel would
 * say EWRONGTYPE). The field h is the raw handle.
 */
typedef uint32_t mandate_handle;
typedef struct { mandate_handle h; } mandate_cap;
typedef struct { mandate_handle h; } mandate_blob;
typedef struct { mandate_handle h; } mandate_task;

/* mandate_blob_is_zero reports whether b names no blob (a call that returned nothing). */
static inline int mandate_blob_is_zero(mandate_blob b) { return b.h == 0; }

/*
 * mandate_buf is bytes the guest owns, allocated with malloc: free them
 * with mandate_buf_free. The SDK keeps one NUL after the last byte (not
 * counted in len), so text can be used as a C string.
 */
typedef struct {
	uint8_t *ptr;
	size_t len;
} mandate_buf;

/* mandate_buf_free frees b's bytes and empties it; freeing an empty buf is a no-op. */
static inline void mandate_buf_free(mandate_buf *b) {
	if (b) {
		free(b->ptr);
		b->ptr = NULL;
		b->len = 0;
	}
}

/* mandate_errno_name returns the symbolic name of e, e.g. "EDENIED", or "Errno(?)" for a value the SDK does not know. */
static inline const char *mandate_errno_name(mandate_errno e) {
	static const char *const names[] = {
		"ESUCCESS", "EBADHANDLE", "EDENIED", "EREVOKED", "EEXPIRED", "EFLOW",
		"ELIMIT", "EFAULT", "EINVAL", "EAPPROVAL", "ENOTFOUND", "ENOTSUP",
		"EIO", "ETIMEDOUT", "EWRONGTYPE", "EINTERNAL", "ECHILD",
	};
	return e < sizeof names / sizeof names[0] ? names[e] : "Errno(?)";
}

/*
 * The wrappers. Each returns MANDATE_ESUCCESS or the kernel's errno and
 * writes its outputs only on success. A wrapper refuses, without calling
 * the kernel, what would make the kernel read or write the guest's own
 * address 0: a NULL pointer with a non-zero length, or a NULL output
 * (MANDATE_EFAULT, as the kernel would for an out-of-range pointer).
 */

/* mandate__bad reports whether (p, n) is a NULL pointer with a length. */
static inline int mandate__bad(const void *p, size_t n) { return p == NULL && n != 0; }

/*
 * mandate_lookup_n finds the capability the manifest granted under the name
 * (name, len) and writes its handle to out. Host call cap_lookup.
 * ENOTFOUND: no grant of that name (or its handle was dropped); ELIMIT:
 * len > MANDATE_MAX_NAME_LEN.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_lookup_n(const char *name, size_t len, mandate_cap *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (mandate__bad(name, len) || out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_cap_lookup(mandate_addr(name), (uint32_t)len, mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/* mandate_lookup is mandate_lookup_n for a NUL-terminated name. */
MANDATE_MUST_USE static inline mandate_errno mandate_lookup(const char *name, mandate_cap *out) {
	if (name == NULL)
		return MANDATE_EFAULT;
	return mandate_lookup_n(name, strlen(name), out);
}

/*
 * mandate_call performs operation op (NUL-terminated, e.g. "fetch") on
 * capability c with the argument document (args, args_len), a JSON object
 * (ABI.md, per kind). On success it writes the result blob to out: zero
 * (mandate_blob_is_zero) when the operation returns nothing. Host call
 * cap_call; its errnos are ABI.md's (EDENIED outside the scope, EFLOW, ...).
 */
MANDATE_MUST_USE static inline mandate_errno mandate_call(mandate_cap c, const char *op, const char *args, size_t args_len, mandate_blob *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (op == NULL || mandate__bad(args, args_len) || out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_cap_call(c.h, mandate_addr(op), (uint32_t)strlen(op), mandate_addr(args), (uint32_t)args_len, mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/* mandate_call_str is mandate_call with a NUL-terminated argument document. */
MANDATE_MUST_USE static inline mandate_errno mandate_call_str(mandate_cap c, const char *op, const char *args, mandate_blob *out) {
	if (args == NULL)
		return MANDATE_EFAULT;
	return mandate_call(c, op, args, strlen(args), out);
}

/*
 * mandate_derive asks for a capability narrower than c, as the request
 * (req, req_len) says (a JSON object: the kind's narrowing fields, and
 * optionally "when", "approve_when", "max_uses", "budget"), and writes its
 * handle to out. Host call cap_derive. EDENIED: the request widens c
 * (refused, never clamped); EINVAL: it does not decode.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_derive(mandate_cap c, const char *req, size_t req_len, mandate_cap *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (mandate__bad(req, req_len) || out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_cap_derive(c.h, mandate_addr(req), (uint32_t)req_len, mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/* mandate_derive_str is mandate_derive with a NUL-terminated request. */
MANDATE_MUST_USE static inline mandate_errno mandate_derive_str(mandate_cap c, const char *req, mandate_cap *out) {
	if (req == NULL)
		return MANDATE_EFAULT;
	return mandate_derive(c, req, strlen(req), out);
}

/*
 * mandate_revoke revokes c and everything derived from it, in every task;
 * later calls on any of them fail EREVOKED. Host call cap_revoke.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_revoke(mandate_cap c) { return mandate_raw_cap_revoke(c.h); }

/* mandate_describe_blob writes to out a new blob holding c's JSON description. Host call cap_describe. */
MANDATE_MUST_USE static inline mandate_errno mandate_describe_blob(mandate_cap c, mandate_blob *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_cap_describe(c.h, mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/* mandate_cap_drop removes c from this task's table (it revokes nothing). Host call handle_drop. */
MANDATE_MUST_USE static inline mandate_errno mandate_cap_drop(mandate_cap c) { return mandate_raw_handle_drop(c.h); }

/* mandate_blob_drop removes b from this task's table. Host call handle_drop. */
MANDATE_MUST_USE static inline mandate_errno mandate_blob_drop(mandate_blob b) { return mandate_raw_handle_drop(b.h); }

/*
 * mandate_blob_create hands (data, len) to the kernel as a new blob,
 * labelled with this task's label, and writes its handle to out. Host call
 * blob_create. ELIMIT: len > MANDATE_MAX_BLOB_LEN or the table is full.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_blob_create(const void *data, size_t len, mandate_blob *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (mandate__bad(data, len) || out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_blob_create(mandate_addr(data), (uint32_t)len, mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/* mandate_blob_len writes b's size to out; it does not read b (the label stays). Host call blob_len. */
MANDATE_MUST_USE static inline mandate_errno mandate_blob_len(mandate_blob b, size_t *out) {
	uint32_t n = 0;
	mandate_errno e;
	if (out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_blob_len(b.h, mandate_addr(&n));
	if (e == MANDATE_ESUCCESS)
		*out = n;
	return e;
}

/*
 * mandate_blob_read_at copies up to len bytes of b from offset into buf and
 * writes how many to got (0 at the end). Reading raises this task's label
 * to include b's. Host call blob_read. EINVAL: offset past the end; EFLOW:
 * b's label is above this task's clearance.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_blob_read_at(mandate_blob b, size_t offset, void *buf, size_t len, size_t *got) {
	uint32_t n = 0;
	mandate_errno e;
	if (mandate__bad(buf, len) || got == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_blob_read(b.h, (uint32_t)offset, mandate_addr(buf), (uint32_t)len, mandate_addr(&n));
	if (e == MANDATE_ESUCCESS)
		*got = n;
	return e;
}

/*
 * mandate_blob_read_all reads the whole of b into out (malloc'd, NUL
 * after the last byte; free with mandate_buf_free). ELIMIT when malloc
 * fails. On failure out is left empty.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_blob_read_all(mandate_blob b, mandate_buf *out) {
	size_t n = 0, off = 0, got = 0;
	uint8_t *p;
	mandate_errno e;
	if (out == NULL)
		return MANDATE_EFAULT;
	out->ptr = NULL;
	out->len = 0;
	if ((e = mandate_blob_len(b, &n)) != MANDATE_ESUCCESS)
		return e;
	if ((p = (uint8_t *)malloc(n + 1)) == NULL)
		return MANDATE_ELIMIT;
	while (off < n) {
		if ((e = mandate_blob_read_at(b, off, p + off, n - off, &got)) != MANDATE_ESUCCESS) {
			free(p);
			return e;
		}
		if (got == 0)
			break;
		off += got;
	}
	p[off] = 0;
	out->ptr = p;
	out->len = off;
	return MANDATE_ESUCCESS;
}

/*
 * mandate_blob_part writes to out a new blob of one part of b: the JSON
 * value at path (NUL-terminated, "" for none), the capture of pattern (a
 * regular expression with one capture group, RE2 syntax; "" for none) in
 * the string at path, or with path "" in b's text (a fetched response's
 * body). The part is a JSON value (a capture, a JSON string) labelled
 * with that part's label only: reading it raises this task's label by the
 * part's, not the whole blob's. Host call blob_part. EINVAL: no such
 * value, or a pattern that does not match exactly once; ELIMIT: a path or
 * pattern over its bound.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_blob_part(mandate_blob b, const char *path, const char *pattern, mandate_blob *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (out == NULL)
		return MANDATE_EFAULT;
	if (path == NULL)
		path = "";
	if (pattern == NULL)
		pattern = "";
	e = mandate_raw_blob_part(b.h, mandate_addr(path), (uint32_t)strlen(path), mandate_addr(pattern), (uint32_t)strlen(pattern), mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/*
 * mandate_blob_read_part reads one part of b (mandate_blob_part) into out,
 * as mandate_blob_read_all, and drops the part's handle: raising this
 * task's label by the part's label only.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_blob_read_part(mandate_blob b, const char *path, const char *pattern, mandate_buf *out) {
	mandate_blob part = {0};
	mandate_errno e;
	if (out == NULL)
		return MANDATE_EFAULT;
	out->ptr = NULL;
	out->len = 0;
	if ((e = mandate_blob_part(b, path, pattern, &part)) != MANDATE_ESUCCESS)
		return e;
	e = mandate_blob_read_all(part, out);
	(void)mandate_raw_handle_drop(part.h);
	return e;
}

/* mandate_input writes to out a new handle to this task's input blob. Host call task_input. ENOTFOUND: no input. */
MANDATE_MUST_USE static inline mandate_errno mandate_input(mandate_blob *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_task_input(mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/*
 * mandate_input_bytes reads this task's input into out (see
 * mandate_blob_read_all); no input is success with out empty.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_input_bytes(mandate_buf *out) {
	mandate_blob in;
	mandate_errno e;
	if (out == NULL)
		return MANDATE_EFAULT;
	out->ptr = NULL;
	out->len = 0;
	e = mandate_input(&in);
	if (e == MANDATE_ENOTFOUND)
		return MANDATE_ESUCCESS;
	if (e != MANDATE_ESUCCESS)
		return e;
	e = mandate_blob_read_all(in, out);
	(void)mandate_blob_drop(in);
	return e;
}

/* mandate_set_result_blob makes b this task's result (the last call wins). Host call task_result. */
MANDATE_MUST_USE static inline mandate_errno mandate_set_result_blob(mandate_blob b) { return mandate_raw_task_result(b.h); }

/* mandate_set_result makes (data, len) this task's result: blob_create, then task_result. */
MANDATE_MUST_USE static inline mandate_errno mandate_set_result(const void *data, size_t len) {
	mandate_blob b;
	mandate_errno e = mandate_blob_create(data, len, &b);
	if (e != MANDATE_ESUCCESS)
		return e;
	return mandate_set_result_blob(b);
}

/*
 * mandate_last_error copies the kernel's reason for this task's last failed
 * call into buf (at most cap-1 bytes, and at most MANDATE_MAX_ERROR_LEN),
 * always NUL-terminates it when cap > 0, and returns its length (0 if no
 * call failed, or when the reason cannot be read). Host call last_error.
 */
static inline size_t mandate_last_error(char *buf, size_t cap) {
	uint32_t n = 0;
	if (buf == NULL || cap == 0)
		return 0;
	if (mandate_raw_last_error(mandate_addr(buf), (uint32_t)(cap - 1), mandate_addr(&n)) != MANDATE_ESUCCESS || n > cap - 1)
		n = 0;
	buf[n] = 0;
	return n;
}

/*
 * mandate_error_text writes "CALL: ENAME: reason" (the Go SDK's Error text;
 * ": reason" only when the kernel gave one) into buf, NUL-terminated and
 * truncated to cap-1 bytes, and returns its length. Call it right after the
 * failed call e came from, with that call's name (MANDATE_CAP_CALL, ...):
 * the reason is the kernel's for the last failed call.
 */
static inline size_t mandate_error_text(char *buf, size_t cap, const char *call, mandate_errno e) {
	char reason[MANDATE_MAX_ERROR_LEN + 1];
	size_t rn = mandate_last_error(reason, sizeof reason), n = 0;
	const char *parts[5];
	size_t i, np = 0;
	if (buf == NULL || cap == 0)
		return 0;
	parts[np++] = call ? call : "?";
	parts[np++] = ": ";
	parts[np++] = mandate_errno_name(e);
	if (rn > 0) {
		parts[np++] = ": ";
		parts[np++] = reason;
	}
	for (i = 0; i < np; i++) {
		size_t l = strlen(parts[i]);
		if (l > cap - 1 - n)
			l = cap - 1 - n;
		memcpy(buf + n, parts[i], l);
		n += l;
	}
	buf[n] = 0;
	return n;
}

/*
 * mandate_spawn starts a child task under the spawn capability sc with the
 * request (req, req_len), an abi.SpawnRequest as JSON:
 *
 *	{"module":"sha256:<hex>","input":5,"caps":[{"handle":3,"name":"search","narrow":{...}}],
 *	 "memory":"32MiB","timeout":"10s"}
 *
 * and writes the child's handle to out. Host call task_spawn. EDENIED: the
 * module is not allowed, or a narrowing widens; ELIMIT: depth, children or
 * tasks; EFLOW: clearance.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_spawn(mandate_cap sc, const char *req, size_t req_len, mandate_task *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (mandate__bad(req, req_len) || out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_task_spawn(sc.h, mandate_addr(req), (uint32_t)req_len, mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/*
 * mandate_wait waits for child t to end and writes its result blob to out
 * (zero when it set none). Host call task_wait. ECHILD: the child failed,
 * was killed or ran out of a limit; ETIMEDOUT: this task's deadline came
 * first.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_wait(mandate_task t, mandate_blob *out) {
	uint32_t h = 0;
	mandate_errno e;
	if (out == NULL)
		return MANDATE_EFAULT;
	e = mandate_raw_task_wait(t.h, mandate_addr(&h));
	if (e == MANDATE_ESUCCESS)
		out->h = h;
	return e;
}

/* mandate_kill stops child t; its mandate_wait then fails ECHILD. Host call task_kill. */
MANDATE_MUST_USE static inline mandate_errno mandate_kill(mandate_task t) { return mandate_raw_task_kill(t.h); }

/* mandate_task_drop removes t from this task's table (the child keeps running). Host call handle_drop. */
MANDATE_MUST_USE static inline mandate_errno mandate_task_drop(mandate_task t) { return mandate_raw_handle_drop(t.h); }

/*
 * mandate_submit_plan asks the person, once, to approve a plan: req is its
 * JSON document (abi.Plan), {"items":[{"cap":H,"op":"OP","args":{...}},...]},
 * each item the exact call (capability handle, operation, argument
 * document) the task will make later. On success each later call whose
 * effect is exactly one unused item, and would need a yes, is allowed
 * without a question, once. Host call plan_submit. EAPPROVAL: the person
 * said no; EDENIED: an item is refused as the call would be, or its
 * capability does not allow plans (approve_plans).
 */
MANDATE_MUST_USE static inline mandate_errno mandate_submit_plan(const char *req, size_t req_len) {
	if (mandate__bad(req, req_len))
		return MANDATE_EFAULT;
	return mandate_raw_plan_submit(mandate_addr(req), (uint32_t)req_len);
}

/*
 * mandate_str is a growable byte string for building argument documents
 * and results. Start from MANDATE_STR_INIT (or zeroed memory); free with
 * mandate_str_free. A failed allocation sets oom, after which appends are
 * no-ops: check oom once at the end. ptr is NUL-terminated when non-NULL.
 */
typedef struct {
	char *ptr;
	size_t len, cap;
	int oom;
} mandate_str;

#define MANDATE_STR_INIT {NULL, 0, 0, 0}

/* mandate_str_free frees s's bytes and resets it to empty. */
static inline void mandate_str_free(mandate_str *s) {
	free(s->ptr);
	s->ptr = NULL;
	s->len = s->cap = 0;
	s->oom = 0;
}

/* mandate_str_grow makes room for n more bytes (and the NUL); 0 on failure (oom set). */
static inline int mandate_str_grow(mandate_str *s, size_t n) {
	size_t want;
	char *p;
	if (s->oom)
		return 0;
	if (n > SIZE_MAX - s->len - 1) {
		s->oom = 1;
		return 0;
	}
	want = s->len + n + 1;
	if (want <= s->cap)
		return 1;
	if (s->cap > SIZE_MAX / 2 || want > s->cap * 2)
		s->cap = want;
	else
		s->cap *= 2;
	if (s->cap < 64)
		s->cap = 64;
	if ((p = (char *)realloc(s->ptr, s->cap)) == NULL) {
		s->oom = 1;
		return 0;
	}
	s->ptr = p;
	return 1;
}

/* mandate_str_append appends (p, n). */
static inline void mandate_str_append(mandate_str *s, const void *p, size_t n) {
	if (n == 0 || !mandate_str_grow(s, n))
		return;
	memcpy(s->ptr + s->len, p, n);
	s->len += n;
	s->ptr[s->len] = 0;
}

/* mandate_str_puts appends the NUL-terminated text t. */
static inline void mandate_str_puts(mandate_str *s, const char *t) { mandate_str_append(s, t, strlen(t)); }

/* mandate_str_putc appends one byte. */
static inline void mandate_str_putc(mandate_str *s, char c) { mandate_str_append(s, &c, 1); }

/* mandate_str_pad appends n copies of c (for column layouts). */
static inline void mandate_str_pad(mandate_str *s, char c, size_t n) {
	while (n-- > 0)
		mandate_str_putc(s, c);
}

/* mandate_str_u64 appends v in decimal. */
static inline void mandate_str_u64(mandate_str *s, uint64_t v) {
	char b[20];
	size_t i = sizeof b;
	do {
		b[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	mandate_str_append(s, b + i, sizeof b - i);
}

/* mandate_str_i64 appends v in decimal. */
static inline void mandate_str_i64(mandate_str *s, int64_t v) {
	if (v < 0) {
		mandate_str_putc(s, '-');
		mandate_str_u64(s, (uint64_t)0 - (uint64_t)v);
		return;
	}
	mandate_str_u64(s, (uint64_t)v);
}

/*
 * JSON output. mandate_json_string appends (p, n) as a JSON string: quoted,
 * with '"', '\\' and control characters escaped (and <, >, & as \u00XX, as
 * Go's encoding/json does, so a document never carries markup). Bytes that
 * are not valid UTF-8 are passed through; the kernel's strict decoder
 * refuses them (EINVAL), so send only UTF-8 text.
 */
static inline void mandate_json_string(mandate_str *s, const char *p, size_t n) {
	static const char hex[] = "0123456789abcdef";
	size_t i;
	mandate_str_putc(s, '"');
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		switch (c) {
		case '"': mandate_str_puts(s, "\\\""); break;
		case '\\': mandate_str_puts(s, "\\\\"); break;
		case '\n': mandate_str_puts(s, "\\n"); break;
		case '\r': mandate_str_puts(s, "\\r"); break;
		case '\t': mandate_str_puts(s, "\\t"); break;
		default:
			if (c < 0x20 || c == '<' || c == '>' || c == '&') {
				char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
				mandate_str_append(s, u, sizeof u);
			} else {
				mandate_str_putc(s, (char)c);
			}
		}
	}
	mandate_str_putc(s, '"');
}

/* mandate_json_cstring is mandate_json_string for NUL-terminated text. */
static inline void mandate_json_cstring(mandate_str *s, const char *t) { mandate_json_string(s, t, strlen(t)); }

/*
 * Objects and arrays: mandate_json_open(s, '{') ... mandate_json_close(s,
 * '}'). The field and element helpers add the separating comma themselves
 * (after anything but an opening bracket), so
 *
 *	mandate_json_open(&s, '{');
 *	mandate_json_field_str(&s, "owner", who);
 *	mandate_json_key(&s, "fields");
 *	mandate_json_open(&s, '[');
 *	mandate_json_elem_str(&s, "ssn");
 *	mandate_json_close(&s, ']');
 *	mandate_json_close(&s, '}');
 *
 * gives {"owner":"bob","fields":["ssn"]}.
 */
static inline void mandate_json_sep(mandate_str *s) {
	if (s->len > 0 && s->ptr[s->len - 1] != '{' && s->ptr[s->len - 1] != '[' && s->ptr[s->len - 1] != ':')
		mandate_str_putc(s, ',');
}

/* mandate_json_open appends '{' or '[' (with a comma before it when it is an element). */
static inline void mandate_json_open(mandate_str *s, char bracket) {
	mandate_json_sep(s);
	mandate_str_putc(s, bracket);
}

/* mandate_json_close appends '}' or ']'. */
static inline void mandate_json_close(mandate_str *s, char bracket) { mandate_str_putc(s, bracket); }

/* mandate_json_key appends "key": (with a comma before it when needed); the value follows. */
static inline void mandate_json_key(mandate_str *s, const char *key) {
	mandate_json_sep(s);
	mandate_json_cstring(s, key);
	mandate_str_putc(s, ':');
}

/* mandate_json_field_str appends "key":"value". */
static inline void mandate_json_field_str(mandate_str *s, const char *key, const char *value) {
	mandate_json_key(s, key);
	mandate_json_cstring(s, value);
}

/* mandate_json_field_int appends "key":value. */
static inline void mandate_json_field_int(mandate_str *s, const char *key, int64_t value) {
	mandate_json_key(s, key);
	mandate_str_i64(s, value);
}

/* mandate_json_field_raw appends "key":json, json being a JSON value the caller vouches for. */
static inline void mandate_json_field_raw(mandate_str *s, const char *key, const char *json) {
	mandate_json_key(s, key);
	mandate_str_puts(s, json);
}

/* mandate_json_elem_str appends "value" as an array element. */
static inline void mandate_json_elem_str(mandate_str *s, const char *value) {
	mandate_json_sep(s);
	mandate_json_cstring(s, value);
}

/* mandate_json_elem_int appends value as an array element. */
static inline void mandate_json_elem_int(mandate_str *s, int64_t value) {
	mandate_json_sep(s);
	mandate_str_i64(s, value);
}

/* mandate_base64 appends (p, n) in standard base64 with padding (how []byte fields such as a fetch's "body" travel). */
static inline void mandate_base64(mandate_str *s, const void *p, size_t n) {
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *b = (const unsigned char *)p;
	size_t i;
	for (i = 0; i + 2 < n; i += 3) {
		char q[4] = {tab[b[i] >> 2], tab[(b[i] & 3) << 4 | b[i + 1] >> 4], tab[(b[i + 1] & 15) << 2 | b[i + 2] >> 6], tab[b[i + 2] & 63]};
		mandate_str_append(s, q, 4);
	}
	if (n - i == 1) {
		char q[4] = {tab[b[i] >> 2], tab[(b[i] & 3) << 4], '=', '='};
		mandate_str_append(s, q, 4);
	} else if (n - i == 2) {
		char q[4] = {tab[b[i] >> 2], tab[(b[i] & 3) << 4 | b[i + 1] >> 4], tab[(b[i + 1] & 15) << 2], '='};
		mandate_str_append(s, q, 4);
	}
}

/*
 * JSON input: a bounded reader over a document the guest holds (a result
 * blob). mandate_json is a view of one JSON value; every function checks
 * every length against the view, so a hostile document yields "not found"
 * (0), never a read out of bounds. Nesting is bounded by
 * MANDATE_JSON_MAX_DEPTH.
 */
typedef struct {
	const char *ptr;
	size_t len;
} mandate_json;

#define MANDATE_JSON_MAX_DEPTH 64

/* mandate_json_view views (p, n), surrounding white space trimmed. */
static inline mandate_json mandate_json_view(const void *p, size_t n) {
	mandate_json v;
	const char *c = (const char *)p;
	while (n > 0 && (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r')) {
		c++;
		n--;
	}
	while (n > 0 && (c[n - 1] == ' ' || c[n - 1] == '\t' || c[n - 1] == '\n' || c[n - 1] == '\r'))
		n--;
	v.ptr = c;
	v.len = n;
	return v;
}

/* mandate__json_ws skips white space from i. */
static inline size_t mandate__json_ws(const char *p, size_t n, size_t i) {
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	return i;
}

/*
 * mandate__json_skip returns the index just past the value starting at i
 * (after white space), or 0 when there is none (a malformed document).
 * Values never start at 0 after a skip, so 0 is free to mean failure.
 */
static inline size_t mandate__json_skip(const char *p, size_t n, size_t i, int depth) {
	i = mandate__json_ws(p, n, i);
	if (i >= n || depth > MANDATE_JSON_MAX_DEPTH)
		return 0;
	switch (p[i]) {
	case '"':
		for (i++; i < n; i++) {
			if (p[i] == '\\')
				i++;
			else if (p[i] == '"')
				return i + 1;
		}
		return 0;
	case '{':
	case '[': {
		char close = p[i] == '{' ? '}' : ']';
		i = mandate__json_ws(p, n, i + 1);
		if (i < n && p[i] == close)
			return i + 1;
		for (;;) {
			if (close == '}') {
				i = mandate__json_ws(p, n, i);
				if (i >= n || p[i] != '"' || (i = mandate__json_skip(p, n, i, depth + 1)) == 0)
					return 0;
				i = mandate__json_ws(p, n, i);
				if (i >= n || p[i] != ':')
					return 0;
				i++;
			}
			if ((i = mandate__json_skip(p, n, i, depth + 1)) == 0)
				return 0;
			i = mandate__json_ws(p, n, i);
			if (i >= n)
				return 0;
			if (p[i] == close)
				return i + 1;
			if (p[i] != ',')
				return 0;
			i++;
		}
	}
	default: {
		size_t j = i;
		while (j < n && ((p[j] >= 'a' && p[j] <= 'z') || (p[j] >= '0' && p[j] <= '9') || p[j] == '-' || p[j] == '+' || p[j] == '.' || p[j] == 'E'))
			j++;
		return j > i ? j : 0;
	}
	}
}

/* mandate_json_type is the first byte of v's value: '{', '[', '"', 't'/'f' (bool), 'n' (null), a digit or '-' (number), or 0 when v is empty. */
static inline char mandate_json_type(mandate_json v) { return v.len > 0 ? v.ptr[0] : 0; }

/*
 * mandate_json_get finds member key of object v and views its value in
 * out; it returns 1 when found, 0 when v is not an object, is malformed or
 * has no such member. Keys are compared as written (escapes unresolved).
 */
static inline int mandate_json_get(mandate_json v, const char *key, mandate_json *out) {
	const char *p = v.ptr;
	size_t n = v.len, i, klen = strlen(key);
	if (n == 0 || p[0] != '{')
		return 0;
	i = mandate__json_ws(p, n, 1);
	if (i < n && p[i] == '}')
		return 0;
	for (;;) {
		size_t ks, ke, vs, ve;
		i = mandate__json_ws(p, n, i);
		if (i >= n || p[i] != '"' || (ke = mandate__json_skip(p, n, i, 1)) == 0)
			return 0;
		ks = i + 1;
		i = mandate__json_ws(p, n, ke);
		if (i >= n || p[i] != ':')
			return 0;
		vs = mandate__json_ws(p, n, i + 1);
		if ((ve = mandate__json_skip(p, n, vs, 1)) == 0)
			return 0;
		if (ke - 1 - ks == klen && memcmp(p + ks, key, klen) == 0) {
			out->ptr = p + vs;
			out->len = ve - vs;
			return 1;
		}
		i = mandate__json_ws(p, n, ve);
		if (i >= n || p[i] != ',')
			return 0;
		i++;
	}
}

/*
 * mandate_json_next iterates the elements of array v: start with *pos = 0;
 * each call views the next element in out and returns 1, or returns 0 at
 * the end (or when v is not an array or is malformed).
 */
static inline int mandate_json_next(mandate_json v, size_t *pos, mandate_json *out) {
	const char *p = v.ptr;
	size_t n = v.len, i = *pos, s, e;
	if (n == 0 || p[0] != '[')
		return 0;
	if (i == 0) {
		i = mandate__json_ws(p, n, 1);
		if (i < n && p[i] == ']')
			return 0;
	} else {
		i = mandate__json_ws(p, n, i);
		if (i >= n || p[i] != ',')
			return 0;
		i++;
	}
	s = mandate__json_ws(p, n, i);
	if ((e = mandate__json_skip(p, n, s, 1)) == 0)
		return 0;
	out->ptr = p + s;
	out->len = e - s;
	*pos = e;
	return 1;
}

/*
 * mandate_json_unquote appends the text of JSON string v to s, escapes
 * resolved (\uXXXX as UTF-8, surrogate pairs joined); it returns 0 when v
 * is not a well-formed string.
 */
static inline int mandate_json_unquote(mandate_json v, mandate_str *s) {
	const char *p = v.ptr;
	size_t n = v.len, i;
	if (n < 2 || p[0] != '"' || p[n - 1] != '"')
		return 0;
	for (i = 1; i < n - 1; i++) {
		char c = p[i];
		uint32_t r = 0;
		int k;
		if (c != '\\') {
			mandate_str_putc(s, c);
			continue;
		}
		if (++i >= n - 1)
			return 0;
		switch (p[i]) {
		case '"': case '\\': case '/': mandate_str_putc(s, p[i]); continue;
		case 'b': mandate_str_putc(s, '\b'); continue;
		case 'f': mandate_str_putc(s, '\f'); continue;
		case 'n': mandate_str_putc(s, '\n'); continue;
		case 'r': mandate_str_putc(s, '\r'); continue;
		case 't': mandate_str_putc(s, '\t'); continue;
		case 'u': break;
		default: return 0;
		}
		for (k = 0; k < 4; k++) {
			char h;
			if (++i >= n - 1)
				return 0;
			h = p[i];
			r <<= 4;
			if (h >= '0' && h <= '9') r |= (uint32_t)(h - '0');
			else if (h >= 'a' && h <= 'f') r |= (uint32_t)(h - 'a' + 10);
			else if (h >= 'A' && h <= 'F') r |= (uint32_t)(h - 'A' + 10);
			else return 0;
		}
		if (r >= 0xd800 && r < 0xdc00 && i + 6 < n - 1 && p[i + 1] == '\\' && p[i + 2] == 'u') {
			mandate_json lo = {p + i + 1, 6};
			uint32_t r2 = 0;
			for (k = 2; k < 6; k++) {
				char h = lo.ptr[k];
				r2 <<= 4;
				if (h >= '0' && h <= '9') r2 |= (uint32_t)(h - '0');
				else if (h >= 'a' && h <= 'f') r2 |= (uint32_t)(h - 'a' + 10);
				else if (h >= 'A' && h <= 'F') r2 |= (uint32_t)(h - 'A' + 10);
				else r2 = 0xffffffff;
			}
			if (r2 >= 0xdc00 && r2 < 0xe000) {
				r = 0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00);
				i += 6;
			}
		}
		if (r >= 0xd800 && r < 0xe000)
			r = 0xfffd;
		if (r < 0x80) {
			mandate_str_putc(s, (char)r);
		} else if (r < 0x800) {
			char u[2] = {(char)(0xc0 | r >> 6), (char)(0x80 | (r & 63))};
			mandate_str_append(s, u, 2);
		} else if (r < 0x10000) {
			char u[3] = {(char)(0xe0 | r >> 12), (char)(0x80 | (r >> 6 & 63)), (char)(0x80 | (r & 63))};
			mandate_str_append(s, u, 3);
		} else {
			char u[4] = {(char)(0xf0 | r >> 18), (char)(0x80 | (r >> 12 & 63)), (char)(0x80 | (r >> 6 & 63)), (char)(0x80 | (r & 63))};
			mandate_str_append(s, u, 4);
		}
	}
	return 1;
}

/*
 * The net kind. A fetch's argument is an abi.HTTPRequest as JSON; its
 * result blob an abi.HTTPResponse in the binary encoding
 *
 *	"MHR1" status:uvarint nheader:uvarint { name:bytes value:bytes }* body:bytes
 *
 * (bytes: a uvarint length, then that many bytes).
 */

/*
 * mandate_http_request appends a fetch argument to s:
 * {"method":M,"url":U} plus "body" (base64) when body_len > 0. Add
 * "header", "body_blob" or "splice" members yourself by building the
 * object with the mandate_json_* helpers instead.
 */
static inline void mandate_http_request(mandate_str *s, const char *method, const char *url, const void *body, size_t body_len) {
	mandate_json_open(s, '{');
	mandate_json_field_str(s, "method", method);
	mandate_json_field_str(s, "url", url);
	if (body_len > 0) {
		mandate_json_key(s, "body");
		mandate_str_putc(s, '"');
		mandate_base64(s, body, body_len);
		mandate_str_putc(s, '"');
	}
	mandate_json_close(s, '}');
}

/*
 * mandate_http_response is a decoded fetch result: views into the bytes it
 * was decoded from (which must outlive it). Iterate the headers with
 * mandate_http_header_next.
 */
typedef struct {
	uint32_t status;
	uint32_t nheader;
	const uint8_t *headers; /* the encoded header pairs */
	size_t headers_len;
	const uint8_t *body;
	size_t body_len;
} mandate_http_response;

/* mandate__uvarint reads a uvarint at *i of (p, n); 0 on a malformed or overlong one. */
static inline int mandate__uvarint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
	uint64_t x = 0;
	unsigned shift = 0;
	while (*i < n && shift < 64) {
		uint8_t b = p[(*i)++];
		x |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80) {
			*v = x;
			return 1;
		}
		shift += 7;
	}
	return 0;
}

/* mandate__bytes reads one length-prefixed byte string at *i. */
static inline int mandate__bytes(const uint8_t *p, size_t n, size_t *i, const uint8_t **s, size_t *len) {
	uint64_t l;
	if (!mandate__uvarint(p, n, i, &l) || l > n - *i)
		return 0;
	*s = p + *i;
	*len = (size_t)l;
	*i += (size_t)l;
	return 1;
}

/*
 * mandate_http_decode decodes a fetch result (p, n) into r; it returns 0
 * (MANDATE_EINVAL-worthy) when the encoding is malformed, with every length
 * checked against what remains.
 */
static inline int mandate_http_decode(const void *data, size_t n, mandate_http_response *r) {
	const uint8_t *p = (const uint8_t *)data;
	size_t i = 4, hs, k;
	uint64_t status, nh;
	if (n < 4 || memcmp(p, "MHR1", 4) != 0)
		return 0;
	if (!mandate__uvarint(p, n, &i, &status) || !mandate__uvarint(p, n, &i, &nh) || status > 999 || nh > 128)
		return 0;
	hs = i;
	for (k = 0; k < nh * 2; k++) {
		const uint8_t *s;
		size_t l;
		if (!mandate__bytes(p, n, &i, &s, &l))
			return 0;
	}
	r->status = (uint32_t)status;
	r->nheader = (uint32_t)nh;
	r->headers = p + hs;
	r->headers_len = i - hs;
	if (!mandate__bytes(p, n, &i, &r->body, &r->body_len) || i != n)
		return 0;
	return 1;
}

/*
 * mandate_http_header_next iterates r's headers: start with *pos = 0; each
 * call views the next name and value and returns 1, or returns 0 at the end.
 */
static inline int mandate_http_header_next(const mandate_http_response *r, size_t *pos, mandate_json *name, mandate_json *value) {
	const uint8_t *s;
	size_t l;
	if (*pos >= r->headers_len)
		return 0;
	if (!mandate__bytes(r->headers, r->headers_len, pos, &s, &l))
		return 0;
	name->ptr = (const char *)s;
	name->len = l;
	if (!mandate__bytes(r->headers, r->headers_len, pos, &s, &l))
		return 0;
	value->ptr = (const char *)s;
	value->len = l;
	return 1;
}

/*
 * mandate_fetch performs a fetch on the net capability c: method and url
 * (a path with query, resolved against c's origin), an optional body. On
 * success it reads the response into raw (free with mandate_buf_free) and
 * decodes it into resp, whose views point into raw. EINVAL when the result
 * does not decode.
 */
MANDATE_MUST_USE static inline mandate_errno mandate_fetch(mandate_cap c, const char *method, const char *url, const void *body, size_t body_len,
                                                           mandate_http_response *resp, mandate_buf *raw) {
	mandate_str req = MANDATE_STR_INIT;
	mandate_blob b;
	mandate_errno e;
	if (method == NULL || url == NULL || mandate__bad(body, body_len) || resp == NULL || raw == NULL)
		return MANDATE_EFAULT;
	mandate_http_request(&req, method, url, body, body_len);
	if (req.oom) {
		mandate_str_free(&req);
		return MANDATE_ELIMIT;
	}
	e = mandate_call(c, "fetch", req.ptr, req.len, &b);
	mandate_str_free(&req);
	if (e != MANDATE_ESUCCESS)
		return e;
	e = mandate_blob_read_all(b, raw);
	(void)mandate_blob_drop(b);
	if (e != MANDATE_ESUCCESS)
		return e;
	if (!mandate_http_decode(raw->ptr, raw->len, resp)) {
		mandate_buf_free(raw);
		return MANDATE_EINVAL;
	}
	return MANDATE_ESUCCESS;
}

/*
 * Reactors. A guest whose .c files carry the line //mandate:reactor is
 * built as a WASI reactor (clang -mexec-model=reactor): the kernel runs
 * _initialize, then the exported function "run". Define it with
 * MANDATE_ENTRY:
 *
 *	MANDATE_ENTRY int run(void) { ...; return 0; }
 *
 * (a non-zero return fails the task, as a non-zero exit status does).
 */
#define MANDATE_ENTRY __attribute__((export_name("run")))

#ifdef __cplusplus
}
#endif

#endif /* MANDATE_H */
