package cgraph

import (
	_ "unsafe"

	"github.com/mandatevm/mandate/internal/graphviz/cdt"
	"github.com/mandatevm/mandate/internal/graphviz/internal/wasm"
)

//go:linkname toDict github.com/mandatevm/mandate/internal/graphviz/cdt.toDict
func toDict(*wasm.Dict) *cdt.Dict

//go:linkname toDictWasm github.com/mandatevm/mandate/internal/graphviz/cdt.toDictWasm
func toDictWasm(*cdt.Dict) *wasm.Dict

//go:linkname toDictLink github.com/mandatevm/mandate/internal/graphviz/cdt.toLink
func toDictLink(*wasm.DictLink) *cdt.Link

//go:linkname toDictLinkWasm github.com/mandatevm/mandate/internal/graphviz/cdt.toLinkWasm
func toDictLinkWasm(*cdt.Link) *wasm.DictLink

func toGraphWasm(v *Graph) *wasm.Graph {
	if v == nil {
		return nil
	}
	return v.wasm
}
