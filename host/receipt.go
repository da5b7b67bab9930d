package host

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// The forms of a receipt (RunSpec.ReceiptFormat).
const (
	// ReceiptNote is a signed note: the receipt's JSON and a signature
	// line (audit.SignReceipt), which mandate verify reads.
	ReceiptNote = "note"
	// ReceiptDSSE is an in-toto bundle (JSON Lines, one DSSE envelope per
	// line, signed with the same key): the receipt as a statement of
	// predicate type audit.RunPredicateType about the module and the
	// manifest, then, when the module carries a build record, its SLSA
	// provenance (ProvenanceStatement). Any DSSE verifier checks them
	// with the key's PEM form (mandate audit key --pem).
	ReceiptDSSE = "dsse"
)

// receiptSpec is what a run's receipt is written from: where, in which
// form, and the build record its module carries.
type receiptSpec struct {
	path, format string
	name, digest string // the module's file name and digest
	build        *guestbuild.Record
}

// newReceiptSpec reads the build record of the module a receipt will
// name. A module whose record is malformed is refused before it runs: a
// receipt could not say faithfully what it is.
func newReceiptSpec(spec RunSpec, modulePath, digest string, wasm []byte) (receiptSpec, error) {
	rs := receiptSpec{path: spec.Receipt, format: spec.ReceiptFormat, digest: digest}
	if rs.path == "" {
		return rs, nil
	}
	switch rs.format {
	case "":
		rs.format = ReceiptNote
	case ReceiptNote, ReceiptDSSE:
	default:
		return rs, fmt.Errorf("receipt: unknown format %q (want %s or %s)", rs.format, ReceiptNote, ReceiptDSSE)
	}
	rs.name = "module"
	if modulePath != "" {
		rs.name = path.Base(filepath.ToSlash(modulePath))
	}
	rec, ok, err := guestbuild.ReadRecord(wasm)
	if err != nil {
		return rs, fmt.Errorf("receipt: the module's build record (custom section %s): %w", guestbuild.SectionName, err)
	}
	if ok {
		rs.build = &rec
	}
	return rs, nil
}

// sign signs rc, with the module's build record, in the spec's form.
func (rs receiptSpec) sign(log *audit.Log, rc audit.Receipt) ([]byte, error) {
	if rs.build != nil {
		b, err := json.Marshal(rs.build)
		if err != nil {
			return nil, err
		}
		rc.Build = b
	}
	if rs.format != ReceiptDSSE {
		return log.SignReceipt(rc)
	}
	st, err := audit.ReceiptStatement(rc)
	if err != nil {
		return nil, err
	}
	env, err := log.SignStatement(st)
	if err != nil {
		return nil, err
	}
	envs := []*dsse.Envelope{env}
	if rs.build != nil {
		prov, err := ProvenanceStatement(rs.name, rs.digest, *rs.build)
		if err != nil {
			return nil, err
		}
		penv, err := log.SignStatement(prov)
		if err != nil {
			return nil, err
		}
		envs = append(envs, penv)
	}
	return audit.EncodeEnvelopes(envs...)
}
