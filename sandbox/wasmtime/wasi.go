//go:build wasmtime

package wasmtime

import (
	"crypto/rand"
	"fmt"
	"io"
	"runtime"
	"time"
	"unsafe"
)

// Why our own WASI?
//
// wasmtime-go's WasiConfig writes a guest's stdout and stderr to files, not
// to an io.Writer, and brings a whole filesystem implementation we want
// none of. A guest here gets nothing ambient, so its WASI preview1 is
// small: stdio on descriptors 0 to 2 (stdin empty, stdout and stderr to the
// RunConfig writers), argv of just the run's name, an empty environment,
// real clocks, crypto/rand, and sleeping in poll_oneoff that ends when the
// run is stopped. Every other function of wasi_snapshot_preview1 exists
// with its standard signature (so any guest links) and fails: EBADF for a
// descriptor that is not open (there are no preopened directories, so no
// path resolves), ENOTSUP, ENOTDIR or ENOTSOCK for what stdio can not do,
// ENOSYS for proc_raise. Nothing here reaches the host's filesystem,
// environment or network. The same set, with the same signatures, as
// wazero's wasi_snapshot_preview1 (the guest-visible behaviour of the two
// engines is checked by sandboxtest).

// WASI errno values (wasi_snapshot_preview1 "errno").
const (
	errnoSuccess  = 0
	errnoBadf     = 8
	errnoFault    = 21
	errnoInval    = 28
	errnoIO       = 29
	errnoNosys    = 52
	errnoNotdir   = 54
	errnoNotsock  = 57
	errnoNotsup   = 58
	errnoSpipe    = 70
	fileTypeChar  = 2 // filetype character_device
	clockRealtime = 0
	clockMonotime = 1
	eventClock    = 0
	eventFDRead   = 1
	eventFDWrite  = 2
	subscriptSize = 48
	eventSize     = 32
	rightFDRead   = 1 << 1
	rightFDWrite  = 1 << 6
	rightPoll     = 1 << 27
)

// wasiFunc is one function of wasi_snapshot_preview1. fn returns the errno;
// to end the run instead it calls r.trap and its result is ignored.
type wasiFunc struct {
	name   string
	params string // 'i' i32, 'I' i64, as funcSig
	fn     func(r *run, m *memory, a []uint64) int32
}

func u32(v uint64) uint32 { return uint32(v) }

// stdio reports whether fd is a standard descriptor the guest has not
// closed.
func (r *run) stdio(fd uint32) bool { return fd <= 2 && !r.closedFDs[fd] }

// fdErr is the errno of an operation stdio does not support: onStdio for
// an open standard descriptor, EBADF for any other.
func fdErr(onStdio int32) func(r *run, m *memory, a []uint64) int32 {
	return func(r *run, _ *memory, a []uint64) int32 {
		if r.stdio(u32(a[0])) {
			return onStdio
		}
		return errnoBadf
	}
}

var wasiFuncs = []wasiFunc{
	{"args_get", "ii", argsGet},
	{"args_sizes_get", "ii", argsSizesGet},
	{"clock_res_get", "ii", clockResGet},
	{"clock_time_get", "iIi", clockTimeGet},
	{"environ_get", "ii", func(*run, *memory, []uint64) int32 { return errnoSuccess }},
	{"environ_sizes_get", "ii", environSizesGet},
	{"fd_advise", "iIIi", fdErr(errnoNotsup)},
	{"fd_allocate", "iII", fdErr(errnoNotsup)},
	{"fd_close", "i", fdClose},
	{"fd_datasync", "i", fdErr(errnoNotsup)},
	{"fd_fdstat_get", "ii", fdFdstatGet},
	{"fd_fdstat_set_flags", "ii", fdErr(errnoSuccess)},
	{"fd_fdstat_set_rights", "iII", fdErr(errnoNotsup)},
	{"fd_filestat_get", "ii", fdFilestatGet},
	{"fd_filestat_set_size", "iI", fdErr(errnoNotsup)},
	{"fd_filestat_set_times", "iIIi", fdErr(errnoNotsup)},
	{"fd_pread", "iiiIi", fdErr(errnoSpipe)},
	{"fd_prestat_dir_name", "iii", fdErr(errnoBadf)},
	{"fd_prestat_get", "ii", fdErr(errnoBadf)}, // no preopened directories
	{"fd_pwrite", "iiiIi", fdErr(errnoSpipe)},
	{"fd_read", "iiii", fdRead},
	{"fd_readdir", "iiiIi", fdErr(errnoNotdir)},
	{"fd_renumber", "ii", fdErr(errnoNotsup)},
	{"fd_seek", "iIii", fdErr(errnoSpipe)},
	{"fd_sync", "i", fdErr(errnoNotsup)},
	{"fd_tell", "ii", fdErr(errnoSpipe)},
	{"fd_write", "iiii", fdWrite},
	{"path_create_directory", "iii", fdErr(errnoNotdir)},
	{"path_filestat_get", "iiiii", fdErr(errnoNotdir)},
	{"path_filestat_set_times", "iiiiIIi", fdErr(errnoNotdir)},
	{"path_link", "iiiiiii", fdErr(errnoNotdir)},
	{"path_open", "iiiiiIIii", fdErr(errnoNotdir)},
	{"path_readlink", "iiiiii", fdErr(errnoNotdir)},
	{"path_remove_directory", "iii", fdErr(errnoNotdir)},
	{"path_rename", "iiiiii", fdErr(errnoNotdir)},
	{"path_symlink", "iiiii", func(r *run, _ *memory, a []uint64) int32 { // the descriptor is the third parameter
		if r.stdio(u32(a[2])) {
			return errnoNotdir
		}
		return errnoBadf
	}},
	{"path_unlink_file", "iii", fdErr(errnoNotdir)},
	{"poll_oneoff", "iiii", pollOneoff},
	{"proc_exit", "i", nil}, // defined apart: it returns nothing
	{"proc_raise", "i", func(*run, *memory, []uint64) int32 { return errnoNosys }},
	{"random_get", "ii", randomGet},
	{"sched_yield", "", func(*run, *memory, []uint64) int32 { runtime.Gosched(); return errnoSuccess }},
	{"sock_accept", "iii", fdErr(errnoNotsock)},
	{"sock_recv", "iiiiii", fdErr(errnoNotsock)},
	{"sock_send", "iiiii", fdErr(errnoNotsock)},
	{"sock_shutdown", "ii", fdErr(errnoNotsock)},
}

// defineWASI defines wasiFuncs in e's linker and returns their signatures.
func (e *Engine) defineWASI() (map[string]funcSig, error) {
	sigs := make(map[string]funcSig, len(wasiFuncs))
	for _, f := range wasiFuncs {
		sig := funcSig{params: f.params, results: "i"}
		hf := wasiCall(f)
		if f.name == "proc_exit" {
			sig.results = ""
			hf = &hostFunc{what: wasiModule + ".proc_exit", call: procExit}
		}
		sigs[f.name] = sig
		if err := e.define(wasiModule, f.name, sig, hf); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return sigs, nil
}

// wasiCall is f as a host function: its parameters (i32s zero-extended,
// i64s whole) on the run's stack, the errno as its i32 result, or the
// trap f left in r.pending; a panic traps the guest.
func wasiCall(f wasiFunc) *hostFunc {
	fn, params := f.fn, len(f.params)
	return &hostFunc{what: wasiModule + "." + f.name, call: func(r *run, caller unsafe.Pointer, vals []rawVal) unsafe.Pointer {
		a := r.stack[:params]
		for i := range a {
			a[i] = vals[i].u64()
			if f.params[i] == 'i' {
				a[i] = uint64(vals[i].u32())
			}
		}
		r.mem.b = r.memoryView(caller)
		errno := fn(r, &r.mem, a)
		r.mem.b = nil
		if t := r.pending; t != nil {
			r.pending = nil
			return t
		}
		vals[0].setI32(uint32(errno))
		return nil
	}}
}

// procExit ends the run with the guest's exit code.
func procExit(r *run, _ unsafe.Pointer, vals []rawVal) unsafe.Pointer {
	r.exited, r.exitCode = true, vals[0].u32()
	return newTrap(fmt.Sprintf("exit status %d", r.exitCode))
}

// argsSizesGet: args_sizes_get(argc *u32, argv_buf_size *u32). argv is
// just the run's name.
func argsSizesGet(r *run, m *memory, a []uint64) int32 {
	if !m.WriteUint32Le(u32(a[0]), 1) || !m.WriteUint32Le(u32(a[1]), uint32(len(r.name)+1)) {
		return errnoFault
	}
	return errnoSuccess
}

// argsGet: args_get(argv **u8, argv_buf *u8).
func argsGet(r *run, m *memory, a []uint64) int32 {
	argv, buf := u32(a[0]), u32(a[1])
	if !m.Write(buf, append([]byte(r.name), 0)) || !m.WriteUint32Le(argv, buf) {
		return errnoFault
	}
	return errnoSuccess
}

// environSizesGet: environ_sizes_get(count *u32, buf_size *u32): empty.
func environSizesGet(_ *run, m *memory, a []uint64) int32 {
	if !m.WriteUint32Le(u32(a[0]), 0) || !m.WriteUint32Le(u32(a[1]), 0) {
		return errnoFault
	}
	return errnoSuccess
}

// clockResGet: clock_res_get(id, resolution *u64).
func clockResGet(_ *run, m *memory, a []uint64) int32 {
	var res uint64
	switch u32(a[0]) {
	case clockRealtime:
		res = 1000
	case clockMonotime:
		res = 1
	default:
		return errnoInval
	}
	if !m.writeUint64Le(u32(a[1]), res) {
		return errnoFault
	}
	return errnoSuccess
}

// now returns clock id's time in nanoseconds, or false for a clock the
// guest does not get (the CPU-time clocks).
func (r *run) now(id uint32) (uint64, bool) {
	switch id {
	case clockRealtime:
		return uint64(time.Now().UnixNano()), true
	case clockMonotime:
		return uint64(time.Since(r.start)), true
	}
	return 0, false
}

// clockTimeGet: clock_time_get(id, precision u64, time *u64).
func clockTimeGet(r *run, m *memory, a []uint64) int32 {
	t, ok := r.now(u32(a[0]))
	if !ok {
		return errnoInval
	}
	if !m.writeUint64Le(u32(a[2]), t) {
		return errnoFault
	}
	return errnoSuccess
}

// fdClose: fd_close(fd). Closing a standard descriptor only makes it
// EBADF for the guest.
func fdClose(r *run, _ *memory, a []uint64) int32 {
	fd := u32(a[0])
	if !r.stdio(fd) {
		return errnoBadf
	}
	r.closedFDs[fd] = true
	return errnoSuccess
}

// fdFdstatGet: fd_fdstat_get(fd, stat *fdstat): stdio is a character
// device, readable (stdin) or writable (stdout, stderr).
func fdFdstatGet(r *run, m *memory, a []uint64) int32 {
	fd, buf := u32(a[0]), u32(a[1])
	if !r.stdio(fd) {
		return errnoBadf
	}
	var st [24]byte
	st[0] = fileTypeChar
	rights := uint64(rightFDWrite | rightPoll)
	if fd == 0 {
		rights = rightFDRead | rightPoll
	}
	st[8], st[9], st[10], st[11] = byte(rights), byte(rights>>8), byte(rights>>16), byte(rights>>24)
	if !m.Write(buf, st[:]) {
		return errnoFault
	}
	return errnoSuccess
}

// fdFilestatGet: fd_filestat_get(fd, stat *filestat).
func fdFilestatGet(r *run, m *memory, a []uint64) int32 {
	fd, buf := u32(a[0]), u32(a[1])
	if !r.stdio(fd) {
		return errnoBadf
	}
	var st [64]byte
	st[16] = fileTypeChar
	st[24] = 1 // nlink
	if !m.Write(buf, st[:]) {
		return errnoFault
	}
	return errnoSuccess
}

// iovecs returns the buffers of the iovec array at iovs, or false when any
// lies outside memory.
func iovecs(m *memory, iovs, n uint32) ([][]byte, bool) {
	if uint64(iovs)+uint64(n)*8 > uint64(len(m.b)) {
		return nil, false
	}
	bufs := make([][]byte, 0, n)
	for i := uint32(0); i < n; i++ {
		p, _ := m.ReadUint32Le(iovs + i*8)
		l, _ := m.ReadUint32Le(iovs + i*8 + 4)
		b, ok := m.Read(p, l)
		if !ok {
			return nil, false
		}
		bufs = append(bufs, b)
	}
	return bufs, true
}

// fdWrite: fd_write(fd, iovs *iovec, iovs_len, nwritten *u32): stdout and
// stderr go to the run's writers; a writer's error is EIO.
func fdWrite(r *run, m *memory, a []uint64) int32 {
	fd, iovs, n, res := u32(a[0]), u32(a[1]), u32(a[2]), u32(a[3])
	var w io.Writer
	switch {
	case fd == 1 && r.stdio(fd):
		w = r.stdout
	case fd == 2 && r.stdio(fd):
		w = r.stderr
	default:
		return errnoBadf
	}
	bufs, ok := iovecs(m, iovs, n)
	if !ok {
		return errnoFault
	}
	var total uint32
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		k, err := w.Write(b)
		total += uint32(k)
		if err != nil {
			return errnoIO
		}
	}
	if !m.WriteUint32Le(res, total) {
		return errnoFault
	}
	return errnoSuccess
}

// fdRead: fd_read(fd, iovs *iovec, iovs_len, nread *u32): stdin is empty.
func fdRead(r *run, m *memory, a []uint64) int32 {
	fd, iovs, n, res := u32(a[0]), u32(a[1]), u32(a[2]), u32(a[3])
	if fd != 0 || !r.stdio(fd) {
		if r.stdio(fd) {
			return errnoNotsup
		}
		return errnoBadf
	}
	if _, ok := iovecs(m, iovs, n); !ok {
		return errnoFault
	}
	if !m.WriteUint32Le(res, 0) {
		return errnoFault
	}
	return errnoSuccess
}

// randomGet: random_get(buf *u8, len): crypto/rand, so a guest's
// crypto/rand is as good as the host's.
func randomGet(_ *run, m *memory, a []uint64) int32 {
	b, ok := m.Read(u32(a[0]), u32(a[1]))
	if !ok {
		return errnoFault
	}
	if _, err := rand.Read(b); err != nil {
		return errnoIO
	}
	return errnoSuccess
}

// pollOneoff: poll_oneoff(in *subscription, out *event, nsubscriptions,
// nevents *u32). Descriptor subscriptions are ready at once (stdin at end
// of file, stdout and stderr writable) or fail with EBADF; when none is,
// it sleeps until the earliest clock subscription, and a run stopped
// meanwhile ends there.
func pollOneoff(r *run, m *memory, a []uint64) int32 {
	in, out, n, resPtr := u32(a[0]), u32(a[1]), u32(a[2]), u32(a[3])
	if n == 0 {
		return errnoInval
	}
	if uint64(in)+uint64(n)*subscriptSize > uint64(len(m.b)) || uint64(out)+uint64(n)*eventSize > uint64(len(m.b)) {
		return errnoFault
	}
	var nev uint32
	event := func(userdata uint64, errno uint16, typ byte) {
		off := out + nev*eventSize
		clear(m.b[off : off+eventSize])
		m.writeUint64Le(off, userdata)
		m.b[off+8], m.b[off+9] = byte(errno), byte(errno>>8)
		m.b[off+10] = typ
		nev++
	}
	type clockSub struct {
		userdata uint64
		wait     uint64 // nanoseconds from now
	}
	var clocks []clockSub
	for i := uint32(0); i < n; i++ {
		s := in + i*subscriptSize
		userdata, _ := m.readUint64Le(s)
		tag := m.b[s+8]
		switch tag {
		case eventClock:
			id, _ := m.ReadUint32Le(s + 16)
			timeout, _ := m.readUint64Le(s + 24)
			flags := uint16(m.b[s+40]) | uint16(m.b[s+41])<<8
			now, ok := r.now(id)
			if !ok {
				event(userdata, errnoInval, tag)
				continue
			}
			wait := timeout
			if flags&1 != 0 { // subscription_clock_abstime
				wait = 0
				if timeout > now {
					wait = timeout - now
				}
			}
			clocks = append(clocks, clockSub{userdata, wait})
		case eventFDRead, eventFDWrite:
			fd, _ := m.ReadUint32Le(s + 16)
			var errno uint16 = errnoBadf
			if r.stdio(fd) && (fd == 0) == (tag == eventFDRead) {
				errno = errnoSuccess
			}
			event(userdata, errno, tag)
		default:
			event(userdata, errnoInval, tag)
		}
	}
	if nev == 0 && len(clocks) > 0 {
		first := clocks[0].wait
		for _, c := range clocks[1:] {
			first = min(first, c.wait)
		}
		if !r.sleep(time.Duration(min(first, uint64(1<<63-1)))) {
			r.pending = r.trap("sandbox/wasmtime: run stopped while sleeping")
			return errnoSuccess
		}
		for _, c := range clocks {
			if c.wait <= first {
				event(c.userdata, errnoSuccess, eventClock)
			}
		}
	}
	if !m.WriteUint32Le(resPtr, nev) {
		return errnoFault
	}
	return errnoSuccess
}

// sleep waits for d, or until the run is stopped (then it returns false).
func (r *run) sleep(d time.Duration) bool {
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.ctx.Done():
		return false
	}
}
