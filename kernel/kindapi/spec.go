package kindapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
