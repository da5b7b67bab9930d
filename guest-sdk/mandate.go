// Package mandate is the Go SDK for Mandate guests: typed wrappers over the
// host calls of the "mandate" import module (see ABI.md).
//
// A guest starts with no authority. It finds the capabilities its manifest
// granted by name, calls them, narrows them, and reads the blobs they
// return:
//
//	flights, err := mandate.Lookup("flights")
//	if err != nil { ... }
//	narrow, err := flights.Derive(map[string]any{"paths": []string{"/search/oneway"}})
//	res, err := narrow.Call("fetch", reqJSON)
//	body, err := res.Bytes()
//	mandate.SetResult(body)
//
// Every failure is an *Error carrying the kernel's errno; errors.Is(err,
// abi.EDENIED) matches by errno. Build guests with GOOS=wasip1 GOARCH=wasm;
// on other platforms every call fails with ENOTSUP.
//
// # No ambient network or files
//
// A guest gets no sockets and no preopened directories, so the standard
// library's own networking and files fail, whatever the manifest grants:
//
//	http.Get("http://127.0.0.1:8080/hello")
//	// Get "http://127.0.0.1:8080/hello": dial tcp 127.0.0.1:8080:
//	// address 127.0.0.1:8080: connect: Connection refused
//	// (even with a server listening there)
//	os.Open("notes.json") // or any path
//	// open notes.json: Bad file number (EBADF)
//
// Use the capabilities instead: for HTTP, a net capability through
// [github.com/mandatevm/mandate/guest-sdk/net] (net.NewClient(name) is an
// *http.Client on it, net.Fetch a single request); for records, a data
// capability ([Cap.Call] with "read", "query" or "write"); for a file of the
// person's, the task's input ([Input]: mandate run --input FILE).
package mandate

import (
	"encoding/json"
	"errors"
	"unsafe"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Error is a failed host call.
type Error struct {
	Errno abi.Errno
	Call  string // the host call, e.g. "cap_call"
	// Reason is the kernel's explanation (from last_error), if any.
	Reason string
}

func (e *Error) Error() string {
	s := e.Call + ": " + e.Errno.String()
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is matches an abi.Errno, so errors.Is(err, abi.EDENIED) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(abi.Errno)
	return ok && t == e.Errno
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

func fail(call string, e abi.Errno) error {
	return &Error{Errno: e, Call: call, Reason: LastError()}
}

// ErrnoOf returns the errno of an SDK error, ESUCCESS for nil and
// EINTERNAL for anything else.
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

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func strptr(s string) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.StringData(s))
}

// scratch receives every host call's u32 result. A package variable rather
// than a local keeps the hot path free of allocations (a local whose address
// crosses into the host escapes to the heap); it is safe because a wasip1
// program is single-threaded and no goroutine switch happens between a host
// call and the read of its result.
var scratch uint32

// Cap is a handle to a capability in this task's table.
type Cap struct{ h abi.Handle }

// CapFromHandle wraps a raw handle (for hostile tests and other SDKs).
func CapFromHandle(h abi.Handle) Cap { return Cap{h} }

// Handle is the raw handle.
func (c Cap) Handle() abi.Handle { return c.h }

// Lookup finds a capability the manifest granted under name.
func Lookup(name string) (Cap, error) {
	if e := capLookup(strptr(name), uint32(len(name)), &scratch); e != abi.ESUCCESS {
		return Cap{}, fail(abi.CapLookupName, e)
	}
	return Cap{abi.Handle(scratch)}, nil
}

// Call performs op with an argument document. The result is a blob, or
// the zero Blob when the operation returns nothing.
func (c Cap) Call(op string, args []byte) (Blob, error) {
	e := capCall(uint32(c.h), strptr(op), uint32(len(op)), ptr(args), uint32(len(args)), &scratch)
	if e != abi.ESUCCESS {
		return Blob{}, fail(abi.CapCallName, e)
	}
	return Blob{abi.Handle(scratch)}, nil
}

// CallNoResult is Call without reading back a reason on failure: the
// cheapest round trip (benchmarks use it).
func (c Cap) CallNoResult(op string, args []byte) abi.Errno {
	return capCall(uint32(c.h), strptr(op), uint32(len(op)), ptr(args), uint32(len(args)), &scratch)
}

// Derive asks for a narrower capability. req is the kind's narrowing
// request: a JSON document as []byte, or any value json.Marshal encodes.
// Asking for more than c allows fails with EDENIED.
func (c Cap) Derive(req any) (Cap, error) {
	b, err := encodeArg(req)
	if err != nil {
		return Cap{}, err
	}
	if e := capDerive(uint32(c.h), ptr(b), uint32(len(b)), &scratch); e != abi.ESUCCESS {
		return Cap{}, fail(abi.CapDeriveName, e)
	}
	return Cap{abi.Handle(scratch)}, nil
}

// Revoke revokes c and everything derived from it, in every task.
func (c Cap) Revoke() error {
	if e := capRevoke(uint32(c.h)); e != abi.ESUCCESS {
		return fail(abi.CapRevokeName, e)
	}
	return nil
}

// Drop removes c from this task's table.
func (c Cap) Drop() error { return drop(c.h) }

// Describe returns the kernel's JSON description of c: its id, kind, ops
// and scope (never secrets).
func (c Cap) Describe() ([]byte, error) {
	if e := capDescribe(uint32(c.h), &scratch); e != abi.ESUCCESS {
		return nil, fail(abi.CapDescribeName, e)
	}
	b := Blob{abi.Handle(scratch)}
	defer b.Drop()
	return b.Bytes()
}

func drop(h abi.Handle) error {
	if e := handleDrop(uint32(h)); e != abi.ESUCCESS {
		return fail(abi.HandleDropName, e)
	}
	return nil
}

func encodeArg(v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return []byte("{}"), nil
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	default:
		return json.Marshal(v)
	}
}

// Blob is a handle to an immutable kernel-held byte string.
type Blob struct{ h abi.Handle }

// BlobFromHandle wraps a raw handle.
func BlobFromHandle(h abi.Handle) Blob { return Blob{h} }

// Handle is the raw handle; zero means no blob.
func (b Blob) Handle() abi.Handle { return b.h }

// IsZero reports whether b names no blob.
func (b Blob) IsZero() bool { return b.h == 0 }

// NewBlob hands data to the kernel and returns its handle. The blob carries
// this task's label.
func NewBlob(data []byte) (Blob, error) {
	if e := blobCreate(ptr(data), uint32(len(data)), &scratch); e != abi.ESUCCESS {
		return Blob{}, fail(abi.BlobCreateName, e)
	}
	return Blob{abi.Handle(scratch)}, nil
}

// Len is the blob's size. Asking does not read it.
func (b Blob) Len() (int, error) {
	if e := blobLen(uint32(b.h), &scratch); e != abi.ESUCCESS {
		return 0, fail(abi.BlobLenName, e)
	}
	return int(scratch), nil
}

// ReadAt copies blob bytes from off into p. Reading a blob raises this
// task's label to include the blob's.
func (b Blob) ReadAt(p []byte, off int) (int, error) {
	if e := blobRead(uint32(b.h), uint32(off), ptr(p), uint32(len(p)), &scratch); e != abi.ESUCCESS {
		return 0, fail(abi.BlobReadName, e)
	}
	return int(scratch), nil
}

// Bytes reads the whole blob.
func (b Blob) Bytes() ([]byte, error) {
	n, err := b.Len()
	if err != nil {
		return nil, err
	}
	p := make([]byte, n)
	for off := 0; off < n; {
		m, err := b.ReadAt(p[off:], off)
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		off += m
	}
	return p, nil
}

// Drop removes the blob's handle from this task's table.
func (b Blob) Drop() error { return drop(b.h) }

// Input returns the task's input blob; ENOTFOUND when there is none.
func Input() (Blob, error) {
	if e := taskInput(&scratch); e != abi.ESUCCESS {
		return Blob{}, &Error{Errno: e, Call: abi.TaskInputName}
	}
	return Blob{abi.Handle(scratch)}, nil
}

// InputBytes reads the task's input, nil when there is none.
func InputBytes() ([]byte, error) {
	b, err := Input()
	if err != nil {
		if ErrnoOf(err) == abi.ENOTFOUND {
			return nil, nil
		}
		return nil, err
	}
	defer b.Drop()
	return b.Bytes()
}

// SetResultBlob makes b the task's result.
func SetResultBlob(b Blob) error {
	if e := taskResult(uint32(b.h)); e != abi.ESUCCESS {
		return fail(abi.TaskResultName, e)
	}
	return nil
}

// SetResult makes data the task's result.
func SetResult(data []byte) error {
	b, err := NewBlob(data)
	if err != nil {
		return err
	}
	return SetResultBlob(b)
}

// LastError returns the kernel's reason for this task's last failed call.
func LastError() string {
	var buf [abi.MaxErrorLen]byte
	if e := lastError(ptr(buf[:]), uint32(len(buf)), &scratch); e != abi.ESUCCESS {
		return ""
	}
	return string(buf[:scratch])
}
