package mcpclients

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// AuditFile is the audit log's file in the state directory, where
// ResetAudited records a reset.
const AuditFile = "audit.db"

// ResetAudited is a person's reset of client's label, as "mandate mcp
// reset" and the clients page of "mandate ui" make it: st.Reset (the
// client's history keeps who and why), then an entry in the audit log of
// stateDir (kind "mcp", op "reset-label", by as its principal, the label
// dropped as its label), and a signed checkpoint. It returns the label
// dropped. An error after the reset was stored says so: the reset stands,
// the audit log lacks it.
func ResetAudited(ctx context.Context, stateDir string, st *Store, client, by, why string) (before kindapi.Label, err error) {
	before, err = st.Reset(ctx, client, by, why)
	if err != nil {
		return before, err
	}
	alog, err := audit.Open(filepath.Join(stateDir, AuditFile))
	if err == nil {
		err = alog.Record(ctx, kernel.AuditEvent{Time: time.Now(), Principal: by, Kind: "mcp", Op: "reset-label", Decision: kernel.Allow,
			Label: before, Reason: fmt.Sprintf("the label of MCP client %q (%v) reset by %s: %s", client, before, by, why)})
		if err == nil {
			_, err = alog.Checkpoint()
		}
		alog.Close()
	}
	if err != nil {
		return before, fmt.Errorf("the reset is done and in %s, but the audit log could not record it: %w", st.Path(), err)
	}
	return before, nil
}
