package kindapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// DecodeSpec decodes a grant spec (a cap block as JSON) strictly into v:
// unknown fields, trailing data and documents over abi.MaxArgLen are
// errors. An error about one field is a *FieldError naming it, so the
// manifest can point at that attribute; kind prefixes other errors.
func DecodeSpec(kind string, spec []byte, v any) error {
	err := abi.DecodeJSON(spec, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &FieldError{Field: te.Field, Msg: "wrong type: got " + te.Value}
	}
	if _, after, ok := strings.Cut(err.Error(), "json: unknown field "); ok {
		// encoding/json quotes the name with %q; an empty or unquotable
		// name is reported without a field to point at.
		if name, err := strconv.Unquote(after); err == nil && name != "" {
			return &FieldError{Field: name, Msg: "unknown field"}
		}
	}
	return fmt.Errorf("%s: grant spec: %w", kind, err)
}

// DecodeNarrow decodes a cap_derive request strictly into v (as
// abi.DecodeJSON): a request past MaxArgLen is ELIMIT, a malformed one
// EINVAL, each reading "KIND: narrowing request: ...".
func DecodeNarrow(kind string, req []byte, v any) error {
	err := abi.DecodeJSON(req, v)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, abi.ErrTooLarge):
		return Errorf(abi.ELIMIT, "%s: narrowing request: %v", kind, err)
	}
	return Errorf(abi.EINVAL, "%s: narrowing request: %v", kind, err)
}

// QuoteTrunc quotes a value of a grant or a call for an error message,
// cut past 64 bytes (and marked so): a spec is a user's file, a call a
// guest's, and neither may fill a log line.
func QuoteTrunc(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

// ParseTimeout reads a grant's timeout: a Go duration in (0, max].
func ParseTimeout(s string, max time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > max {
		return 0, fmt.Errorf("%s must be a duration in (0, %s]", QuoteTrunc(s), max)
	}
	return d, nil
}
