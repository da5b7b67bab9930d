package manifest

// The schemas of a manifest's blocks (root, task, result, seed, limits)
// and the cap attributes the kernel, not the kind, reads.

import "github.com/hashicorp/hcl/v2"

// Reserved cap attributes. audit is handled by the kernel; the others are
// kept for labels, clearances and constraints and refused until they are
// implemented, so a manifest that relies on them never runs without them.
var (
	kernelAttrs   = map[string]bool{"audit": true, "rate": true, "when": true, "approve_when": true, "max_uses": true, "budget": true, "approve_mints": true, "approve_plans": true}
	reservedAttrs = map[string]bool{"label": true}
)

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "task", LabelNames: []string{"name"}}},
}

var taskSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "module", Required: true},
		{Name: "digest"},
		{Name: "principal", Required: true},
		{Name: "entry"},
		{Name: "clearance"},
		{Name: "retry"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "limits"},
		{Type: "result"},
		{Type: "cap", LabelNames: []string{"kind", "name"}},
		{Type: "seed", LabelNames: []string{"collection"}},
	},
}

var resultSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "accepts_untrusted"}, {Name: "refuses_taints"}},
}

var seedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "file", Required: true}, {Name: "relations"}},
}

var limitsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "memory"}, {Name: "timeout"}, {Name: "handles"}, {Name: "output"}, {Name: "blobs"},
		{Name: "stored_output"},
		{Name: "functions"}, {Name: "locals"}, {Name: "nesting"}, {Name: "br_table_targets"},
		{Name: "function_size"}, {Name: "compile_memory"},
	},
}
