// Package forward runs a guest on one machine while its kernel, on
// another, mediates every host call it makes. The guest's node registers
// Stubs as its engine's "mandate" host module: each host call the guest
// makes becomes a Call (the call's name, its parameters, the guest
// memory's size and the bytes of guest memory the call reads), sent to the
// kernel's node and answered with a Reply (the call's result and the bytes
// it writes into guest memory), which the stub applies before the guest
// runs again. The kernel's node serves a Call with Serve: its own host
// functions, run against a proxy of the guest's memory.
//
// So the kernel of the run keeps all authority: handles, labels, budgets,
// revocation and the audit log are the kernel's, and the guest's node
// holds nothing but the guest. Revoking a capability a remote guest holds
// refuses its very next call, because that call is decided where the
// revocation happened.
//
// What a Call ships follows from the host function's declaration (the
// Params of the kernel's sandbox.HostFunc, from which Stubs are made):
// the guest memory at each In parameter, when its length is within the
// parameter's limit and the memory; a longer or misplaced one is not
// shipped and the kernel refuses it from the parameters alone (ELIMIT,
// EFAULT), exactly as for a local guest. A Buf parameter ships nothing:
// the view of it the kernel fills (Memory.Read) is a fresh buffer whose
// bytes the Reply carries back. A host function reading anything else
// would find nothing there and fail closed (EFAULT); the kernel's tests
// check that each reads and writes only what it declares.
//
// The transport is the caller's: a fleet node sends Calls over NATS
// request/reply (internal/fleet); Loopback runs the guest on a second
// engine in this process, for tests. Messages are encoded with Marshal and
// decoded with Unmarshal, which bounds everything it allocates.
package forward

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/sandbox"
)

// Region is bytes of guest memory at an offset.
type Region struct {
	Off  uint32
	Data []byte
}

// Call is one host call of a remote guest.
type Call struct {
	Seq     uint64 // 1, 2, ... within one run
	Name    string
	Params  []uint64
	Size    uint32 // the guest memory's size
	Regions []Region
}

// Reply answers a Call.
type Reply struct {
	Seq    uint64
	Result uint64 // the host function's result (an errno)
	Writes []Region
}

// Exit is how a remote guest's run ended.
type Exit struct {
	Kind   ExitKind
	Code   uint32 // KindExit, KindTrap
	Msg    string // the trap, or the error
	Stdout []byte // what the guest printed, at most MaxOutput
	Stderr []byte
}

// ExitKind says how a run ended.
type ExitKind uint8

const (
	KindOK       ExitKind = iota // returned, or exited 0
	KindExit                     // exited non-zero
	KindTrap                     // trapped
	KindMemory                   // died after a refused memory growth
	KindTimeout                  // stopped at its deadline
	KindCanceled                 // killed
	KindError                    // could not run (the module, the node)
)

// MaxOutput bounds the stdout and the stderr an Exit carries.
const MaxOutput = 64 << 10

// ExitOf describes the error Module.Run returned.
func ExitOf(err error, stdout, stderr []byte) *Exit {
	e := &Exit{Stdout: clip(stdout), Stderr: clip(stderr)}
	var ee *sandbox.ExitError
	switch {
	case err == nil:
		e.Kind = KindOK
	case errors.Is(err, sandbox.ErrTimeout):
		e.Kind = KindTimeout
	case errors.Is(err, sandbox.ErrCanceled):
		e.Kind = KindCanceled
	case errors.As(err, &ee):
		e.Kind, e.Code, e.Msg = KindExit, ee.Code, ee.Trap
		if ee.Trap != "" {
			e.Kind = KindTrap
		}
		if errors.Is(err, sandbox.ErrMemoryLimit) {
			e.Kind = KindMemory
		}
	case errors.Is(err, sandbox.ErrMemoryLimit):
		e.Kind = KindMemory
	default:
		e.Kind, e.Msg = KindError, err.Error()
	}
	if len(e.Msg) > MaxOutput { // what Unmarshal accepts
		e.Msg = e.Msg[:MaxOutput]
	}
	return e
}

func clip(b []byte) []byte {
	if len(b) > MaxOutput {
		b = b[:MaxOutput]
	}
	return b
}

// Err is the error Module.Run returns for e, the inverse of ExitOf.
func (e *Exit) Err() error {
	switch e.Kind {
	case KindOK:
		return nil
	case KindExit:
		return &sandbox.ExitError{Code: e.Code}
	case KindTrap:
		return &sandbox.ExitError{Code: e.Code, Trap: e.Msg}
	case KindMemory:
		return &sandbox.ExitError{Code: e.Code, Trap: e.Msg, Err: sandbox.ErrMemoryLimit}
	case KindTimeout:
		return sandbox.ErrTimeout
	case KindCanceled:
		return sandbox.ErrCanceled
	}
	return fmt.Errorf("remote guest: %s", e.Msg)
}

// Sender sends a Call to the guest's kernel and returns its Reply.
type Sender interface {
	Send(ctx context.Context, c *Call) (*Reply, error)
}

type senderKey struct{}

// session is one remote run as its stubs see it.
type session struct {
	s    Sender
	seq  atomic.Uint64
	max  int // the largest Call the transport carries; 0: no bound
	fail atomic.Pointer[error]
}

// WithSender returns ctx for Module.Run of a guest whose host calls go to
// s. maxCall bounds the encoded size of one Call (a NATS server's max
// payload); a call that would not fit is ELIMIT without being sent.
func WithSender(ctx context.Context, s Sender, maxCall int) context.Context {
	return context.WithValue(ctx, senderKey{}, &session{s: s, max: maxCall})
}

// Failed returns the first transport error of the run ctx was made for by
// WithSender: a call that could not reach the kernel (the guest saw
// EINTERNAL).
func Failed(ctx context.Context) error {
	s, _ := ctx.Value(senderKey{}).(*session)
	if s == nil {
		return nil
	}
	if p := s.fail.Load(); p != nil {
		return *p
	}
	return nil
}

// Stubs are the host functions of a guest's node, one for each of host
// (the kernel's, kernel.HostCallFuncs): the same name and parameters, and
// a function that forwards the call through the Sender of its ctx
// (WithSender), shipping the guest memory at each of its In parameters.
// A call from a context with none, or one the transport fails, is
// EINTERNAL: nothing is performed that the kernel did not decide.
func Stubs(host []sandbox.HostFunc) []sandbox.HostFunc {
	funcs := make([]sandbox.HostFunc, len(host))
	for i, f := range host {
		funcs[i] = sandbox.HostFunc{Name: f.Name, Params: slices.Clone(f.Params), Fn: stub(f.Name, f.Params)}
	}
	return funcs
}

// span is a (pointer, length) pair of a host call's parameters, and the
// most the function reads or fills there.
type span struct{ ptr, n, limit int }

// spans lists the (pointer, length) pairs of params of the kind k.
func spans(params []sandbox.Param, k sandbox.ParamKind) []span {
	var ss []span
	for i, p := range params {
		if p.Kind == k && i+1 < len(params) {
			ss = append(ss, span{i, i + 1, p.Limit})
		}
	}
	return ss
}

func stub(name string, params []sandbox.Param) func(context.Context, sandbox.Memory, []uint64) {
	n, reads := len(params), spans(params, sandbox.In)
	return func(ctx context.Context, mem sandbox.Memory, stack []uint64) {
		s, _ := ctx.Value(senderKey{}).(*session)
		if s == nil {
			stack[0] = uint64(abi.EINTERNAL)
			return
		}
		c := &Call{Seq: s.seq.Add(1), Name: name, Params: append([]uint64(nil), stack[:n]...), Size: mem.Size()}
		size := 64 + len(name) + 10*n
		for _, r := range reads {
			ptr, l := uint32(stack[r.ptr]), uint32(stack[r.n])
			if l == 0 || int64(l) > int64(r.limit) || uint64(ptr)+uint64(l) > uint64(c.Size) {
				continue // the kernel refuses it from the parameters
			}
			b, ok := mem.Read(ptr, l)
			if !ok {
				continue
			}
			c.Regions = append(c.Regions, Region{Off: ptr, Data: b}) // encoded before the guest runs again
			size += 10 + len(b)
		}
		if s.max > 0 && size > s.max {
			stack[0] = uint64(abi.ELIMIT)
			return
		}
		r, err := s.s.Send(ctx, c)
		if err == nil && r.Seq != c.Seq {
			err = fmt.Errorf("forward: reply %d to call %d", r.Seq, c.Seq)
		}
		if err != nil {
			s.fail.CompareAndSwap(nil, &err)
			stack[0] = uint64(abi.EINTERNAL)
			return
		}
		for _, w := range r.Writes {
			if !mem.Write(w.Off, w.Data) {
				stack[0] = uint64(abi.EINTERNAL)
				return
			}
		}
		stack[0] = r.Result
	}
}

// Serve runs c with the kernel's host functions against a proxy of the
// remote guest's memory and returns the Reply: ctx is the one the kernel
// gave Module.Run (it names the calling task). A malformed Call (unknown
// name, wrong parameter count, regions outside the memory) is EINTERNAL
// and runs nothing, as is one whose ctx has ended: a guest stopped at its
// deadline or killed makes no more calls, whatever was on its way.
func Serve(ctx context.Context, host map[string]sandbox.HostFunc, c *Call) *Reply {
	r := &Reply{Seq: c.Seq, Result: uint64(abi.EINTERNAL)}
	f, ok := host[c.Name]
	if !ok || len(c.Params) != len(f.Params) || ctx.Err() != nil {
		return r
	}
	for _, g := range c.Regions {
		if uint64(g.Off)+uint64(len(g.Data)) > uint64(c.Size) {
			return r
		}
	}
	m := &proxy{size: c.Size, regions: c.Regions}
	for _, b := range spans(f.Params, sandbox.Buf) {
		// i32 parameters: an engine may leave the upper bits set.
		ptr, n := uint64(uint32(c.Params[b.ptr])), uint64(uint32(c.Params[b.n]))
		m.bufs = append(m.bufs, [2]uint64{ptr, ptr + min(n, uint64(b.limit))})
	}
	stack := make([]uint64, max(1, len(c.Params)))
	copy(stack, c.Params)
	f.Fn(ctx, m, stack)
	r.Result, r.Writes = stack[0], m.writes
	if r.Result != uint64(abi.ESUCCESS) {
		// A function writes its results only on success (ABI.md): a
		// buffer it took a view of is not one of them.
		r.Writes = m.writes[:0:0]
		for i, w := range m.writes {
			if !m.views[i] {
				r.Writes = append(r.Writes, w)
			}
		}
	}
	return r
}

// HostMap indexes host functions by name, for Serve.
func HostMap(funcs []sandbox.HostFunc) map[string]sandbox.HostFunc {
	m := make(map[string]sandbox.HostFunc, len(funcs))
	for _, f := range funcs {
		m[f.Name] = f
	}
	return m
}

// proxy is a remote guest's memory during one call: the regions the call
// shipped (its In parameters), the spans of its Buf parameters, and the
// writes the reply carries back.
type proxy struct {
	size    uint32
	regions []Region
	bufs    [][2]uint64 // [start, end) of each Buf parameter, within its limit
	writes  []Region
	views   map[int]bool // writes that are views of a Buf
}

func (m *proxy) Size() uint32 { return m.size }

// Read returns the bytes of a region the call shipped. Within a Buf
// parameter, which the function fills and never reads, it returns a fresh
// buffer instead, the view of guest memory the function fills: all of it
// reaches the guest with the reply, when the call succeeds. Anything else
// was not shipped: it fails closed.
func (m *proxy) Read(off, n uint32) ([]byte, bool) {
	end := uint64(off) + uint64(n)
	if end > uint64(m.size) {
		return nil, false
	}
	for _, g := range m.regions {
		if off >= g.Off && end <= uint64(g.Off)+uint64(len(g.Data)) {
			return g.Data[off-g.Off : uint64(off-g.Off)+uint64(n)], true
		}
	}
	for _, b := range m.bufs {
		if uint64(off) >= b[0] && end <= b[1] {
			if n == 0 {
				return []byte{}, true
			}
			view := make([]byte, n)
			if m.views == nil {
				m.views = map[int]bool{}
			}
			m.views[len(m.writes)] = true
			m.writes = append(m.writes, Region{Off: off, Data: view})
			return view, true
		}
	}
	return nil, false // not shipped: fail closed
}

func (m *proxy) Write(off uint32, v []byte) bool {
	if uint64(off)+uint64(len(v)) > uint64(m.size) {
		return false
	}
	m.writes = append(m.writes, Region{Off: off, Data: append([]byte(nil), v...)})
	for _, g := range m.regions { // later reads in this call see it
		lo, hi := max(uint64(off), uint64(g.Off)), min(uint64(off)+uint64(len(v)), uint64(g.Off)+uint64(len(g.Data)))
		if lo < hi {
			copy(g.Data[lo-uint64(g.Off):hi-uint64(g.Off)], v[lo-uint64(off):])
		}
	}
	return true
}

func (m *proxy) ReadUint32Le(off uint32) (uint32, bool) {
	b, ok := m.Read(off, 4)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}

func (m *proxy) WriteUint32Le(off, v uint32) bool {
	return m.Write(off, binary.LittleEndian.AppendUint32(nil, v))
}
