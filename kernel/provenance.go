package kernel

import "github.com/mandatevm/mandate/kernel/kindapi"

// ProvenanceVar is the variable under which constraints see where a
// call's spliced values came from (kindapi.Op.Provenance): the CEL
// functions spliced(x) and from(x) of package constraint read it.
const ProvenanceVar = "mandate_provenance"

// provenance is op's provenance as a constraint sees it: for each place
// ("request.body.recipient"), {"conf": [...], "integ": [...], "path":
// "$...", "pattern": "..."} of the part it was spliced from ("path" is ""
// for a pattern over a blob's whole text, "pattern" "" for none). Always a
// map, empty when nothing was spliced by part.
//
// A value spliced from a blob the task wrote itself (blob_create) is not
// in it: its bytes are the task's, and their label is only the task's
// label when it wrote them, which a task that read a source carries. So
// spliced(x) holds only of a value the kernel took from a blob a kind or
// the host made, and from(x) of any other is an error.
func provenance(op *kindapi.Op) map[string]any {
	out := make(map[string]any, len(op.Provenance))
	for place, src := range op.Provenance {
		if src.Written {
			continue
		}
		conf, integ := []any{}, []any{}
		for _, t := range src.Label.Conf() {
			conf = append(conf, t)
		}
		for _, t := range src.Label.Integ() {
			integ = append(integ, t)
		}
		out[place] = map[string]any{"conf": conf, "integ": integ, "path": src.Path, "pattern": src.Pattern}
	}
	return out
}
