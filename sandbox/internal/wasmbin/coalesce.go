package wasmbin

import (
	"cmp"
	"slices"
)

// Why coalesce data segments?
//
// The Go linker splits a wasm module's data into a segment per run of
// non-zero bytes (skipping runs of zeros longer than a few bytes), which
// gives a Go wasip1 binary 20,000 to 100,000 active data segments. wazero
// applies them one by one at every instantiation, evaluating each offset
// expression with an allocation: about 25,000 allocations and a third of a
// warm spawn (sandbox/wazero's BenchmarkWarmSpawn/original vs /coalesced).
// wasmtime applies the segments faster but still gains about 1 ms a spawn
// (BENCHMARKS.md).
//
// Coalesce rewrites the data section so that neighbouring segments whose
// gap is at most MaxDataGap bytes become one segment, with the gap filled
// with zeros. That is exactly what instantiation would have produced: the
// module's own memory starts zeroed (imported memories are refused), so
// writing zeros into a gap changes nothing. It only does so when it is
// certain the rewrite is equivalent:
//
//   - every segment is active, on memory 0, with an offset of the form
//     "i32.const c; end";
//   - no two segments overlap (then the order in which they are applied
//     does not matter, and they can be sorted by offset: the Go linker
//     emits them section by section, not in address order);
//   - there is no DataCount section (so no instruction names a segment
//     index: memory.init and data.drop need it);
//   - every section parses.
//
// Otherwise the original bytes are compiled. The module's digest is always
// that of the original bytes.

// MaxDataGap is the longest run of zeros merged into a segment. Copying 1 KiB
// of zeros costs about as much as applying one more segment.
const MaxDataGap = 1024

const SecDataCount = 12

type dataSeg struct {
	off  uint32
	init []byte
}

// Coalesce returns wasm with its data segments merged, or false to keep
// the original bytes.
func Coalesce(wasm []byte, bin *Module) ([]byte, bool) {
	var data *Section
	for i := range bin.Sections {
		s := &bin.Sections[i]
		switch s.ID {
		case SecDataCount:
			return nil, false
		case SecData:
			if data != nil {
				return nil, false
			}
			data = s
		}
	}
	if data == nil {
		return nil, false
	}
	segs, ok := parseActiveData(wasm[data.Start:data.End])
	if !ok || len(segs) < 2 {
		return nil, false
	}
	merged := mergeSegments(segs, MaxDataGap)
	if len(merged) == len(segs) {
		return nil, false
	}

	body := encodeData(merged)
	if uint64(len(body)) > 1<<32-1 {
		return nil, false
	}
	return replaceSection(wasm, data, SecData, body), true
}

// parseActiveData decodes a data section body whose segments are all active
// on memory 0 with constant offsets and do not overlap, and returns them
// sorted by offset.
func parseActiveData(body []byte) ([]dataSeg, bool) {
	r := &reader{b: body}
	n, err := r.u32()
	if err != nil || uint64(n) > uint64(len(body)) {
		return nil, false
	}
	segs := make([]dataSeg, 0, n)
	for i := uint32(0); i < n; i++ {
		flag, err := r.u32()
		if err != nil {
			return nil, false
		}
		switch flag {
		case 0:
		case 2:
			if mem, err := r.u32(); err != nil || mem != 0 {
				return nil, false
			}
		default: // passive, or unknown
			return nil, false
		}
		if op, err := r.byte(); err != nil || op != 0x41 { // i32.const
			return nil, false
		}
		c, err := r.sleb32()
		if err != nil {
			return nil, false
		}
		if op, err := r.byte(); err != nil || op != 0x0b { // end
			return nil, false
		}
		size, err := r.u32()
		if err != nil {
			return nil, false
		}
		init, err := r.bytes(size)
		if err != nil {
			return nil, false
		}
		segs = append(segs, dataSeg{off: uint32(c), init: init})
	}
	if r.off != len(body) {
		return nil, false
	}
	slices.SortStableFunc(segs, func(a, b dataSeg) int { return cmp.Compare(a.off, b.off) })
	var end uint64
	for _, s := range segs {
		if uint64(s.off) < end { // overlapping
			return nil, false
		}
		end = uint64(s.off) + uint64(len(s.init))
	}
	return segs, true
}

// mergeSegments merges sorted, non-overlapping segments separated by at most
// maxGap bytes, filling the gaps with zeros.
func mergeSegments(segs []dataSeg, maxGap uint64) []dataSeg {
	var out []dataSeg
	for i := 0; i < len(segs); {
		j := i + 1
		end := uint64(segs[i].off) + uint64(len(segs[i].init))
		for j < len(segs) && uint64(segs[j].off)-end <= maxGap {
			end = uint64(segs[j].off) + uint64(len(segs[j].init))
			j++
		}
		if j == i+1 {
			out = append(out, segs[i])
			i = j
			continue
		}
		start := segs[i].off
		buf := make([]byte, end-uint64(start))
		for _, s := range segs[i:j] {
			copy(buf[s.off-start:], s.init)
		}
		out = append(out, dataSeg{off: start, init: buf})
		i = j
	}
	return out
}

// sleb32 reads a signed LEB128 of at most 32 bits.
func (r *reader) sleb32() (int32, error) {
	var v int64
	var shift uint
	for {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			break
		}
		if shift >= 35 {
			return 0, ErrMalformed
		}
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, ErrMalformed
	}
	return int32(v), nil
}
