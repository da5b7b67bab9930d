package kindapi

import (
	"errors"
	"fmt"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Error is a kernel decision or failure carrying the errno a guest sees.
// Hosts match it with errors.Is against the sentinels below, which compare
// by errno; guests get only the errno (and the text through last_error).
type Error struct {
	Errno abi.Errno
	Msg   string
	Err   error // optional cause

	msgHasCause bool // Msg already includes Err's text (Errorf with %w)
}

func (e *Error) Error() string {
	s := e.Msg
	if s == "" {
		s = e.Errno.String()
	}
	if e.Err != nil && !e.msgHasCause {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same errno, so that
// errors.Is(err, ErrDenied) holds for every denial.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Errno == e.Errno
}

// Sentinels, one per errno. Match with errors.Is.
var (
	ErrBadHandle = &Error{Errno: abi.EBADHANDLE, Msg: "bad handle"}
	ErrDenied    = &Error{Errno: abi.EDENIED, Msg: "denied"}
	ErrRevoked   = &Error{Errno: abi.EREVOKED, Msg: "revoked"}
	ErrExpired   = &Error{Errno: abi.EEXPIRED, Msg: "expired"}
	ErrFlow      = &Error{Errno: abi.EFLOW, Msg: "flow denied"}
	ErrLimit     = &Error{Errno: abi.ELIMIT, Msg: "limit reached"}
	ErrFault     = &Error{Errno: abi.EFAULT, Msg: "bad guest pointer"}
	ErrInvalid   = &Error{Errno: abi.EINVAL, Msg: "invalid argument"}
	ErrApproval  = &Error{Errno: abi.EAPPROVAL, Msg: "approval refused"}
	ErrNotFound  = &Error{Errno: abi.ENOTFOUND, Msg: "not found"}
	ErrNotSup    = &Error{Errno: abi.ENOTSUP, Msg: "operation not supported"}
	ErrIO        = &Error{Errno: abi.EIO, Msg: "effect failed"}
	ErrTimedOut  = &Error{Errno: abi.ETIMEDOUT, Msg: "timed out"}
	ErrWrongType = &Error{Errno: abi.EWRONGTYPE, Msg: "wrong handle type"}
	ErrInternal  = &Error{Errno: abi.EINTERNAL, Msg: "internal error"}
)

// Errorf returns an *Error with the given errno and a formatted message.
// A %w verb wraps a cause.
func Errorf(errno abi.Errno, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	cause := errors.Unwrap(err)
	return &Error{Errno: errno, Msg: err.Error(), Err: cause, msgHasCause: cause != nil}
}

// ErrnoOf translates an error to the errno a guest sees. It is the one
// boundary between host errors and errnos: anything that is not an *Error
// is EINTERNAL, so an unexpected failure denies (fail closed).
func ErrnoOf(err error) abi.Errno {
	if err == nil {
		return abi.ESUCCESS
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Errno
	}
	return abi.EINTERNAL
}
