package forward

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/sandbox"
)

// Parameters as the kernel declares them (kernel/hostcall.go), for
// host functions of the shapes these tests use.
var (
	pHandle = sandbox.Param{Name: "h", Kind: sandbox.Handle}
	pLen    = sandbox.Param{Name: "len", Kind: sandbox.Len}
	pOut    = sandbox.Param{Name: "out", Kind: sandbox.Out, Size: 4}
	pOp     = sandbox.Param{Name: "op_ptr", Kind: sandbox.In, Limit: abi.MaxOpLen}
	pArg    = sandbox.Param{Name: "arg_ptr", Kind: sandbox.In, Limit: abi.MaxArgLen}
	pBuf    = sandbox.Param{Name: "buf_ptr", Kind: sandbox.Buf, Limit: 64}

	capCallParams  = []sandbox.Param{pHandle, pOp, pLen, pArg, pLen, pOut}
	blobLenParams  = []sandbox.Param{pHandle, pOut}
	blobReadParams = []sandbox.Param{pHandle, {Name: "offset"}, pBuf, pLen, pOut}
)

// declared is a host module of those shapes, whose functions answer
// ENOTSUP.
func declared() []sandbox.HostFunc {
	fn := func(_ context.Context, _ sandbox.Memory, p []uint64) { p[0] = uint64(abi.ENOTSUP) }
	return []sandbox.HostFunc{
		{Name: abi.CapCallName, Params: capCallParams, Fn: fn},
		{Name: abi.BlobLenName, Params: blobLenParams, Fn: fn},
		{Name: abi.BlobReadName, Params: blobReadParams, Fn: fn},
	}
}

// TestStubsFollowDeclarations: Stubs makes one stub for each declared
// host function, with its name and parameters (a copy), and the spans it
// ships are its In parameters.
func TestStubsFollowDeclarations(t *testing.T) {
	host := declared()
	stubs := Stubs(host)
	if len(stubs) != len(host) {
		t.Fatalf("%d stubs for %d host functions", len(stubs), len(host))
	}
	for i, f := range stubs {
		if f.Name != host[i].Name || !reflect.DeepEqual(f.Params, host[i].Params) {
			t.Errorf("stub %d is %s%v, want %s%v", i, f.Name, f.Params, host[i].Name, host[i].Params)
		}
	}
	stubs[0].Params[1].Limit = 1 // the stubs' parameters are their own
	if host[0].Params[1].Limit != abi.MaxOpLen {
		t.Errorf("changing a stub's parameters changed the declaration's")
	}
	for _, tc := range []struct {
		params []sandbox.Param
		kind   sandbox.ParamKind
		want   []span
	}{
		{capCallParams, sandbox.In, []span{{1, 2, abi.MaxOpLen}, {3, 4, abi.MaxArgLen}}},
		{capCallParams, sandbox.Buf, nil},
		{blobLenParams, sandbox.In, nil},
		{blobReadParams, sandbox.In, nil},
		{blobReadParams, sandbox.Buf, []span{{2, 3, 64}}},
	} {
		if got := spans(tc.params, tc.kind); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("spans(%v, %v) = %v, want %v", tc.params, tc.kind, got, tc.want)
		}
	}
}

// wireCases are messages of each type, from empty to full.
func wireCases() (calls []*Call, replies []*Reply, exits []*Exit) {
	calls = []*Call{
		{Seq: 1, Name: abi.CapRevokeName, Params: []uint64{7}, Size: 65536},
		{Seq: 0, Name: "", Size: 0},
		{Seq: 1<<64 - 1, Name: abi.CapCallName, Params: []uint64{1, 100, 5, 200, 3, 300}, Size: 1<<32 - 1,
			Regions: []Region{{Off: 100, Data: []byte("fetch")}, {Off: 200, Data: []byte("{ }")}}},
		{Seq: 9, Name: abi.BlobCreateName, Params: []uint64{0, 0, 1<<64 - 1}, Size: 1 << 16,
			Regions: []Region{{Off: 0, Data: []byte{}}}},
		{Seq: 3, Name: strings.Repeat("n", 64), Params: make([]uint64, sandboxMaxParams), Size: 1,
			Regions: make([]Region, maxRegions)},
	}
	for i := range calls[4].Regions {
		calls[4].Regions[i] = Region{Off: uint32(i), Data: bytes.Repeat([]byte{byte(i)}, i*1000)}
	}
	replies = []*Reply{
		{Seq: 1, Result: uint64(abi.ESUCCESS)},
		{Seq: 2, Result: uint64(abi.EFAULT), Writes: []Region{{Off: 8, Data: []byte{1, 0, 0, 0}}}},
		{Seq: 1<<64 - 1, Result: 1<<64 - 1, Writes: make([]Region, maxWrites)},
	}
	for i := range replies[2].Writes {
		replies[2].Writes[i] = Region{Off: 1<<32 - 1 - uint32(i), Data: []byte(fmt.Sprint(i))}
	}
	exits = []*Exit{
		{Kind: KindOK},
		{Kind: KindExit, Code: 3, Stdout: []byte("out\n"), Stderr: []byte("err\n")},
		{Kind: KindTrap, Code: 0, Msg: "wasm error: unreachable"},
		{Kind: KindMemory, Msg: "out of memory", Stdout: bytes.Repeat([]byte("x"), MaxOutput), Stderr: bytes.Repeat([]byte("y"), MaxOutput)},
		{Kind: KindTimeout}, {Kind: KindCanceled},
		{Kind: KindError, Code: 1<<32 - 1, Msg: strings.Repeat("m", MaxOutput)},
	}
	return
}

// norm makes empty slices nil, so decoded and original values compare.
func norm(v any) any {
	switch m := v.(type) {
	case *Call:
		c := *m
		if len(c.Params) == 0 {
			c.Params = nil
		}
		c.Regions = normRegions(c.Regions)
		return &c
	case *Reply:
		r := *m
		r.Writes = normRegions(r.Writes)
		return &r
	case *Exit:
		e := *m
		if len(e.Stdout) == 0 {
			e.Stdout = nil
		}
		if len(e.Stderr) == 0 {
			e.Stderr = nil
		}
		return &e
	}
	return v
}

func normRegions(rs []Region) []Region {
	if len(rs) == 0 {
		return nil
	}
	out := make([]Region, len(rs))
	for i, r := range rs {
		out[i] = r
		if len(r.Data) == 0 {
			out[i].Data = nil
		}
	}
	return out
}

// decodeOne unmarshals b and returns the one message it holds.
func decodeOne(t *testing.T, b []byte) any {
	t.Helper()
	c, r, e, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	n, got := 0, any(nil)
	if c != nil {
		n, got = n+1, c
	}
	if r != nil {
		n, got = n+1, r
	}
	if e != nil {
		n, got = n+1, e
	}
	if n != 1 {
		t.Fatalf("Unmarshal returned %d messages, want 1", n)
	}
	return got
}

func TestWireRoundTrip(t *testing.T) {
	calls, replies, exits := wireCases()
	check := func(t *testing.T, want any, b []byte, again func(any) []byte) {
		t.Helper()
		got := decodeOne(t, b)
		if !reflect.DeepEqual(norm(got), norm(want)) {
			t.Fatalf("round trip:\ngot  %.300v\nwant %.300v", got, want)
		}
		if b2 := again(got); !bytes.Equal(b2, b) {
			t.Fatalf("re-marshalled to %d different bytes (from %d)", len(b2), len(b))
		}
	}
	for i, c := range calls {
		t.Run(fmt.Sprintf("call%d", i), func(t *testing.T) {
			check(t, c, MarshalCall(c), func(v any) []byte { return MarshalCall(v.(*Call)) })
		})
	}
	for i, r := range replies {
		t.Run(fmt.Sprintf("reply%d", i), func(t *testing.T) {
			check(t, r, MarshalReply(r), func(v any) []byte { return MarshalReply(v.(*Reply)) })
		})
	}
	for i, e := range exits {
		t.Run(fmt.Sprintf("exit%d", i), func(t *testing.T) {
			check(t, e, MarshalExit(e), func(v any) []byte { return MarshalExit(v.(*Exit)) })
		})
	}
}

// wireMessages are the encodings of wireCases.
func wireMessages() [][]byte {
	calls, replies, exits := wireCases()
	var out [][]byte
	for _, c := range calls {
		out = append(out, MarshalCall(c))
	}
	for _, r := range replies {
		out = append(out, MarshalReply(r))
	}
	for _, e := range exits {
		out = append(out, MarshalExit(e))
	}
	return out
}

func TestUnmarshalRefuses(t *testing.T) {
	// Every strict prefix of a message is cut short, and any byte after
	// it is garbage.
	for i, b := range wireMessages() {
		for n := 0; n < len(b); n += 1 + n/64 {
			if _, _, _, err := Unmarshal(b[:n]); err == nil {
				t.Errorf("message %d cut to %d of %d bytes was accepted", i, n, len(b))
			}
		}
		if _, _, _, err := Unmarshal(b[:len(b)-1]); err == nil {
			t.Errorf("message %d without its last byte was accepted", i)
		}
		for _, tail := range [][]byte{{0}, {'C'}, []byte("garbage")} {
			if _, _, _, err := Unmarshal(append(append([]byte(nil), b...), tail...)); err == nil {
				t.Errorf("message %d with %q after it was accepted", i, tail)
			}
		}
	}

	uv := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	call := func(params, regions uint64) []byte { // a call header with these counts
		b := cat([]byte{tagCall}, uv(1), uv(1), []byte("x"), uv(params))
		for range min(params, 20) {
			b = append(b, 0)
		}
		return cat(b, uv(100, regions))
	}
	cases := map[string][]byte{
		"empty":                          {},
		"unknown type":                   {'Z', 0, 0},
		"a reply's tag alone":            {tagReply},
		"17 params":                      call(17, 0),
		"9 regions":                      cat(call(0, 9), bytes.Repeat([]byte{0, 0}, 9)),
		"17 writes":                      cat([]byte{tagReply}, uv(1, 0, 17), bytes.Repeat([]byte{0, 0}, 17)),
		"a 65-byte name":                 cat([]byte{tagCall}, uv(1, 65), bytes.Repeat([]byte("n"), 65), uv(0, 0, 0)),
		"size past 32 bits":              cat([]byte{tagCall}, uv(1, 0, 0, 1<<32, 0)),
		"offset past 32 bits":            cat([]byte{tagCall}, uv(1, 0, 0, 10, 1, 1<<32, 0)),
		"region longer than the message": cat([]byte{tagCall}, uv(1, 0, 0, 10, 1, 0, 1000), []byte("short")),
		"region over MaxBlobLen":         cat([]byte{tagCall}, uv(1, 0, 0, 10, 1, 0, abi.MaxBlobLen+1)),
		"varint overflow":                cat([]byte{tagReply}, bytes.Repeat([]byte{0xff}, 10), []byte{1}),
		"varint cut":                     {tagReply, 0x80},
		"exit kind past KindError":       cat([]byte{tagExit, byte(KindError) + 1}, uv(0, 0, 0, 0)),
		"exit without a kind":            {tagExit},
		"exit message over MaxOutput":    cat([]byte{tagExit, byte(KindError)}, uv(0, MaxOutput+1), bytes.Repeat([]byte("m"), MaxOutput+1), uv(0, 0)),
		"exit stdout over MaxOutput":     cat([]byte{tagExit, byte(KindOK)}, uv(0, 0, MaxOutput+1), bytes.Repeat([]byte("o"), MaxOutput+1), uv(0)),
		"exit code past 32 bits":         cat([]byte{tagExit, byte(KindExit)}, uv(1<<32, 0, 0, 0)),
		// The same value in more bytes than it needs: two encodings of
		// one message would be two messages.
		"non-minimal varint": {tagReply, 0x81, 0x00, 0, 0},
		"non-minimal zero":   {tagReply, 0x80, 0x80, 0x00, 0, 0},
	}
	for name, b := range cases {
		if c, r, e, err := Unmarshal(b); err == nil {
			t.Errorf("%s: accepted (%+v %+v %+v)", name, c, r, e)
		}
	}

	// Oversized: refused from the length alone.
	big := make([]byte, MaxMessage+1)
	big[0] = tagReply
	if _, _, _, err := Unmarshal(big); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("a %d-byte message: %v, want refused for its size", len(big), err)
	}
	// The largest blob a guest may create fits in one message.
	c := &Call{Seq: 1, Name: abi.BlobCreateName, Params: []uint64{0, abi.MaxBlobLen, 0}, Size: 1<<32 - 1,
		Regions: []Region{{Off: 0, Data: make([]byte, abi.MaxBlobLen)}}}
	if got := decodeOne(t, MarshalCall(c)).(*Call); len(got.Regions) != 1 || len(got.Regions[0].Data) != abi.MaxBlobLen {
		t.Errorf("a MaxBlobLen blob_create did not round trip")
	}
}

// FuzzUnmarshal: Unmarshal never panics, and what it accepts is exactly
// what marshalling its result gives back (one encoding per message).
func FuzzUnmarshal(f *testing.F) {
	for _, b := range wireMessages() {
		if len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add([]byte{tagCall})
	f.Add([]byte{tagExit, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, r, e, err := Unmarshal(b)
		if err != nil {
			return // what comes with an error is not a message
		}
		var again []byte
		switch {
		case c != nil && r == nil && e == nil:
			again = MarshalCall(c)
		case r != nil && c == nil && e == nil:
			again = MarshalReply(r)
		case e != nil && c == nil && r == nil:
			again = MarshalExit(e)
		default:
			t.Fatalf("accepted with %v %v %v", c, r, e)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, re-marshalled to %x", b, again)
		}
	})
}

// brief shows an Exit without its bulk.
func brief(e *Exit) string {
	return fmt.Sprintf("{Kind:%d Code:%d Msg:%.40q (%d bytes) Stdout:%d bytes Stderr:%d bytes}", e.Kind, e.Code, e.Msg, len(e.Msg), len(e.Stdout), len(e.Stderr))
}

func TestExitRoundTrip(t *testing.T) {
	long := strings.Repeat("e", MaxOutput+100)
	rows := []struct {
		name string
		err  error
		want Exit // Stdout, Stderr aside
	}{
		{"ok", nil, Exit{Kind: KindOK}},
		{"exit", &sandbox.ExitError{Code: 2}, Exit{Kind: KindExit, Code: 2}},
		{"exit 0 as an error", &sandbox.ExitError{Code: 0}, Exit{Kind: KindExit}},
		{"trap", &sandbox.ExitError{Trap: "unreachable"}, Exit{Kind: KindTrap, Msg: "unreachable"}},
		{"memory trap", &sandbox.ExitError{Trap: "out of bounds", Err: sandbox.ErrMemoryLimit}, Exit{Kind: KindMemory, Msg: "out of bounds"}},
		{"memory exit", &sandbox.ExitError{Code: 2, Err: sandbox.ErrMemoryLimit}, Exit{Kind: KindMemory, Code: 2}},
		{"memory", fmt.Errorf("instantiate: %w", sandbox.ErrMemoryLimit), Exit{Kind: KindMemory}},
		{"timeout", sandbox.ErrTimeout, Exit{Kind: KindTimeout}},
		{"canceled", fmt.Errorf("run: %w", sandbox.ErrCanceled), Exit{Kind: KindCanceled}},
		{"error", errors.New("no such module"), Exit{Kind: KindError, Msg: "no such module"}},
		// A message longer than a Exit carries is clipped, not an Exit
		// the kernel cannot decode.
		{"long error", errors.New(long), Exit{Kind: KindError, Msg: long[:MaxOutput]}},
		{"long trap", &sandbox.ExitError{Trap: long}, Exit{Kind: KindTrap, Msg: long[:MaxOutput]}},
	}
	out := bytes.Repeat([]byte("o"), MaxOutput+1)
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			e := ExitOf(r.err, out, []byte("err"))
			if len(e.Stdout) != MaxOutput || string(e.Stderr) != "err" {
				t.Errorf("stdout of %d bytes, stderr %q; want %d bytes and %q", len(e.Stdout), e.Stderr, MaxOutput, "err")
			}
			got := *e
			got.Stdout, got.Stderr = nil, nil
			if !reflect.DeepEqual(got, r.want) {
				t.Fatalf("ExitOf(%.40v) = %s, want %s", r.err, brief(&got), brief(&r.want))
			}
			// Over the wire, then back to an error of the same class.
			dec := decodeOne(t, MarshalExit(e)).(*Exit)
			if !reflect.DeepEqual(norm(dec), norm(e)) {
				t.Fatalf("over the wire: %s, want %s", brief(dec), brief(e))
			}
			back := dec.Err()
			for _, class := range []error{sandbox.ErrTimeout, sandbox.ErrCanceled, sandbox.ErrMemoryLimit} {
				if errors.Is(back, class) != errors.Is(r.err, class) {
					t.Errorf("Err() = %.60v: errors.Is %v is %v, want %v", back, class, errors.Is(back, class), errors.Is(r.err, class))
				}
			}
			if (back == nil) != (r.err == nil) {
				t.Fatalf("Err() = %.60v for %.60v", back, r.err)
			}
			var ee, want *sandbox.ExitError
			if errors.As(r.err, &want) {
				if !errors.As(back, &ee) || ee.Code != want.Code || ee.Trap != e.Msg {
					t.Errorf("Err() = %#v, want an ExitError with code %d and trap %.20q", back, want.Code, e.Msg)
				}
			}
			again := ExitOf(back, nil, nil)
			if again.Kind != e.Kind || again.Code != e.Code {
				t.Errorf("ExitOf(Err()) = kind %d code %d, want kind %d code %d", again.Kind, again.Code, e.Kind, e.Code)
			}
			if e.Kind != KindError && again.Msg != e.Msg {
				t.Errorf("ExitOf(Err()).Msg = %.40q, want %.40q", again.Msg, e.Msg)
			}
		})
	}
}

// fakeMem is a guest's memory for the stubs.
type fakeMem struct {
	b      []byte
	writes int
}

func (m *fakeMem) Size() uint32 { return uint32(len(m.b)) }

func (m *fakeMem) Read(off, n uint32) ([]byte, bool) {
	if uint64(off)+uint64(n) > uint64(len(m.b)) {
		return nil, false
	}
	return m.b[off : off+n], true
}

func (m *fakeMem) Write(off uint32, v []byte) bool {
	if uint64(off)+uint64(len(v)) > uint64(len(m.b)) {
		return false
	}
	m.writes++
	copy(m.b[off:], v)
	return true
}

func (m *fakeMem) ReadUint32Le(off uint32) (uint32, bool) {
	b, ok := m.Read(off, 4)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}

func (m *fakeMem) WriteUint32Le(off, v uint32) bool {
	return m.Write(off, binary.LittleEndian.AppendUint32(nil, v))
}

// TestProxyMemory: a host function served by Serve sees the regions the
// call shipped and nothing else; what it writes comes back in the reply;
// a call whose regions lie outside its memory runs nothing.
func TestProxyMemory(t *testing.T) {
	var saw []string
	var gotCtx context.Context
	host := HostMap([]sandbox.HostFunc{{Name: abi.CapCallName, Params: capCallParams, Fn: func(ctx context.Context, mem sandbox.Memory, p []uint64) {
		gotCtx = ctx
		saw = saw[:0]
		if mem.Size() != 1000 {
			t.Errorf("Size() = %d, want 1000", mem.Size())
		}
		read := func(off, n uint32) {
			b, ok := mem.Read(off, n)
			saw = append(saw, fmt.Sprintf("%d+%d:%v:%s", off, n, ok, b))
		}
		read(100, 5)  // shipped
		read(102, 3)  // inside what was shipped
		read(100, 0)  // empty, inside
		read(103, 5)  // runs past the region
		read(500, 4)  // never shipped
		read(999, 2)  // past the memory
		read(0, 1001) // larger than the memory
		v, ok := mem.ReadUint32Le(200)
		saw = append(saw, fmt.Sprintf("u32:%v:%#x", ok, v))
		_, ok = mem.ReadUint32Le(600)
		saw = append(saw, fmt.Sprintf("u32 unshipped:%v", ok))
		// Writes: later reads in the call see them, the reply carries
		// them; past the memory they fail.
		saw = append(saw, fmt.Sprint("write:", mem.Write(101, []byte("EL"))))
		read(100, 5)
		saw = append(saw, fmt.Sprint("u32 write:", mem.WriteUint32Le(uint32(p[5]), 42)))
		saw = append(saw, fmt.Sprint("write past:", mem.Write(998, []byte("abc")), mem.WriteUint32Le(997, 1)))
		p[0] = uint64(abi.ESUCCESS)
	}}})
	ctx := context.WithValue(context.Background(), senderKey{}, "the task's")
	c := &Call{Seq: 5, Name: abi.CapCallName, Params: []uint64{1, 100, 5, 200, 4, 900}, Size: 1000,
		Regions: []Region{{Off: 100, Data: []byte("hello")}, {Off: 200, Data: []byte{1, 2, 3, 4}}}}
	r := Serve(ctx, host, c)
	if r.Seq != 5 || r.Result != uint64(abi.ESUCCESS) {
		t.Fatalf("reply %+v, want seq 5 ESUCCESS", r)
	}
	if gotCtx == nil || gotCtx.Value(senderKey{}) != "the task's" {
		t.Errorf("the host function did not get Serve's ctx")
	}
	want := []string{
		"100+5:true:hello", "102+3:true:llo", "100+0:true:", "103+5:false:", "500+4:false:",
		"999+2:false:", "0+1001:false:", "u32:true:0x4030201", "u32 unshipped:false",
		"write:true", "100+5:true:hELlo", "u32 write:true", "write past:false false",
	}
	if !reflect.DeepEqual(saw, want) {
		t.Errorf("the host function saw\n%q\nwant\n%q", saw, want)
	}
	wantWrites := []Region{{Off: 101, Data: []byte("EL")}, {Off: 900, Data: []byte{42, 0, 0, 0}}}
	if !reflect.DeepEqual(r.Writes, wantWrites) {
		t.Errorf("writes %+v, want %+v", r.Writes, wantWrites)
	}

	// Malformed calls run nothing and are EINTERNAL.
	ran := 0
	host[abi.BlobLenName] = sandbox.HostFunc{Name: abi.BlobLenName, Params: blobLenParams, Fn: func(_ context.Context, _ sandbox.Memory, p []uint64) {
		ran++
		p[0] = 0
	}}
	bad := map[string]*Call{
		"a region past the memory":     {Name: abi.BlobLenName, Params: []uint64{1, 0}, Size: 10, Regions: []Region{{Off: 8, Data: []byte("abc")}}},
		"a region at 4 GiB":            {Name: abi.BlobLenName, Params: []uint64{1, 0}, Size: 1<<32 - 1, Regions: []Region{{Off: 1<<32 - 2, Data: []byte("abc")}}},
		"a region in no memory":        {Name: abi.BlobLenName, Params: []uint64{1, 0}, Size: 0, Regions: []Region{{Off: 0, Data: []byte("a")}}},
		"too few parameters":           {Name: abi.BlobLenName, Params: []uint64{1}, Size: 10},
		"too many parameters":          {Name: abi.BlobLenName, Params: []uint64{1, 2, 3}, Size: 10},
		"a host call the kernel lacks": {Name: abi.TaskKillName, Params: []uint64{1}, Size: 10},
		"no name":                      {Params: []uint64{1, 0}, Size: 10},
	}
	for name, c := range bad {
		c.Seq = 77
		if r := Serve(ctx, host, c); r.Result != uint64(abi.EINTERNAL) || r.Seq != 77 || len(r.Writes) != 0 {
			t.Errorf("%s: reply %+v, want EINTERNAL to call 77", name, r)
		}
	}
	if ran != 0 {
		t.Errorf("a malformed call ran its host function %d times", ran)
	}
	if r := Serve(ctx, host, &Call{Seq: 1, Name: abi.BlobLenName, Params: []uint64{1, 0}, Size: 10}); r.Result != 0 || ran != 1 {
		t.Errorf("a well-formed call: %+v, ran %d", r, ran)
	}
	// A call whose ctx has ended (the guest stopped at its deadline or
	// was killed while the call was on its way) runs nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if r := Serve(cctx, host, &Call{Seq: 2, Name: abi.BlobLenName, Params: []uint64{1, 0}, Size: 10}); r.Result != uint64(abi.EINTERNAL) || ran != 1 {
		t.Errorf("a call after the run's end: %+v, ran %d", r, ran)
	}
}

// sendFunc is a Sender.
type sendFunc func(ctx context.Context, c *Call) (*Reply, error)

func (f sendFunc) Send(ctx context.Context, c *Call) (*Reply, error) { return f(ctx, c) }

func stubOf(t *testing.T, name string) func(context.Context, sandbox.Memory, []uint64) {
	t.Helper()
	for _, f := range Stubs(declared()) {
		if f.Name == name {
			return f.Fn
		}
	}
	t.Fatalf("no stub %s", name)
	return nil
}

// TestForwardStubs: a stub ships the spans Reads names when they are
// within their limit and the memory, applies the reply's writes, and
// fails closed (EINTERNAL) without a Sender, on a transport error, or on
// a reply to another call.
func TestForwardStubs(t *testing.T) {
	mem := &fakeMem{b: make([]byte, 4096)}
	copy(mem.b[100:], "fetch")
	copy(mem.b[200:], `{"url":"/"}`)
	var sent []*Call
	reply := func(c *Call) *Reply {
		return &Reply{Seq: c.Seq, Result: uint64(abi.EDENIED), Writes: []Region{{Off: 300, Data: []byte{9, 0, 0, 0}}}}
	}
	ctx := WithSender(context.Background(), sendFunc(func(_ context.Context, c *Call) (*Reply, error) {
		// What is sent is encoded before the guest runs again: keep a
		// decoded copy, as a transport would.
		cc, _, _, err := Unmarshal(MarshalCall(c))
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, cc)
		return reply(c), nil
	}), 0)
	call := stubOf(t, abi.CapCallName)

	rows := []struct {
		name    string
		params  []uint64
		regions []Region
	}{
		{"both spans", []uint64{3, 100, 5, 200, 11, 300}, []Region{{100, []byte("fetch")}, {200, []byte(`{"url":"/"}`)}}},
		{"empty args", []uint64{3, 100, 5, 200, 0, 300}, []Region{{100, []byte("fetch")}}},
		{"op over MaxOpLen", []uint64{3, 100, abi.MaxOpLen + 1, 200, 11, 300}, []Region{{200, []byte(`{"url":"/"}`)}}},
		{"args past the memory", []uint64{3, 100, 5, 4090, 11, 300}, []Region{{100, []byte("fetch")}}},
		{"args length wraps", []uint64{3, 100, 5, 200, 1<<32 - 1, 300}, []Region{{100, []byte("fetch")}}},
		{"args over MaxArgLen", []uint64{3, 100, 5, 0, abi.MaxArgLen + 1, 300}, []Region{{100, []byte("fetch")}}},
	}
	for _, r := range rows {
		sent = nil
		mem.b[300] = 0
		stack := append([]uint64(nil), r.params...)
		call(ctx, mem, stack)
		if stack[0] != uint64(abi.EDENIED) || mem.b[300] != 9 {
			t.Errorf("%s: result %d, out byte %d; want the reply's EDENIED and its write", r.name, stack[0], mem.b[300])
		}
		if len(sent) != 1 {
			t.Fatalf("%s: %d calls sent", r.name, len(sent))
		}
		c := sent[0]
		if c.Name != abi.CapCallName || !reflect.DeepEqual(c.Params, r.params) || c.Size != 4096 {
			t.Errorf("%s: sent %s%v size %d", r.name, c.Name, c.Params, c.Size)
		}
		if !reflect.DeepEqual(normRegions(c.Regions), normRegions(r.regions)) {
			t.Errorf("%s: shipped %+v, want %+v", r.name, c.Regions, r.regions)
		}
	}
	if sent[0].Seq <= 1 {
		t.Errorf("sequence numbers do not advance: %d", sent[0].Seq)
	}

	// A call too large for the transport is ELIMIT without being sent.
	small := WithSender(context.Background(), sendFunc(func(context.Context, *Call) (*Reply, error) {
		t.Error("a call over the transport's bound was sent")
		return nil, errors.New("sent")
	}), 100)
	stack := []uint64{3, 100, 5, 200, 11, 300}
	copy(mem.b[200:], bytes.Repeat([]byte("a"), 200))
	stack[4] = 200
	call(small, mem, stack)
	if stack[0] != uint64(abi.ELIMIT) {
		t.Errorf("a call over the transport's bound: %d, want ELIMIT", stack[0])
	}

	// Failing closed.
	mem.writes = 0
	fails := map[string]context.Context{
		"no sender": context.Background(),
		"transport error": WithSender(context.Background(), sendFunc(func(context.Context, *Call) (*Reply, error) {
			return nil, errors.New("cut off")
		}), 0),
		"reply to another call": WithSender(context.Background(), sendFunc(func(_ context.Context, c *Call) (*Reply, error) {
			return &Reply{Seq: c.Seq + 1, Result: 0, Writes: []Region{{Off: 0, Data: []byte("x")}}}, nil
		}), 0),
		"a write outside the memory": WithSender(context.Background(), sendFunc(func(_ context.Context, c *Call) (*Reply, error) {
			return &Reply{Seq: c.Seq, Result: 0, Writes: []Region{{Off: 4095, Data: []byte("xy")}}}, nil
		}), 0),
	}
	for name, fctx := range fails {
		stack := []uint64{5, 0}
		stubOf(t, abi.BlobLenName)(fctx, mem, stack)
		if stack[0] != uint64(abi.EINTERNAL) {
			t.Errorf("%s: %d, want EINTERNAL", name, stack[0])
		}
		switch name {
		case "transport error", "reply to another call":
			if Failed(fctx) == nil {
				t.Errorf("%s: Failed reports nothing", name)
			}
		}
	}
	if mem.writes != 0 {
		t.Errorf("a failed call wrote %d times into guest memory", mem.writes)
	}
	if Failed(ctx) != nil || Failed(context.Background()) != nil {
		t.Errorf("Failed reports an error for a run without one")
	}
}

// fakeConn is a Conn that delivers calls and then an exit, recording the
// replies.
type fakeConn struct {
	next    chan any // *Call or *Exit
	replies chan *Reply
	killed  chan struct{}
	kill    func()
}

func newFakeConn() *fakeConn {
	return &fakeConn{next: make(chan any, 16), replies: make(chan *Reply, 16), killed: make(chan struct{})}
}

func (c *fakeConn) Next(ctx context.Context) (*Call, *Exit, error) {
	select {
	case m := <-c.next:
		if call, ok := m.(*Call); ok {
			return call, nil, nil
		}
		return nil, m.(*Exit), nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

func (c *fakeConn) Reply(_ context.Context, r *Reply) error { c.replies <- r; return nil }

func (c *fakeConn) Kill() {
	select {
	case <-c.killed:
	default:
		close(c.killed)
		if c.kill != nil {
			c.kill()
		}
	}
}

func (c *fakeConn) Close() {}

type fakeModule struct{}

func (fakeModule) Digest() string                               { return "sha256:fake" }
func (fakeModule) Kind() sandbox.ModuleKind                     { return sandbox.Command }
func (fakeModule) Run(context.Context, sandbox.RunConfig) error { return errors.New("not here") }
func (fakeModule) Close(context.Context) error                  { return nil }

// TestForwardedRunStops: a remote guest's run ends at its deadline and
// when its ctx ends, even while the kernel is inside one of its host
// calls (the call's ctx ends with the run, as a local guest's does), and
// a call that arrives after that is not served.
func TestForwardedRunStops(t *testing.T) {
	for _, how := range []string{"deadline", "kill"} {
		t.Run(how, func(t *testing.T) {
			conn := newFakeConn()
			// Once killed, the guest's node reports a call already on
			// its way, then the guest's end.
			conn.kill = func() {
				conn.next <- &Call{Seq: 2, Name: abi.TaskKillName, Params: []uint64{1}, Size: 10}
				conn.next <- &Exit{Kind: KindCanceled}
			}
			conn.next <- &Call{Seq: 1, Name: abi.TaskWaitName, Params: []uint64{1, 0}, Size: 10}
			served := map[string]int{}
			host := []sandbox.HostFunc{
				{Name: abi.TaskWaitName, Params: blobLenParams, Fn: func(ctx context.Context, _ sandbox.Memory, p []uint64) {
					served[abi.TaskWaitName]++
					select { // a call that waits (a child, a person's yes)
					case <-ctx.Done():
						p[0] = uint64(abi.ETIMEDOUT)
					case <-time.After(10 * time.Second):
						p[0] = 0
					}
				}},
				{Name: abi.TaskKillName, Params: []sandbox.Param{pHandle}, Fn: func(_ context.Context, _ sandbox.Memory, p []uint64) {
					served[abi.TaskKillName]++
					p[0] = 0
				}},
			}
			mod := NewModule(fakeModule{}, host, func(context.Context, sandbox.Module, sandbox.RunConfig) (Conn, error) { return conn, nil })
			if mod.Digest() != "sha256:fake" || mod.Kind() != sandbox.Command {
				t.Errorf("the module is %s %s, want the inner module's digest and kind", mod.Digest(), mod.Kind())
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := sandbox.RunConfig{Timeout: 10 * time.Second}
			want := sandbox.ErrCanceled
			if how == "deadline" {
				cfg.Timeout, want = 100*time.Millisecond, sandbox.ErrTimeout
			} else {
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			err := mod.Run(ctx, cfg)
			if !errors.Is(err, want) {
				t.Errorf("Run: %v, want %v", err, want)
			}
			if served[abi.TaskWaitName] != 1 || served[abi.TaskKillName] != 0 {
				t.Errorf("served %v; want the first call once and none after the stop", served)
			}
			for _, wantSeq := range []uint64{1, 2} {
				r := <-conn.replies
				// The waiting call was cut by the stop (ETIMEDOUT), not
				// run to its own end; the late one was not served.
				if r.Seq != wantSeq || (wantSeq == 1 && r.Result != uint64(abi.ETIMEDOUT)) || (wantSeq == 2 && r.Result != uint64(abi.EINTERNAL)) {
					t.Errorf("reply %+v to call %d", r, wantSeq)
				}
			}
		})
	}
}

// TestProxyBufView: within a Buf parameter (and its limit) the proxy's
// Read is a fresh buffer the function fills, carried back whole when the
// call succeeds and not at all when it fails; past the parameter's length
// or limit, or anywhere else unshipped, Read fails closed.
func TestProxyBufView(t *testing.T) {
	var fill []byte
	var result abi.Errno
	var saw []string
	host := HostMap([]sandbox.HostFunc{{Name: abi.BlobReadName, Params: blobReadParams, Fn: func(_ context.Context, mem sandbox.Memory, p []uint64) {
		saw = saw[:0]
		for _, r := range [][2]uint32{{110, 10}, {100, 41}, {100, 65}, {99, 2}, {200, 4}} {
			_, ok := mem.Read(r[0], r[1])
			saw = append(saw, fmt.Sprintf("%d+%d:%v", r[0], r[1], ok))
		}
		v, ok := mem.Read(uint32(p[2]), uint32(len(fill)))
		if !ok {
			t.Fatalf("no view of the buffer")
		}
		copy(v, fill)
		mem.WriteUint32Le(uint32(p[4]), uint32(len(fill)))
		p[0] = uint64(result)
	}}})
	call := func() *Reply {
		// The upper bits of an i32 parameter are not the guest's.
		return Serve(context.Background(), host, &Call{Seq: 1, Name: abi.BlobReadName, Params: []uint64{7, 0, 1<<40 | 100, 1<<33 | 1000, 8}, Size: 4096})
	}
	fill, result = []byte("blob bytes"), abi.ESUCCESS
	r := call()
	// The span is 100+min(1000, 64): the limit bounds it.
	if want := []string{"110+10:true", "100+41:true", "100+65:false", "99+2:false", "200+4:false"}; !reflect.DeepEqual(saw, want) {
		t.Errorf("reads %q, want %q", saw, want)
	}
	want := []Region{{Off: 110, Data: make([]byte, 10)}, {Off: 100, Data: make([]byte, 41)}, {Off: 100, Data: []byte("blob bytes")}, {Off: 8, Data: []byte{10, 0, 0, 0}}}
	if r.Result != uint64(abi.ESUCCESS) || !reflect.DeepEqual(r.Writes, want) {
		t.Errorf("a successful call: result %d, writes %+v, want %+v", r.Result, r.Writes, want)
	}
	fill, result = nil, abi.EFLOW
	if r := call(); r.Result != uint64(abi.EFLOW) || !reflect.DeepEqual(r.Writes, []Region{{Off: 8, Data: []byte{0, 0, 0, 0}}}) {
		t.Errorf("a failed call: result %d, writes %+v; want no buffer written", r.Result, r.Writes)
	}
}
