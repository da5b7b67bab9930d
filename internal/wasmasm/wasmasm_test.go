package wasmasm

import (
	"bytes"
	"testing"
)

func TestEncodings(t *testing.T) {
	for _, c := range []struct {
		got, want []byte
	}{
		{Uleb(0), []byte{0}},
		{Uleb(624485), []byte{0xe5, 0x8e, 0x26}},
		{Sleb(0), []byte{0}},
		{Sleb(-1), []byte{0x7f}},
		{Sleb(63), []byte{0x3f}},
		{Sleb(64), []byte{0xc0, 0x00}},
		{Sleb(-123456), []byte{0xc0, 0xbb, 0x78}},
		{Name("ab"), []byte{2, 'a', 'b'}},
		{Vec([]byte{1}, []byte{2, 3}), []byte{2, 1, 2, 3}},
		{Section(5, Vec([]byte{0, 1})), []byte{5, 3, 1, 0, 1}},
		{Section(10, make([]byte, 200))[:3], []byte{10, 0xc8, 0x01}},
		{Module(), []byte("\x00asm\x01\x00\x00\x00")},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("got %x, want %x", c.got, c.want)
		}
	}
}
