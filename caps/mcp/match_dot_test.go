package mcp

import "testing"

// TestResourceDotSegments: "*" matches any text, so a resource pattern
// naming a folder would match a URI that climbs out of it; a URI with a
// dot segment, however written, is never passed through.
func TestResourceDotSegments(t *testing.T) {
	ps := []string{"file:///data/reports/*"}
	for uri, want := range map[string]bool{
		"file:///data/reports/q3.txt":                 true,
		"file:///data/reports/sub/q3.txt":             true,
		"file:///data/reports/q3..txt":                true,
		"file:///data/reports/.hidden":                true,
		"file:///data/reports/../private/b.txt":       false,
		"file:///data/reports/%2e%2e/private/b.txt":   false,
		"file:///data/reports/%2E./private/b.txt":     false,
		"file:///data/reports/..%2fprivate/b.txt":     false,
		"file:///data/reports/..%5Cprivate\\b.txt":    false,
		"file:///data/reports/..\\private\\b.txt":     false,
		"file:///data/reports/./q3.txt":               false,
		"file:///data/reports/sub/..":                 false,
		"file:///data/reports/..?x=1":                 false,
		"file:///data/reports/q3.txt?path=../private": true, // the query names no path segment
		"file:///data/private/b.txt":                  false,
		"file:///data/reports":                        false,
	} {
		if got := resourceAllowed(ps, uri); got != want {
			t.Errorf("resourceAllowed(%q) = %v, want %v", uri, got, want)
		}
	}
}
