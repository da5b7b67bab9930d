// Package pgurl tells a PostgreSQL URL from a file path and redacts its
// password, without the PostgreSQL driver: a build without PostgreSQL
// (internal/optional) still knows such a URL when it is given one.
package pgurl

import (
	"net/url"
	"strings"
)

// IsURL reports whether s is a postgres:// or postgresql:// URL.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Redact returns the URL s without its password (in the user info or a
// password= parameter), for messages.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a PostgreSQL URL that does not parse)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
