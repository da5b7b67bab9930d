// Package cputime reads the CPU time the process has used, for benchmarks
// on a shared machine, where wall time is disturbed by other work and CPU
// time per operation is the steadier figure.
//
//	start := cputime.Process()
//	... b.N operations ...
//	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
package cputime
