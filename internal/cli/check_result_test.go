package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckResultRefuses: with result { refuses_taints }, mandate check
// lists each taint the task could read, the capabilities bringing it in,
// and whether the answer refuses it (the reviews', not the catalogue's);
// with accepts_untrusted = false every one is refused; without a result
// block the section is omitted.
func TestCheckResultRefuses(t *testing.T) {
	const caps = `
  principal = "alice"
  cap "net" "catalogue" {
    origin    = "https://hotels.example"
    paths     = ["/hotels"]
    responses = { "/hotels" = { taint = "hotels:catalogue" } }
  }
  cap "net" "reviews" {
    origin = "https://reviews.example"
  }
`
	r := checkTestManifest(t, caps+`
  result {
    refuses_taints = ["web:https://reviews*"]
  }`)
	if r.Result == nil {
		t.Fatal("no result section")
	}
	wantTags(t, "result refused", r.Result.Refused, "reviews")
	got := map[string]bool{}
	for _, c := range r.Result.CouldCarry {
		got[c.Taint+" "+strings.Join(c.From, ",")] = c.Refused
	}
	want := map[string]bool{"hotels:catalogue catalogue": false, "web:https://reviews.example reviews": true}
	if len(got) != len(want) {
		t.Errorf("could_carry = %+v, want %v", r.Result.CouldCarry, want)
	}
	for k, v := range want {
		if r, ok := got[k]; !ok || r != v {
			t.Errorf("could_carry %q: refused %v (listed %v), want %v", k, r, ok, v)
		}
	}
	var out bytes.Buffer
	writeCheckText(&out, loadCheckManifest(t, caps), r)
	for _, line := range []string{
		"\nresult: refuses_taints {web:https://reviews*}\n",
		"  hotels:catalogue from catalogue: accepted\n",
		"  web:https://reviews.example from reviews: refused\n",
		"  an answer written after reading from reviews is refused (EFLOW naming the taint)\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("text:\n%s\nwant %q", &out, line)
		}
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"result":{"accepts_untrusted":true,"refuses_taints":["web:https://reviews*"]`) {
		t.Errorf("JSON %s", b)
	}

	r = checkTestManifest(t, caps+`
  result {
    accepts_untrusted = false
  }`)
	wantTags(t, "accepts_untrusted = false refused", r.Result.Refused, "catalogue", "reviews")

	r = checkTestManifest(t, caps)
	if b, _ := json.Marshal(r); r.Result != nil || strings.Contains(string(b), `"result"`) {
		t.Errorf("no result block: %s", b)
	}
}
