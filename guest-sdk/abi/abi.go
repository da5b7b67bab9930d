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
// i32, an Errno. ABI.md documents the parameters and the errnos of each;
// the runtime declares them beside their implementations
// (kernel/hostcall.go), and its tests check ABI.md and the guest SDKs
// against those declarations.
const (
	CapLookupName   = "cap_lookup"
	CapCallName     = "cap_call"
	CapDeriveName   = "cap_derive"
	CapRevokeName   = "cap_revoke"
	CapDescribeName = "cap_describe"
	HandleDropName  = "handle_drop"
	BlobCreateName  = "blob_create"
	BlobLenName     = "blob_len"
	BlobReadName    = "blob_read"
	TaskInputName   = "task_input"
	TaskResultName  = "task_result"
	LastErrorName   = "last_error"
	TaskSpawnName   = "task_spawn"
	TaskWaitName    = "task_wait"
	TaskKillName    = "task_kill"
)

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
