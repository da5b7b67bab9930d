package kernel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// wordFinder finds the words starting with "v:", a stand-in for the
// constraint compiler's text functions.
type wordFinder struct{}

func (wordFinder) Compile(string, []string) (Constraint, error) { return nil, fmt.Errorf("none") }
func (wordFinder) FindValues(s string, max int) ([]string, bool) {
	var out []string
	for _, w := range strings.Fields(s) {
		if strings.HasPrefix(w, "v:") {
			if len(out) == max {
				return out, true
			}
			out = append(out, w)
		}
	}
	return out, false
}

func seenTask(input string) *Task {
	k := &Kernel{compiler: wordFinder{}}
	k.seenUsed.Store(true)
	return &Task{k: k, input: kindapi.NewBlob([]byte(input), kindapi.Label{})}
}

func exact(taint string) func(string) bool { return func(t string) bool { return t == taint } }

func TestReadsGivenSeen(t *testing.T) {
	task := seenTask("please v:a and v:b")
	r := readsView{task}
	if !r.Given("v:a") || !r.Given("v:b") || r.Given("v:c") || r.Given("please") {
		t.Fatalf("Given of the input's values is wrong")
	}
	web := kindapi.NewBlob([]byte("v:x v:y"), kindapi.NewLabel(nil, []string{"web:a"}))
	bank := kindapi.NewBlob([]byte("v:y v:z"), kindapi.NewLabel(nil, []string{"bank:tx"}))
	task.noteRead(web)
	task.noteRead(bank)
	task.noteRead(web) // once per blob
	for _, c := range []struct {
		v, taint string
		want     bool
	}{
		{"v:x", "web:a", true}, {"v:x", "bank:tx", false},
		{"v:y", "web:a", true}, {"v:y", "bank:tx", true},
		{"v:z", "bank:tx", true}, {"v:a", "web:a", false},
	} {
		if got := r.Seen(c.v, exact(c.taint)); got != c.want {
			t.Errorf("Seen(%q, %q) = %v; want %v", c.v, c.taint, got, c.want)
		}
	}
	// A kernel whose constraints never read seen records nothing.
	quiet := seenTask("")
	quiet.k.seenUsed.Store(false)
	quiet.noteRead(web)
	if (readsView{quiet}).Seen("v:x", exact("web:a")) {
		t.Errorf("seen recorded on a kernel that does not use it")
	}
}

// TestReadsBounds: past each bound, the values are not recorded (seen and
// given answer false), never true for what was not found.
func TestReadsBounds(t *testing.T) {
	taint := kindapi.NewLabel(nil, []string{"web:a"})
	// Values: MaxSeenValues are kept, later ones dropped.
	task := seenTask("")
	var b strings.Builder
	for i := range MaxSeenValues + 10 {
		fmt.Fprintf(&b, "v:%d ", i)
	}
	task.noteRead(kindapi.NewBlob([]byte(b.String()), taint))
	r := readsView{task}
	if !r.Seen("v:0", exact("web:a")) || !r.Seen(fmt.Sprintf("v:%d", MaxSeenValues-1), exact("web:a")) {
		t.Errorf("the first MaxSeenValues values are not all seen")
	}
	if r.Seen(fmt.Sprintf("v:%d", MaxSeenValues), exact("web:a")) {
		t.Errorf("a value past MaxSeenValues is seen")
	}
	// Blobs: MaxSeenBlobs are scanned.
	task = seenTask("")
	for i := range MaxSeenBlobs + 1 {
		task.noteRead(kindapi.NewBlob(fmt.Appendf(nil, "v:b%d", i), taint))
	}
	r = readsView{task}
	if !r.Seen(fmt.Sprintf("v:b%d", MaxSeenBlobs-1), exact("web:a")) || r.Seen(fmt.Sprintf("v:b%d", MaxSeenBlobs), exact("web:a")) {
		t.Errorf("MaxSeenBlobs is not the bound on blobs scanned")
	}
	// Taints: MaxSeenTaints per value.
	task = seenTask("")
	for i := range MaxSeenTaints + 1 {
		task.noteRead(kindapi.NewBlob([]byte("v:t"), kindapi.NewLabel(nil, []string{fmt.Sprintf("src:%02d", i)})))
	}
	r = readsView{task}
	if !r.Seen("v:t", exact(fmt.Sprintf("src:%02d", MaxSeenTaints-1))) || r.Seen("v:t", exact(fmt.Sprintf("src:%02d", MaxSeenTaints))) {
		t.Errorf("MaxSeenTaints is not the bound on a value's taints")
	}
	// Bytes: a blob is scanned up to MaxScanBytes, cut at a space so no
	// value is cut short; the input likewise.
	big := strings.Repeat("x", MaxScanBytes-4) + " v:abcdefgh v:after"
	task = seenTask(big)
	task.noteRead(kindapi.NewBlob([]byte(big), taint))
	r = readsView{task}
	for _, v := range []string{"v:abc", "v:abcdefgh", "v:after"} {
		if r.Seen(v, exact("web:a")) || r.Given(v) {
			t.Errorf("%q past MaxScanBytes is seen or given", v)
		}
	}
}
