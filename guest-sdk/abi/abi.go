// Package abi is the wire contract between Mandate guests and the kernel:
// the host-call names of the "mandate" import module, the errno values they
// return, the handle encoding and the encodings of the structured arguments
// and results that cross the boundary.
//
// It imports only the standard library so that both the kernel and guests
// (GOOS=wasip1 GOARCH=wasm) can use it. Every host call is documented in
// ../ABI.md.
//
// A guest calls, for example:
//
//	//go:wasmimport mandate cap_call
//	func capCall(h, opPtr, opLen, argPtr, argLen, outPtr uint32) uint32
package abi

// ModuleName is the import module every host call lives in.
// SDKVersion is this guest SDK's module version: the version of
// github.com/mandatevm/mandate/guest-sdk the runtime's go.mod requires, and
// what "mandate new" writes into a tool's go.mod.
const SDKVersion = "v0.1.0"

const ModuleName = "mandate"

// Host-call names. Every function takes only i32 parameters and returns one
// i32, an Errno. See ABI.md for the parameters and the errors of each.
const (
	CapLookupName   = "cap_lookup"   // (name_ptr, name_len, out_handle_ptr) errno
	CapCallName     = "cap_call"     // (h, op_ptr, op_len, arg_ptr, arg_len, out_handle_ptr) errno
	CapDeriveName   = "cap_derive"   // (h, req_ptr, req_len, out_handle_ptr) errno
	CapRevokeName   = "cap_revoke"   // (h) errno
	CapDescribeName = "cap_describe" // (h, out_handle_ptr) errno
	HandleDropName  = "handle_drop"  // (h) errno
	BlobCreateName  = "blob_create"  // (ptr, len, out_handle_ptr) errno
	BlobLenName     = "blob_len"     // (h, out_len_ptr) errno
	BlobReadName    = "blob_read"    // (h, offset, buf_ptr, buf_len, out_n_ptr) errno
	TaskInputName   = "task_input"   // (out_handle_ptr) errno
	TaskResultName  = "task_result"  // (h) errno
	LastErrorName   = "last_error"   // (buf_ptr, buf_len, out_n_ptr) errno
	TaskSpawnName   = "task_spawn"   // (spawn_h, req_ptr, req_len, out_task_ptr) errno
	TaskWaitName    = "task_wait"    // (task_h, out_handle_ptr) errno
	TaskKillName    = "task_kill"    // (task_h) errno
)

// HostCall describes one host function: its name and how many i32
// parameters it takes. It always returns one i32 Errno.
type HostCall struct {
	Name   string
	Params int
}

// HostCalls lists every host function of the ABI, in a stable order. It
// returns a copy: the table the kernel registers from cannot be changed by
// anything that imports this package.
func HostCalls() []HostCall { return append([]HostCall(nil), hostCalls[:]...) }

var hostCalls = [...]HostCall{
	{CapLookupName, 3},
	{CapCallName, 6},
	{CapDeriveName, 4},
	{CapRevokeName, 1},
	{CapDescribeName, 2},
	{HandleDropName, 1},
	{BlobCreateName, 3},
	{BlobLenName, 2},
	{BlobReadName, 5},
	{TaskInputName, 1},
	{TaskResultName, 1},
	{LastErrorName, 3},
	{TaskSpawnName, 4},
	{TaskWaitName, 2},
	{TaskKillName, 1},
}

// Limits the kernel applies to what a guest hands it. A value over a limit
// gets ELIMIT (or EINVAL for names), never a partial read.
const (
	// MaxOpLen bounds an operation name.
	MaxOpLen = 64
	// MaxNameLen bounds a capability name passed to cap_lookup.
	MaxNameLen = 256
	// MaxArgLen bounds the argument document of cap_call and cap_derive.
	MaxArgLen = 1 << 20
	// MaxBlobLen bounds any blob, whether a guest creates it or a kind
	// returns it.
	MaxBlobLen = 64 << 20
	// MaxErrorLen bounds the text last_error returns.
	MaxErrorLen = 1024
)

// Handle names an entry in the calling task's capability table. It is the
// slot index in the low HandleIndexBits bits and the slot's generation
// above them. Zero is never a valid handle ("no handle").
type Handle uint32

// HandleIndexBits is how many low bits of a Handle hold the slot index.
const HandleIndexBits = 12

// MakeHandle builds a handle from a slot index and generation.
func MakeHandle(index, gen uint32) Handle {
	return Handle(gen<<HandleIndexBits | index&(1<<HandleIndexBits-1))
}

// Index is the slot index of h.
func (h Handle) Index() uint32 { return uint32(h) & (1<<HandleIndexBits - 1) }

// Gen is the generation of h.
func (h Handle) Gen() uint32 { return uint32(h) >> HandleIndexBits }

// MaxGen is the largest generation a handle can carry. A slot whose
// generation would pass it is retired, so a stale handle never aliases.
const MaxGen = 1<<(32-HandleIndexBits) - 1
