package kernel

import (
	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The kind contract lives in package kindapi, which kinds import instead
// of the kernel. These aliases are the same types under the kernel's name,
// for hosts (the CLI, tests, examples) that use both.

type (
	Kind         = kindapi.Kind
	Info         = kindapi.Info
	AmountUnit   = kindapi.AmountUnit
	Op           = kindapi.Op
	Sink         = kindapi.Sink
	Effect       = kindapi.Effect
	Detail       = kindapi.Detail
	SpawnBounds  = kindapi.SpawnBounds
	Description  = kindapi.Description
	Seed         = kindapi.Seed
	Reach        = kindapi.Reach
	Scope        = kindapi.Scope
	GrantContext = kindapi.GrantContext
	FieldError   = kindapi.FieldError
	TaskInfo     = kindapi.TaskInfo
	Call         = kindapi.Call
	Result       = kindapi.Result
	Label        = kindapi.Label
	Blob         = kindapi.Blob
	Error        = kindapi.Error
	Secret       = kindapi.Secret
	SecretSource = kindapi.SecretSource
)

const (
	OpSpawn    = kindapi.OpSpawn
	MaxSpliced = kindapi.MaxSpliced
	MaxShown   = kindapi.MaxShown
)

// Sentinels, one per errno (kindapi's). Match with errors.Is.
var (
	ErrBadHandle = kindapi.ErrBadHandle
	ErrDenied    = kindapi.ErrDenied
	ErrRevoked   = kindapi.ErrRevoked
	ErrExpired   = kindapi.ErrExpired
	ErrFlow      = kindapi.ErrFlow
	ErrLimit     = kindapi.ErrLimit
	ErrFault     = kindapi.ErrFault
	ErrInvalid   = kindapi.ErrInvalid
	ErrApproval  = kindapi.ErrApproval
	ErrNotFound  = kindapi.ErrNotFound
	ErrNotSup    = kindapi.ErrNotSup
	ErrIO        = kindapi.ErrIO
	ErrTimedOut  = kindapi.ErrTimedOut
	ErrWrongType = kindapi.ErrWrongType
	ErrInternal  = kindapi.ErrInternal
)

// Errorf is kindapi.Errorf.
func Errorf(errno abi.Errno, format string, args ...any) error {
	return kindapi.Errorf(errno, format, args...)
}

// ErrnoOf is kindapi.ErrnoOf: the one boundary between host errors and
// errnos.
func ErrnoOf(err error) abi.Errno { return kindapi.ErrnoOf(err) }

// NotPerformed is kindapi.NotPerformed.
func NotPerformed(err error) error { return kindapi.NotPerformed(err) }

// NewLabel is kindapi.NewLabel.
func NewLabel(conf, integ []string) Label { return kindapi.NewLabel(conf, integ) }

// NewBlob is kindapi.NewBlob.
func NewBlob(data []byte, label Label) *Blob { return kindapi.NewBlob(data, label) }

// NewSecret is kindapi.NewSecret.
func NewSecret(v string) Secret { return kindapi.NewSecret(v) }

// DecodeSpec is kindapi.DecodeSpec.
func DecodeSpec(kind string, spec []byte, v any) error { return kindapi.DecodeSpec(kind, spec, v) }

// DecodeJSONValue is kindapi.DecodeJSONValue.
func DecodeJSONValue(b []byte) (any, error) { return kindapi.DecodeJSONValue(b) }

// Prefixed is kindapi.Prefixed.
func Prefixed(field string, err error) error { return kindapi.Prefixed(field, err) }

// FormatBytes is kindapi.FormatBytes.
func FormatBytes(n int64) string { return kindapi.FormatBytes(n) }

// Printable is kindapi.Printable: everything a guest can influence goes
// through it before a person reads it.
func Printable(s string) string { return kindapi.Printable(s) }

// EscapeText is kindapi.EscapeText: Printable for multi-line text.
func EscapeText(s string) string { return kindapi.EscapeText(s) }

// ParseBudget is kindapi.ParseBudget.
func ParseBudget(kind Kind, s Scope, text string) (int64, error) {
	return kindapi.ParseBudget(kind, s, text)
}

// NewCall is kindapi.NewCall.
func NewCall(op string, args []byte, scope Scope, task TaskInfo, logger hclog.Logger, blob func(abi.Handle) (*Blob, error)) *Call {
	return kindapi.NewCall(op, args, scope, task, logger, blob)
}

// ScopeAs is kindapi.ScopeAs.
func ScopeAs[T interface {
	comparable
	Scope
}](s Scope, kind string) (T, error) {
	return kindapi.ScopeAs[T](s, kind)
}

// AsScope is kindapi.AsScope.
func AsScope[T Scope](s T, err error) (Scope, error) { return kindapi.AsScope(s, err) }
