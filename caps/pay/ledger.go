package pay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// MaxKeys bounds the idempotency keys one capability tree remembers.
const MaxKeys = 1 << 16

// tree is what a root grant and everything derived from it share: the
// idempotency keys used anywhere in it. (Budgets and uses are the
// kernel's: kernel/allowance.go.)
type tree struct {
	id string // namespaces the keys sent to the provider
	// seeded: id derives from the run's seed, and so do the keys of
	// charges the guest gave none (auto-1, auto-2, ... in call order), so
	// a run repeated under the seed sends the provider the same keys.
	seeded bool
	auto   atomic.Int64
	mu     sync.Mutex
	keys   map[string]*keyEntry // protected by mu
}

// newTree makes a grant's tree: its id random, or, when the grant context
// has a seed, derived from the seed and the grant's name.
func newTree(g kindapi.GrantContext) *tree {
	t := &tree{keys: make(map[string]*keyEntry)}
	if g.Seed != "" {
		sum := sha256.Sum256([]byte("mandate pay tree\x00" + g.Seed + "\x00" + g.Name))
		t.id, t.seeded = hex.EncodeToString(sum[:12]), true
		return t
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	t.id = hex.EncodeToString(b[:])
	return t
}

// autoKey is the key of a charge the guest gave none.
func (t *tree) autoKey() string {
	if t.seeded {
		return fmt.Sprintf("auto-%d", t.auto.Add(1))
	}
	return "auto-" + randomHex(12)
}

// keyEntry is an idempotency key in use in a tree: pending while its
// charge is in flight (done open), then holding the receipt.
type keyEntry struct {
	payee    string
	currency string
	amount   int64
	done     chan struct{}
	receipt  []byte // set before done is closed, on success
	// unknown: the charge was sent and no answer came (a timeout): it
	// may have happened, and its amount stays debited. A retry with the
	// key asks the provider again (which answers with the original charge,
	// if any) without debiting again.
	unknown bool
}

// finish ends a claim: with the receipt on success, or giving the key up
// (receipt nil), or, when unknown, keeping it as a charge that may have
// happened.
// (receipt nil) so that a retry may charge.
func (t *tree) finish(key string, e *keyEntry, receipt []byte, unknown bool) {
	t.mu.Lock()
	switch {
	case receipt != nil:
		e.receipt = receipt
	case unknown:
		e.unknown = true
	default:
		delete(t.keys, key)
	}
	t.mu.Unlock()
	close(e.done)
}

// keyState is what peek found of an idempotency key.
type keyState int

const (
	keyFree     keyState = iota // never used: the call charges
	keyDone                     // charged: the call replays the receipt
	keyInFlight                 // being charged by another call: the call waits and replays
	keyUnknown                  // sent before without an answer: the call asks again, debiting nothing
)

// peek looks key up for a charge of amount currency to payee without
// claiming it. A key used for a different charge is EDENIED.
func (t *tree) peek(key, payee, currency string, amount int64) (keyState, []byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.keys[key]
	if !ok {
		return keyFree, nil, nil
	}
	if e.payee != payee || e.currency != currency || e.amount != amount {
		return 0, nil, kindapi.Errorf(abi.EDENIED,
			"pay: idempotency key %s was used for a charge of %s %s to %s, not %s %s to %s",
			kindapi.QuoteTrunc(key), formatMinor(e.amount), e.currency, e.payee, formatMinor(amount), currency, payee)
	}
	switch {
	case e.receipt != nil:
		return keyDone, e.receipt, nil
	case e.unknown:
		return keyUnknown, nil, nil
	}
	return keyInFlight, nil, nil
}

// await waits for the charge in flight under key and returns its receipt;
// if that charge failed (the key was given up) or another was started, it
// is EIO asking for a retry: a call prepared as a replay spends nothing,
// so it never charges itself.
func (t *tree) await(ctx context.Context, key string) ([]byte, error) {
	t.mu.Lock()
	e, ok := t.keys[key]
	t.mu.Unlock()
	if ok {
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, kindapi.Errorf(abi.ETIMEDOUT, "pay: waiting for the charge with idempotency key %s: %v", kindapi.QuoteTrunc(key), ctx.Err())
		}
		if e.receipt != nil {
			return e.receipt, nil
		}
	}
	return nil, kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "pay: the charge with idempotency key %s failed meanwhile; nothing was charged: retry the call", kindapi.QuoteTrunc(key)))
}

// tryClaim claims key for a charge without waiting: the caller owns the
// key (owner set) when nobody used it, or is told its state otherwise. A
// key used for a different charge is EDENIED.
func (t *tree) tryClaim(key, payee, currency string, amount int64) (owner *keyEntry, state keyState, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.keys[key]
	if ok {
		if e.payee != payee || e.currency != currency || e.amount != amount {
			return nil, 0, kindapi.Errorf(abi.EDENIED,
				"pay: idempotency key %s was used for a charge of %s %s to %s, not %s %s to %s",
				kindapi.QuoteTrunc(key), formatMinor(e.amount), e.currency, e.payee, formatMinor(amount), currency, payee)
		}
		switch {
		case e.receipt != nil:
			return nil, keyDone, nil
		case !e.unknown:
			return nil, keyInFlight, nil
		}
		// Sent before without an answer: this call owns the retry.
		e = &keyEntry{payee: payee, currency: currency, amount: amount, done: make(chan struct{})}
		t.keys[key] = e
		return e, keyUnknown, nil
	}
	if len(t.keys) >= MaxKeys {
		return nil, 0, kindapi.Errorf(abi.ELIMIT, "pay: %d idempotency keys in use (max %d)", len(t.keys), MaxKeys)
	}
	e = &keyEntry{payee: payee, currency: currency, amount: amount, done: make(chan struct{})}
	t.keys[key] = e
	return e, keyFree, nil
}

// claimed is a key owned by one call: finished exactly once, with the
// receipt or giving the key up.
type claimed struct {
	t    *tree
	key  string
	e    *keyEntry
	once sync.Once
}

func (c *claimed) finish(receipt []byte, unknown bool) {
	c.once.Do(func() { c.t.finish(c.key, c.e, receipt, unknown) })
}
