// Command snapshot-clean is a reactor whose init builds a table without a
// host call (so its tasks start from a snapshot), and whose entry returns
// its input with a value from the table and a fresh random number:
// "<input> 999 <hex>".
//
//mandate:reactor
package main

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

var table = func() map[string]int {
	m := map[string]int{}
	for i := range 1000 {
		m[strconv.Itoa(i)] = i
	}
	return m
}()

func main() {}

//go:wasmexport run
func run() {
	in, _ := mandate.InputBytes()
	var b [8]byte
	rand.Read(b[:])
	mandate.SetResult([]byte(string(in) + " " + strconv.Itoa(table["999"]) + " " + hex.EncodeToString(b[:])))
}
