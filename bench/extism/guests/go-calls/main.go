// Command go-calls is the Extism twin of testdata/guests/bench-noop's
// "bench" (the capability call round trip): "bench" reads "N BATCH" from
// its input, calls the host function "noop" N times in batches of BATCH,
// timing each batch with the guest's clock, and outputs
// {"calls":N,"mean_ns":..,"p50_ns":..,"p90_ns":..,"p99_ns":..} per call.
// Mandate's guest calls cap_call (six i32 arguments: the handle, the
// operation's name and the arguments as pointer and length, the out
// pointer); this one calls a host function of one i64 argument and one
// i64 result (an Extism host function's usual shape: a memory offset in,
// one out). It imports the Extism kernel's functions itself, as go-reactor
// does.
package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// This guest is a reactor (guestbuild builds it with -buildmode=c-shared):
//
//mandate:reactor

//go:wasmimport extism:host/env input_length
func inputLength() uint64

//go:wasmimport extism:host/env input_load_u8
func inputLoadU8(offset uint64) uint32

//go:wasmimport extism:host/env alloc
func alloc(n uint64) uint64

//go:wasmimport extism:host/env store_u8
func storeU8(offset uint64, v uint32)

//go:wasmimport extism:host/env output_set
func outputSet(offset, n uint64)

//go:wasmimport extism:host/user noop
func noop(x uint64) uint64

func main() {}

//go:wasmexport bench
func bench() int32 {
	in := make([]byte, inputLength())
	for i := range in {
		in[i] = byte(inputLoadU8(uint64(i)))
	}
	n, batch := 1000, 100
	fmt.Sscan(string(in), &n, &batch)
	if batch <= 0 {
		batch = 1
	}
	per := make([]float64, 0, n/batch+1)
	start := time.Now()
	for done := 0; done < n; {
		m := min(batch, n-done)
		t0 := time.Now()
		for i := 0; i < m; i++ {
			if e := noop(0); e != 0 {
				panic(e)
			}
		}
		per = append(per, float64(time.Since(t0).Nanoseconds())/float64(m))
		done += m
	}
	total := time.Since(start)
	slices.Sort(per)
	q := func(p float64) float64 { return per[int(p*float64(len(per)-1))] }
	out, _ := json.Marshal(map[string]float64{
		"calls":   float64(n),
		"mean_ns": float64(total.Nanoseconds()) / float64(n),
		"p50_ns":  q(0.50),
		"p90_ns":  q(0.90),
		"p99_ns":  q(0.99),
	})
	off := alloc(uint64(len(out)))
	for i, b := range out {
		storeU8(off+uint64(i), uint32(b))
	}
	outputSet(off, uint64(len(out)))
	return 0
}
