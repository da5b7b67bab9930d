package kernel

import (
	"crypto/sha256"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// What a task was given and what it read, for constraints (issue 30):
// the functions given(v) and seen(v, pattern) of package constraint ask
// whether a value (a URL, an e-mail address, an IBAN: what the
// constraint compiler finds in text, ValueFinder) was in the task's input,
// or in a blob the task read whose integrity taints match a pattern. So a
// message's links can be bound to what the person asked for:
//
//	urls(request.body.text).all(u, given(u))
//
// What the kernel keeps. Not the text: the SHA-256 of each value found.
// The input's values are found on the first given() of the task's life,
// from its input blob. A blob's values are found when the task first
// reads any of it (blob_read, as the label is raised by the whole blob),
// and kept with the integrity taints of the blob's label; only on a
// kernel where some compiled constraint reads them (Referencer): other
// kernels scan nothing.
//
// Bounds, and past them: fail closed (given and seen answer false, so a
// constraint requiring them denies; never true for a value not found).
//
//	MaxScanBytes      of a blob (or the input), the first MaxScanBytes are
//	                  scanned, cut at a space so no value is cut short; a
//	                  value past them is neither given nor seen
//	MaxSeenValues     distinct values kept of the input, and of all the
//	                  blobs a task read together; later ones are dropped
//	MaxSeenTaints     integrity taints kept per value; later ones dropped
//	MaxSeenBlobs      blobs scanned per task; later blobs are not scanned
//
// A value read in a blob without integrity taints (an untainted, trusted
// blob) is kept with no taint: no pattern matches it, and given() does
// not see it either (it was read, not given). Only blob_read records:
// what the host shows on a task's behalf (Observe), any other way its
// label is raised, and what its children read are not its reads, so seen
// answers false for them. A child's given() is its own input, what its
// parent gave it.
const (
	// ReadsVar is the variable under which constraints reach what the
	// task was given and read (given and seen in package constraint).
	ReadsVar = "mandate_reads"

	MaxScanBytes  = 1 << 20
	MaxSeenValues = 4096
	MaxSeenTaints = 16
	MaxSeenBlobs  = 1024
)

// ValueFinder finds the values given and seen compare in text (at most
// max of them, and whether there were more). A ConstraintCompiler that
// implements it (package constraint) lets the kernel record them.
type ValueFinder interface {
	FindValues(s string, max int) (vals []string, more bool)
}

// TaskReads is what constraints see under ReadsVar: what the task was
// given and what it read. Its methods take a value as the constraint's
// functions return it (canonical: a URL with its host lowercased, an
// IBAN without spaces) and are safe for concurrent use.
type TaskReads interface {
	// Given reports whether v was found in the task's input.
	Given(v string) bool
	// Seen reports whether v was found in a blob the task read whose
	// label has an integrity taint match reports true for.
	Seen(v string, match func(taint string) bool) bool
}

// reads is what a task keeps for given and seen.
type reads struct {
	mu sync.Mutex
	// inputDone: input holds the input's values. Protected by mu.
	inputDone bool
	input     map[[32]byte]struct{} // protected by mu
	// values maps a value's hash to the integrity taints of the blobs
	// it was read in; blobs are the IDs of the blobs scanned. Protected
	// by mu.
	values map[[32]byte][]string
	blobs  map[uint64]struct{}
}

// readsView is a task's TaskReads.
type readsView struct{ t *Task }

var _ TaskReads = readsView{}

func (k *Kernel) finder() ValueFinder {
	f, _ := k.compiler.(ValueFinder)
	return f
}

// scanText is the first MaxScanBytes of b, cut after the last space or
// control character so that no value is cut short.
func scanText(b *kindapi.Blob) string {
	data := make([]byte, min(b.Len(), MaxScanBytes+1))
	n, _ := b.ReadAt(data, 0)
	data = data[:n]
	if len(data) <= MaxScanBytes {
		return string(data)
	}
	cut := MaxScanBytes
	for cut > 0 {
		r, n := utf8.DecodeLastRune(data[:cut])
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			break
		}
		cut -= n
	}
	return string(data[:cut])
}

func (v readsView) Given(val string) bool {
	t := v.t
	r := &t.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.inputDone {
		r.inputDone = true
		if f := t.k.finder(); f != nil && t.input != nil {
			vals, _ := f.FindValues(scanText(t.input), MaxSeenValues)
			r.input = make(map[[32]byte]struct{}, len(vals))
			for _, x := range vals {
				r.input[sha256.Sum256([]byte(x))] = struct{}{}
			}
		}
	}
	_, ok := r.input[sha256.Sum256([]byte(val))]
	return ok
}

func (v readsView) Seen(val string, match func(string) bool) bool {
	r := &v.t.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, taint := range r.values[sha256.Sum256([]byte(val))] {
		if match(taint) {
			return true
		}
	}
	return false
}

// noteRead records the values of b, the first time t reads it, when some
// constraint of the kernel may ask (seen).
func (t *Task) noteRead(b *kindapi.Blob) {
	if !t.k.seenUsed.Load() {
		return
	}
	f := t.k.finder()
	if f == nil {
		return
	}
	r := &t.reads
	r.mu.Lock()
	if _, done := r.blobs[b.ID()]; done || len(r.blobs) >= MaxSeenBlobs {
		r.mu.Unlock()
		return
	}
	if r.blobs == nil {
		r.blobs = map[uint64]struct{}{}
		r.values = map[[32]byte][]string{}
	}
	r.blobs[b.ID()] = struct{}{}
	room := MaxSeenValues - len(r.values)
	r.mu.Unlock()
	if room <= 0 {
		return
	}
	// Scan outside the lock: a blob's bytes do not change.
	vals, _ := f.FindValues(scanText(b), room)
	taints := b.Label().Integ()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range vals {
		h := sha256.Sum256([]byte(x))
		have, ok := r.values[h]
		if !ok && len(r.values) >= MaxSeenValues {
			continue
		}
		for _, taint := range taints {
			if len(have) >= MaxSeenTaints {
				break
			}
			if !containsString(have, taint) {
				have = append(have, taint)
			}
		}
		r.values[h] = have
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
