package kindapi

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
)

// Secret holds a credential a kind attaches at the sink (an API key, a card
// token): law 9, secrets never enter a guest. The value sits behind a
// pointer, so printing a scope reflectively shows an address, and a Secret
// formats as "[redacted]" under every fmt verb and in JSON. Only Value
// reveals it, at the point of use.
type Secret struct{ p *string }

// NewSecret holds v.
func NewSecret(v string) Secret { return Secret{&v} }

// Value returns the secret, "" for the zero Secret.
func (s Secret) Value() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// IsZero reports whether s holds nothing.
func (s Secret) IsZero() bool { return s.Value() == "" }

// Equal compares two secrets in constant time.
func (s Secret) Equal(o Secret) bool {
	return subtle.ConstantTimeCompare([]byte(s.Value()), []byte(o.Value())) == 1
}

func (Secret) String() string               { return "[redacted]" }
func (Secret) GoString() string             { return "[redacted]" }
func (Secret) Format(f fmt.State, _ rune)   { _, _ = f.Write([]byte("[redacted]")) }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// SecretSource names where a grant reads a secret from: exactly one of
// Env (a host environment variable) and File (a file, relative to the
// manifest; one trailing newline is removed).
type SecretSource struct {
	Env  string `json:"env"`
	File string `json:"file"`
}

// ReadSecret reads a secret from src. It returns the value and where it
// came from ("env:NAME" or "file:PATH", safe to show). A missing or empty
// source is a *FieldError whose Field is relative to the source (".env",
// ".file" or ""), for the caller to prefix with its own field; what names
// the secret in messages, e.g. "the instrument".
func (g GrantContext) ReadSecret(src SecretSource, what string) (value, from string, err error) {
	fe := func(sub, format string, args ...any) error {
		return &FieldError{Field: sub, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case src.Env != "" && src.File != "":
		return "", "", fe("", "set one of env and file, not both")
	case src.Env != "":
		v, ok := g.Getenv(src.Env)
		if !ok {
			return "", "", fe(".env", "environment variable %s is not set", src.Env)
		}
		if v == "" {
			return "", "", fe(".env", "%s is empty", what)
		}
		return v, "env:" + src.Env, nil
	case src.File != "":
		b, err := g.ReadFile(src.File)
		if err != nil {
			return "", "", fe(".file", "cannot read %s: %v", src.File, err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return "", "", fe(".file", "%s is empty", what)
		}
		return v, "file:" + src.File, nil
	}
	return "", "", fe("", "set env or file: where %s is read from", what)
}

// Prefixed returns err with field prefixed to a *FieldError's Field.
func Prefixed(field string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: field + fe.Field, Msg: fe.Msg}
	}
	return err
}
