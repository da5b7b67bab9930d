package kernel

import "github.com/mandatevm/mandate/kernel/kindapi"

// ProvenanceVar is the variable under which constraints see where a
// call's spliced values came from (kindapi.Op.Provenance): the CEL
// functions spliced(x) and from(x) of package constraint read it.
const ProvenanceVar = "mandate_provenance"

// provenance is op's provenance as a constraint sees it: for each place
// ("request.body.recipient"), {"conf": [...], "integ": [...], "path":
// "$..."} of the part it was spliced from. Always a map, empty when
// nothing was spliced by part.
func provenance(op *kindapi.Op) map[string]any {
	out := make(map[string]any, len(op.Provenance))
	for place, src := range op.Provenance {
		conf, integ := []any{}, []any{}
		for _, t := range src.Label.Conf() {
			conf = append(conf, t)
		}
		for _, t := range src.Label.Integ() {
			integ = append(integ, t)
		}
		out[place] = map[string]any{"conf": conf, "integ": integ, "path": src.Path}
	}
	return out
}
