package kernel

import (
	"crypto/subtle"
	"fmt"
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
