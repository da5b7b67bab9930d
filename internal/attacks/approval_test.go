package attacks_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel"
)

var update = flag.Bool("update", false, "rewrite the approval golden files")

// TestApprovalText: what a person is asked is what the kernel will do. For
// each kind, a call that needs a yes (approve_when = "true" on its grant)
// is shown to an approver who says yes; the question (ApprovalRequest.Text,
// the same text the audit log records) must match the golden file
// testdata/approvals/KIND.txt, ports, digests and random keys aside. The
// pay row then checks that the provider charged exactly the payee and
// amount the person saw.
func TestApprovalText(t *testing.T) {
	rows := map[string]struct{ plan, grant string }{
		"net":   {`"cap":"web","op":"fetch","args":"{\"method\":\"POST\",\"url\":\"/api/pay?to=mallory\",\"header\":{\"Content-Type\":[\"application/json\"]},\"body\":\"eyJhbW91bnQiOiAxMCwgInRvIjogIm1hbGxvcnkifQ==\"}"`, "web"},
		"pay":   {`"cap":"card","op":"charge","args":"{\"payee\":\"airline.example\",\"amount\":\"60.00\",\"currency\":\"USD\",\"idempotency_key\":\"trip-7\",\"description\":\"LIS-JFK\\u001b[2J\",\"offer\":{\"stops\":0}}"`, "card"},
		"data":  {planWrite, "myplan"},
		"spawn": {planSpawn, "spawner"},
	}
	for kind, r := range rows {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var seen []kernel.ApprovalRequest
			o := envOptions{approve: func(req kernel.ApprovalRequest) bool {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, req)
				return true
			}}
			e := newEnv(t, o)
			grants := e.grantSpecs(t, o)
			constrain(t, r.grant, "", "true")(e, grants)
			task, err := e.k.Run(context.Background(), kernel.TaskSpec{
				Module: e.module(t, "pipeline"), Principal: "alice", Grants: grants,
				Input:  e.input("pipeline", "{"+r.plan+"}"),
				Limits: kernel.Limits{Timeout: hangGuard, Memory: 64 << 20},
			})
			if err != nil {
				t.Fatalf("%v\nstderr: %s", err, task.Stderr())
			}
			raw, _ := task.Result()
			var res map[string]string
			json.Unmarshal(raw, &res)
			if res["call0"] != "ESUCCESS" {
				t.Fatalf("the approved call: %v", res)
			}
			if len(seen) != 1 {
				t.Fatalf("%d approvals asked, want 1", len(seen))
			}
			got := normalise(seen[0].Text())
			golden := filepath.Join("testdata", "approvals", kind+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("the approver was asked:\n%s\nwant (%s):\n%s", got, golden, want)
			}
			// The audit log records the same question with the yes and the
			// channel it came through.
			entries, err := e.alog.Entries(context.Background(), audit.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, en := range entries {
				if en.Op == "approve:"+seen[0].Op && en.Decision == "allow" &&
					normalise(en.Reason) == got+"  answered: yes, by channel program\n" {
					found = true
				}
			}
			if !found {
				t.Errorf("no audit entry records the approval with the text the approver saw")
			}
			if kind == "pay" {
				cs := e.provider.Charges()
				if len(cs) != 1 || cs[0].Payee != "airline.example" || cs[0].AmountMinor != 6000 {
					t.Errorf("the provider charged %+v; the person approved 60.00 USD to airline.example", cs)
				}
			}
		})
	}
}

var (
	reDigest = regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	rePort   = regexp.MustCompile(`(127\.0\.0\.1|granted\.example|evil\.example):\d+`)
)

// normalise replaces what changes between runs: ports and module digests.
func normalise(s string) string {
	s = reDigest.ReplaceAllString(s, "sha256:DIGEST")
	return rePort.ReplaceAllString(s, "$1:PORT")
}
