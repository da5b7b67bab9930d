package gvc

import (
	_ "unsafe"

	"github.com/mandatevm/mandate/internal/graphviz/cdt"
	"github.com/mandatevm/mandate/internal/graphviz/cgraph"
	"github.com/mandatevm/mandate/internal/graphviz/internal/wasm"
)

//go:linkname toGraph github.com/mandatevm/mandate/internal/graphviz/cgraph.toGraph
func toGraph(*wasm.Graph) *cgraph.Graph

//go:linkname toGraphWasm github.com/mandatevm/mandate/internal/graphviz/cgraph.toGraphWasm
func toGraphWasm(*cgraph.Graph) *wasm.Graph

//go:linkname toNode github.com/mandatevm/mandate/internal/graphviz/cgraph.toNode
func toNode(*wasm.Node) *cgraph.Node

//go:linkname toEdge github.com/mandatevm/mandate/internal/graphviz/cgraph.toEdge
func toEdge(*wasm.Edge) *cgraph.Edge

//go:linkname toDictLink github.com/mandatevm/mandate/internal/graphviz/cdt.toLink
func toDictLink(*wasm.DictLink) *cdt.Link

//go:linkname toDictLinkWasm github.com/mandatevm/mandate/internal/graphviz/cdt.toLinkWasm
func toDictLinkWasm(*cdt.Link) *wasm.DictLink
