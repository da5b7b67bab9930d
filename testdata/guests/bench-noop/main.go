// Command bench-noop is a reactor for benchmarks: "run" does nothing (warm
// spawn), "bench" makes no-op capability calls (the call round trip).
//
// bench reads "N BATCH" from its input, makes N calls in batches of BATCH,
// timing each batch with the guest's clock, and returns
// {"calls":N,"mean_ns":..,"p50_ns":..,"p90_ns":..,"p99_ns":..} per call.
package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

// This guest is a reactor:
//
//mandate:reactor

func main() {}

//go:wasmexport run
func run() {}

//go:wasmexport bench
func bench() {
	in, _ := mandate.InputBytes()
	n, batch := 1000, 100
	fmt.Sscan(string(in), &n, &batch)
	if batch <= 0 {
		batch = 1
	}
	c, err := mandate.Lookup("test")
	if err != nil {
		panic(err)
	}
	per := make([]float64, 0, n/batch+1)
	start := time.Now()
	for done := 0; done < n; {
		m := min(batch, n-done)
		t0 := time.Now()
		for i := 0; i < m; i++ {
			if e := c.CallNoResult("noop", nil); e != 0 {
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
	mandate.SetResult(out)
}
