package forward

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// The wire form: a type byte, then unsigned varints and length-prefixed
// bytes, in the order of the struct's fields.
const (
	tagCall  = 'C'
	tagReply = 'R'
	tagExit  = 'X'
)

// Bounds Unmarshal applies before allocating.
const (
	maxRegions = 8
	maxWrites  = 16
	// MaxMessage bounds one encoded message: the largest blob a guest may
	// create and some room.
	MaxMessage = abi.MaxBlobLen + 1<<16
)

func putBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// MarshalCall encodes c.
func MarshalCall(c *Call) []byte {
	n := 32 + len(c.Name) + 10*len(c.Params)
	for _, r := range c.Regions {
		n += 10 + len(r.Data)
	}
	b := make([]byte, 0, n)
	b = append(b, tagCall)
	b = binary.AppendUvarint(b, c.Seq)
	b = putBytes(b, []byte(c.Name))
	b = binary.AppendUvarint(b, uint64(len(c.Params)))
	for _, p := range c.Params {
		b = binary.AppendUvarint(b, p)
	}
	b = binary.AppendUvarint(b, uint64(c.Size))
	b = binary.AppendUvarint(b, uint64(len(c.Regions)))
	for _, r := range c.Regions {
		b = binary.AppendUvarint(b, uint64(r.Off))
		b = putBytes(b, r.Data)
	}
	return b
}

// MarshalReply encodes r.
func MarshalReply(r *Reply) []byte {
	n := 24
	for _, w := range r.Writes {
		n += 10 + len(w.Data)
	}
	b := make([]byte, 0, n)
	b = append(b, tagReply)
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendUvarint(b, r.Result)
	b = binary.AppendUvarint(b, uint64(len(r.Writes)))
	for _, w := range r.Writes {
		b = binary.AppendUvarint(b, uint64(w.Off))
		b = putBytes(b, w.Data)
	}
	return b
}

// MarshalExit encodes e.
func MarshalExit(e *Exit) []byte {
	b := make([]byte, 0, 32+len(e.Msg)+len(e.Stdout)+len(e.Stderr))
	b = append(b, tagExit, byte(e.Kind))
	b = binary.AppendUvarint(b, uint64(e.Code))
	b = putBytes(b, []byte(e.Msg))
	b = putBytes(b, e.Stdout)
	return putBytes(b, e.Stderr)
}

// Unmarshal decodes one message: exactly one of the results is non-nil
// when err is nil. The byte slices it returns alias b.
func Unmarshal(b []byte) (*Call, *Reply, *Exit, error) {
	if len(b) > MaxMessage {
		return nil, nil, nil, fmt.Errorf("forward: a %d-byte message exceeds %d", len(b), MaxMessage)
	}
	if len(b) == 0 {
		return nil, nil, nil, errors.New("forward: empty message")
	}
	d := &decoder{b: b[1:]}
	switch b[0] {
	case tagCall:
		c := &Call{Seq: d.uvarint()}
		c.Name = string(d.bytes(64))
		np := d.count(sandboxMaxParams)
		if np > 0 {
			c.Params = make([]uint64, np)
		}
		for i := range c.Params {
			c.Params[i] = d.uvarint()
		}
		c.Size = d.u32()
		nr := d.count(maxRegions)
		for range nr {
			c.Regions = append(c.Regions, Region{Off: d.u32(), Data: d.bytes(abi.MaxBlobLen)})
		}
		return c, nil, nil, d.end()
	case tagReply:
		r := &Reply{Seq: d.uvarint(), Result: d.uvarint()}
		nw := d.count(maxWrites)
		for range nw {
			r.Writes = append(r.Writes, Region{Off: d.u32(), Data: d.bytes(abi.MaxBlobLen)})
		}
		return nil, r, nil, d.end()
	case tagExit:
		if len(d.b) == 0 {
			return nil, nil, nil, errors.New("forward: exit message cut short")
		}
		e := &Exit{Kind: ExitKind(d.b[0])}
		d.b = d.b[1:]
		if e.Kind > KindError {
			return nil, nil, nil, fmt.Errorf("forward: exit kind %d", e.Kind)
		}
		e.Code = d.u32()
		e.Msg = string(d.bytes(MaxOutput))
		e.Stdout = d.bytes(MaxOutput)
		e.Stderr = d.bytes(MaxOutput)
		return nil, nil, e, d.end()
	}
	return nil, nil, nil, fmt.Errorf("forward: message type %q", b[0])
}

// sandboxMaxParams mirrors sandbox.MaxHostParams.
const sandboxMaxParams = 16

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("forward: bad varint")
		return 0
	}
	if n > 1 && d.b[n-1] == 0 {
		// binary.Uvarint accepts a value padded with 0x80 bytes: one
		// message, one encoding.
		d.err = errors.New("forward: a varint longer than its value")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.err = errors.New("forward: a 32-bit value out of range")
		return 0
	}
	return uint32(v)
}

func (d *decoder) count(limit int) int {
	v := d.uvarint()
	if v > uint64(limit) {
		d.err = fmt.Errorf("forward: count %d exceeds %d", v, limit)
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(limit int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(limit) || n > uint64(len(d.b)) {
		d.err = fmt.Errorf("forward: %d bytes where %d fit (limit %d)", n, len(d.b), limit)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("forward: %d bytes after the message", len(d.b))
	}
	return d.err
}
