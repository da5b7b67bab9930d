package graphview_test

import (
	"os"

	"github.com/mandatevm/mandate/internal/graphview"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// The DOT source of a one-task run; graphview.SVG draws the same.
func ExampleDOT() {
	rec := &runstore.Record{Graph: kernel.Graph{
		Tasks: []kernel.GraphTask{{ID: "t1", Principal: "alice", State: kernel.TaskDone}},
		Caps: []kernel.GraphCap{{ID: "c1", Kind: "net", Name: "web", Holder: "t1",
			View: kernel.CapView{Fields: []kindapi.Detail{{Name: "origin", Value: "https://<example>"}}}}},
	}}
	graphview.DOT(os.Stdout, rec)
	// Output:
	// digraph mandate {
	//   graph [rankdir=LR, fontname="Helvetica", fontsize=11, labelloc=t, labeljust=l, nodesep=0.25, ranksep=0.6, class="mandate"];
	//   node [fontname="Helvetica", fontsize=10, shape=box];
	//   edge [fontname="Helvetica", fontsize=9, color="#546e7a"];
	//   subgraph cluster_t0 {
	//     id="holder-t1"; class="holder"; label=""; style="rounded,dashed"; color="#b0bec5";
	//     t0 [id="task-t1", class="task done", style="filled", fillcolor="#eef3fb", label=<<B>t1</B>&#160;alice<BR ALIGN="LEFT"/>done<BR ALIGN="LEFT"/>>];
	//     c0 [id="cap-c1", class="cap", style="rounded,filled", fillcolor="#fbfbf6", label=<<B>c1</B>&#160;net &quot;web&quot;<BR ALIGN="LEFT"/>origin=https://&lt;example&gt;<BR ALIGN="LEFT"/>>];
	//   }
	//   t0 -> c0 [class="holds", style=dashed, arrowhead=none, color="#757575"];
	// }
}
