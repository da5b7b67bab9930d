// Command pipeline makes one call that the kernel must refuse at one step
// of the mediation pipeline (docs/ARCHITECTURE.md, "the mediation pipeline"), and reports each errno.
// The suite's pipeline table (internal/attacks/pipeline_test.go) sets the
// grants so the refusal happens exactly at that step, and then checks that
// nothing happened anywhere: no request, no charge, no store write, no
// debit, no spent token, no handle, no child, no "allow" in the audit log.
//
// Its mode is a JSON plan:
//
//	{"cap": "web", "op": "fetch", "args": "{...}",
//	 "prep": "fill" | "revoke" | "taint" | "",
//	 "times": 1}
//
// op is a cap_call operation, "derive" (args: the request) or "spawn"
// (args: a spawn request whose "module" is the name of a guest, replaced
// by its digest). prep fills the handle table first (until ELIMIT), or
// calls through a derived child that was revoked, or reads Alice's
// passport first (the task's label rises to pii:alice). The call is made
// times times, then once with the arguments then (if set); the report has
// "call0", "call1"..., and "#free" is how many
// blobs the task could still create afterwards (the table must have given
// back every slot a refused call reserved).
package main

import (
	"encoding/json"
	"strconv"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

type plan struct {
	Cap   string `json:"cap"`
	Op    string `json:"op"`
	Args  string `json:"args"`
	Prep  string `json:"prep"`
	Times int    `json:"times"`
	// Then is a second, legitimate call's arguments, made after the
	// others ("then" in the report).
	Then string `json:"then"`
}

func main() {
	in := attack.ReadInput()
	var p plan
	if err := json.Unmarshal([]byte(in.Mode), &p); err != nil {
		panic(err)
	}
	c := attack.Must(mandate.Lookup(p.Cap))
	var fill []mandate.Blob
	switch p.Prep {
	case "revoke":
		d := attack.Must(c.Derive(`{}`))
		attack.Rec("revoke", d.Revoke())
		c = d
	case "taint":
		d := attack.Must(mandate.Lookup("mydata"))
		b, err := d.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
		attack.Rec("taint_read", err)
		_, err = b.Bytes()
		attack.Rec("taint_bytes", err)
	case "fill":
		for {
			b, err := mandate.NewBlob([]byte("x"))
			if err != nil {
				attack.Rec("fill", err)
				break
			}
			fill = append(fill, b)
		}
		attack.Note("filled", strconv.Itoa(len(fill)))
	}
	args := p.Args
	for name, d := range in.Digests {
		args = strings.ReplaceAll(args, `"module":"`+name+`"`, `"module":"`+d+`"`)
	}
	times := max(p.Times, 1)
	for i := 0; i < times; i++ {
		var err error
		switch p.Op {
		case "derive":
			_, err = c.Derive(args)
		case "spawn":
			var req abi.SpawnRequest
			if jerr := json.Unmarshal([]byte(args), &req); jerr != nil {
				panic(jerr)
			}
			for j, pc := range req.Caps {
				req.Caps[j].Handle = attack.Must(mandate.Lookup(pc.Name)).Handle()
			}
			var t mandate.Task
			t, err = mandate.Spawn(c, req)
			if err == nil {
				_, werr := t.Wait()
				attack.Rec("wait"+strconv.Itoa(i), werr)
			}
		default:
			_, err = c.Call(p.Op, []byte(args))
		}
		attack.Rec("call"+strconv.Itoa(i), err)
		if err != nil {
			attack.Note("why"+strconv.Itoa(i), mandate.LastError())
		}
	}
	if p.Then != "" {
		_, err := c.Call(p.Op, []byte(p.Then))
		attack.Rec("call"+strconv.Itoa(times), err)
	}
	// Every slot a refused call reserved must be back: free what fill
	// took and count how many blobs fit again.
	if p.Prep == "fill" {
		for _, b := range fill {
			b.Drop()
		}
		var again []mandate.Blob
		for len(again) < 1<<16 {
			b, err := mandate.NewBlob([]byte("y"))
			if err != nil {
				break
			}
			again = append(again, b)
		}
		for _, b := range again {
			b.Drop()
		}
		attack.Note("free", strconv.Itoa(len(again)))
	}
	attack.Finish()
}
