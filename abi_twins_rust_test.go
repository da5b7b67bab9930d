package mandate_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/sandbox"
)

// TestRustSDKTwins checks the Rust SDK (guest-sdk/rust) against the
// host-call declarations (kernel.HostCalls): the extern block of its
// import module (name, each parameter's name and its type by kind, an
// i32 result) and its HOST_CALLS list; and against package abi its Errno
// enum (names and values) with the names it prints, and its limits.
func TestRustSDKTwins(t *testing.T) {
	want := twin(func(p sandbox.Param) string {
		ty := "u32"
		switch p.Kind {
		case sandbox.In:
			ty = "*const u8"
		case sandbox.Buf:
			ty = "*mut u8"
		case sandbox.Out:
			ty = "*mut u32"
		}
		return p.Name + ": " + ty
	})
	order := hostCallOrder()

	sys := readRust(t, "guest-sdk/rust/src/sys.rs")
	block := regexp.MustCompile(`(?s)#\[link\(wasm_import_module = "mandate"\)\]\s*extern "C" \{(.*?)\n\s*\}`).FindStringSubmatch(sys)
	if block == nil {
		t.Fatal(`guest-sdk/rust/src/sys.rs: no #[link(wasm_import_module = "mandate")] extern "C" block`)
	}
	rust := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?s)pub fn ([a-z_]+)\(([^)]*)\)\s*(->\s*[a-z0-9]+)?;`).FindAllStringSubmatch(block[1], -1) {
		ps := []string{}
		for _, p := range strings.Split(m[2], ",") {
			if p = strings.Join(strings.Fields(p), " "); p != "" {
				ps = append(ps, p)
			}
		}
		rust[m[1]] = ps
		if strings.ReplaceAll(m[3], " ", "") != "->u32" {
			t.Errorf("sys.rs: %s returns %q, want -> u32 (an errno)", m[1], m[3])
		}
	}
	compareCalls(t, "guest-sdk/rust/src/sys.rs", rust, want)

	lib := readRust(t, "guest-sdk/rust/src/lib.rs")
	list := regexp.MustCompile(`(?s)pub const HOST_CALLS: \[&str; \d+\] = \[(.*?)\];`).FindStringSubmatch(lib)
	if list == nil {
		t.Fatal("guest-sdk/rust/src/lib.rs: no HOST_CALLS")
	}
	var calls []string
	for _, m := range regexp.MustCompile(`"([a-z_]+)"`).FindAllStringSubmatch(list[1], -1) {
		calls = append(calls, m[1])
	}
	if fmt.Sprint(calls) != fmt.Sprint(order) {
		t.Errorf("lib.rs HOST_CALLS = %v, want the declarations' order %v", calls, order)
	}

	// Errnos: every value of abi.Errno up to the first without a name.
	var names []string
	for e := abi.Errno(0); ; e++ {
		if e.String() == fmt.Sprintf("Errno(%d)", e) {
			break
		}
		names = append(names, e.String())
	}
	errno := readRust(t, "guest-sdk/rust/src/errno.rs")
	enum := regexp.MustCompile(`(?s)pub enum Errno \{(.*?)\n\}`).FindStringSubmatch(errno)
	if enum == nil {
		t.Fatal("guest-sdk/rust/src/errno.rs: no enum Errno")
	}
	variants := regexp.MustCompile(`(?m)^\s*([A-Z]+) = (\d+),`).FindAllStringSubmatch(enum[1], -1)
	if len(variants) != len(names) {
		t.Errorf("errno.rs: %d errnos, abi has %d", len(variants), len(names))
	}
	for _, v := range variants {
		n, _ := strconv.Atoi(v[2])
		if n >= len(names) || names[n] != v[1] {
			t.Errorf("errno.rs: %s = %d, abi.Errno(%d) is %s", v[1], n, n, abi.Errno(n))
		}
	}
	printed := regexp.MustCompile(`Errno::([A-Z]+) => "([A-Z]+)"`).FindAllStringSubmatch(errno, -1)
	if len(printed) != len(names) {
		t.Errorf("errno.rs: Errno::name has %d arms, want %d", len(printed), len(names))
	}
	for _, m := range printed {
		if m[1] != m[2] {
			t.Errorf("errno.rs: Errno::%s prints %q", m[1], m[2])
		}
	}
	all := regexp.MustCompile(`pub const ALL: \[Errno; (\d+)\]`).FindStringSubmatch(errno)
	if all == nil || all[1] != strconv.Itoa(len(names)) {
		t.Errorf("errno.rs: ALL is %v, want %d errnos", all, len(names))
	}

	// Limits.
	for name, v := range map[string]int{
		"MAX_OP_LEN": abi.MaxOpLen, "MAX_NAME_LEN": abi.MaxNameLen, "MAX_ARG_LEN": abi.MaxArgLen,
		"MAX_BLOB_LEN": abi.MaxBlobLen, "MAX_ERROR_LEN": abi.MaxErrorLen,
	} {
		m := regexp.MustCompile(`pub const ` + name + `: usize = ([^;]+);`).FindStringSubmatch(lib)
		if m == nil {
			t.Errorf("lib.rs: no %s", name)
			continue
		}
		if got := rustConst(m[1]); got != v {
			t.Errorf("lib.rs: %s = %s (%d), abi says %d", name, m[1], got, v)
		}
	}
}

// rustConst evaluates the constants the SDK writes: N or A << B.
func rustConst(s string) int {
	if a, b, ok := strings.Cut(s, "<<"); ok {
		x, _ := strconv.Atoi(strings.TrimSpace(a))
		y, _ := strconv.Atoi(strings.TrimSpace(b))
		return x << y
	}
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

func readRust(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
