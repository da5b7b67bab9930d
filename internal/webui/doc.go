// Package webui is mandate ui: a local web view of the runs in a state
// directory (the run store and the audit log), live while runs go on, and
// the page where a person answers the pending approvals (approvals.go),
// and the MCP clients' pages, where a person resets a client's label
// (clients.go).
//
//	ln, err := webui.Listen("127.0.0.1:0") // loopback only
//	token, err := webui.NewToken()
//	s, err := webui.New(webui.Options{StateDir: dir, Token: token, Addr: ln.Addr().String()})
//	fmt.Printf("http://%s/?token=%s\n", ln.Addr(), token)
//	err = s.Serve(ctx, ln) // until ctx is done
//
// Pages: the runs list (GET /, filtered by ?principal=, ?state= and
// ?denials=1) and a run's page (GET /runs/ID, or /runs/last): its task
// tree, each task's capabilities with their derivation paths from the
// manifest's grants, labels and clearances, denials and flows with the
// kernel's reasons, the tasks' outputs, the run's audit entries and the
// verdict of verifying the whole log (audit.Log.Verify, the code of
// mandate audit verify), and the graph picture when Options.Graph draws
// one. The pages are static HTML and one script that builds them from
// JSON (GET /api/runs, /api/runs/ID, /api/runs/ID/graph.svg) with DOM
// calls, every string as text; GET /api/events is a server-sent event
// stream that says when a run changed.
//
// It is an attack surface, and guarded as one (guard.go): it listens on
// loopback only (Listen), serves only requests whose Host is its own
// address (a rebound DNS name is refused), GET and HEAD only (but the POSTs
// of an approval's answer and of a client's reset: with its own Origin,
// same-origin, JSON, 4 KiB at most, and a one-time nonce), nothing
// without the token (the URL's ?token= once, which sets an HttpOnly,
// SameSite=Strict cookie and redirects to the URL without it), with
// ContentSecurityPolicy, nosniff, no referrer and no caching on every
// response. It opens the run store and the audit log read-only; it
// writes answers to STATE/approvals.db, a client's reset to
// STATE/mcp-clients.db and the audit log (mcpclients.ResetAudited), and
// STATE/ui.json (Publish). Every
// string of a record is escaped twice over: control characters and
// bidirectional overrides as Go escapes (kindapi.EscapeText) in the JSON,
// and set as text, never markup, by the page; the picture is rebuilt
// from an allowlist (SanitizeSVG) and sanitized again by the page.
package webui
