package mandate_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/sandbox"
)

// TestCHeaderTwins checks the C SDK (guest-sdk/c/mandate.h) against the
// host-call declarations (kernel.HostCalls): its imports (name, and each
// parameter a uint32_t of the declared name, declared as
// mandate_raw_<name>), its host-call name macros; and against package
// abi its errno constants and their names (mandate_errno_name), and its
// limits.
func TestCHeaderTwins(t *testing.T) {
	const where = "guest-sdk/c/mandate.h"
	b, err := os.ReadFile(where)
	if err != nil {
		t.Fatal(err)
	}
	h := string(b)
	want := twin(func(p sandbox.Param) string { return "uint32_t " + p.Name })

	// MANDATE_IMPORT("name") uint32_t mandate_raw_name(uint32_t a, ...);
	imports := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^MANDATE_IMPORT\("([a-z_]+)"\) uint32_t mandate_raw_([a-z_]+)\(([^)]*)\);`).FindAllStringSubmatch(h, -1) {
		if m[1] != m[2] {
			t.Errorf("%s: import %s is declared as mandate_raw_%s", where, m[1], m[2])
		}
		ps := []string{}
		for _, p := range strings.Split(m[3], ",") {
			if p = strings.Join(strings.Fields(p), " "); p != "" && p != "void" {
				ps = append(ps, p)
			}
		}
		imports[m[1]] = ps
	}
	if n := strings.Count(h, "MANDATE_IMPORT(\""); n != len(imports) {
		t.Errorf("%s: %d MANDATE_IMPORT declarations, %d of the form the test reads", where, n, len(imports))
	}
	compareCalls(t, where, imports, want)

	// #define MANDATE_CAP_CALL "cap_call"
	names := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define MANDATE_([A-Z_]+) "([a-z_]+)"$`).FindAllStringSubmatch(h, -1) {
		if strings.ToLower(m[1]) != m[2] {
			t.Errorf("%s: MANDATE_%s names %q", where, m[1], m[2])
		}
		names[m[2]] = want[m[2]]
	}
	compareCalls(t, where+" (name macros)", names, want)

	// The errnos: MANDATE_EXXX = N, and mandate_errno_name's table.
	var wantErrnos []string
	for e := abi.Errno(0); !strings.HasPrefix(e.String(), "Errno("); e++ {
		wantErrnos = append(wantErrnos, e.String())
	}
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^\s*MANDATE_(E[A-Z]+) = (\d+),`).FindAllStringSubmatch(h, -1) {
		if _, dup := got[m[1]]; dup {
			t.Errorf("%s: MANDATE_%s defined twice", where, m[1])
		}
		got[m[1]], _ = strconv.Atoi(m[2])
	}
	for v, name := range wantErrnos {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: no MANDATE_%s", where, name)
		} else if g != v {
			t.Errorf("%s: MANDATE_%s = %d, abi says %d", where, name, g, v)
		}
		delete(got, name)
	}
	for name := range got {
		t.Errorf("%s: MANDATE_%s is not an abi errno", where, name)
	}
	tab := regexp.MustCompile(`(?s)static const char \*const names\[\] = \{(.*?)\};`).FindStringSubmatch(h)
	if tab == nil {
		t.Fatalf("%s: no errno name table", where)
	}
	var tabNames []string
	for _, m := range regexp.MustCompile(`"([A-Z]+)"`).FindAllStringSubmatch(tab[1], -1) {
		tabNames = append(tabNames, m[1])
	}
	if g, w := strings.Join(tabNames, " "), strings.Join(wantErrnos, " "); g != w {
		t.Errorf("%s: mandate_errno_name's table\n got %s\nwant %s", where, g, w)
	}

	// Limits.
	for name, v := range map[string]int{
		"MAX_OP_LEN": abi.MaxOpLen, "MAX_NAME_LEN": abi.MaxNameLen, "MAX_ARG_LEN": abi.MaxArgLen,
		"MAX_BLOB_LEN": abi.MaxBlobLen, "MAX_ERROR_LEN": abi.MaxErrorLen,
	} {
		m := regexp.MustCompile(`(?m)^#define MANDATE_` + name + ` \(?(\d+)u(?: << (\d+))?\)?$`).FindStringSubmatch(h)
		if m == nil {
			t.Errorf("%s: no MANDATE_%s", where, name)
			continue
		}
		g, _ := strconv.Atoi(m[1])
		if m[2] != "" {
			s, _ := strconv.Atoi(m[2])
			g <<= s
		}
		if g != v {
			t.Errorf("%s: MANDATE_%s = %d, abi says %d", where, name, g, v)
		}
	}
}
