// Package graphview draws a recorded run's capability graph: as Graphviz
// DOT text, and as an SVG picture drawn by the Graphviz compiled to
// WebAssembly in internal/graphviz (pure Go; nothing to install).
//
//	rec, _ := store.Get(ctx, runID) // a runstore.Record
//	svg, err := graphview.SVG(ctx, rec, graphview.Options{CacheDir: filepath.Join(cacheRoot, "graphviz")})
//
// The picture shows each task as a box (its id, principal, state, module,
// label) in a frame with the capabilities it held; spawn edges between
// tasks, derivation edges between capabilities; each capability's scope as
// its kind describes it with the person's intent (when, approve_when, uses,
// budget), revoked ones struck through; denials and denied flows as red marks (allowed flows grey)
// with their counts, each denial listed (the first MaxDenialsShown) under
// the capability it was made on, with its reason.
//
// A record is written by hostile guests (names, scope values, reasons):
// every string is escaped for a person (kindapi.Printable), cut, and
// XML-escaped into HTML-like labels from a fixed set of tags; none becomes
// an attribute but as an element id made of safe bytes (TaskElementID,
// CapElementID), and none a URL. The SVG holds shapes and text only.
//
// The text forms shared with `mandate graph`'s text and `mandate check`
// (ShortDigest, ScopeSummary, ViewSummary, LimitsParts, QuoteIfNeeded,
// OneLine) live here too.
package graphview
