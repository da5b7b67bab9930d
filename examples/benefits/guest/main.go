// Command guest is the benefits desk: one tool, whatever the principal.
// Its input says whose benefits to look up: empty for everything the
// task may see (for an employee, their own record; for a manager, their
// reports'), or a person's id for theirs. The tool asks; the kernel
// decides which records that reaches.
package main

import (
	"encoding/json"
	"fmt"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

type record struct {
	ID     string         `json:"id"`
	Owner  string         `json:"owner"`
	Fields map[string]any `json:"fields"`
}

var out strings.Builder

func show(r record) {
	fmt.Fprintf(&out, "%-6s plan=%v dental=%v vision=%v deductible_left=%v\n",
		r.Owner, r.Fields["plan"], r.Fields["dental"], r.Fields["vision"], r.Fields["deductible_left"])
}

func main() {
	in, _ := mandate.InputBytes()
	who := strings.TrimSpace(string(in))
	desk, err := mandate.Lookup("benefits")
	if err != nil {
		panic(err)
	}
	if who == "" {
		res, err := desk.Call("query", []byte(`{"where":{},"limit":100}`))
		if err != nil {
			fmt.Fprintf(&out, "denied: query: %v\n", err)
		} else {
			b, _ := res.Bytes()
			var q struct{ Records []record }
			json.Unmarshal(b, &q)
			for _, r := range q.Records {
				show(r)
			}
			fmt.Fprintf(&out, "(%d record(s) visible to this task)\n", len(q.Records))
		}
	} else {
		arg, _ := json.Marshal(map[string]string{"owner": who})
		res, err := desk.Call("read", arg)
		if err != nil {
			fmt.Fprintf(&out, "denied: read %s's benefits: %v\n", who, err)
		} else {
			b, _ := res.Bytes()
			var r record
			json.Unmarshal(b, &r)
			show(r)
		}
	}
	// The slice never includes the SSN, whatever the tool asks.
	if who != "" {
		arg, _ := json.Marshal(map[string]any{"owner": who, "fields": []string{"ssn"}})
		if _, err := desk.Call("read", arg); err != nil {
			fmt.Fprintf(&out, "denied: read %s's ssn field: %s\n", who, mandate.ErrnoOf(err))
		}
	}
	mandate.SetResult([]byte(out.String()))
}
